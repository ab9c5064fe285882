// Reads a GGUF header by range and hands it to the C++ parser: the host never parses GGUF
// itself. The range grows until the parser stops asking for more bytes.
const FIRST_READ = 1 << 20;

/**
 * Parses the header and returns the C++ handle (lf_gguf*); free it with lf.fn.lf_gguf_free.
 * @param lf a bound module (wasm_module.js)
 * @param {(start: number, end: number) => Promise<Uint8Array>} readRange bytes [start, end)
 * @param {number} fileSize
 * @example const gguf = await openGgufHeader(lf, (s, e) => source.read(s, e), source.size);
 */
export async function openGgufHeader(lf, readRange, fileSize) {
  let want = Math.min(fileSize, FIRST_READ);
  for (;;) {
    const prefix = await readRange(0, want);
    const ptr = lf.alloc(prefix.length);
    lf.bytes().set(prefix, ptr);
    const handle = lf.fn.lf_gguf_parse(ptr, prefix.length, fileSize);
    lf.free(ptr);
    if (handle) return handle;
    const error = lf.lastError();
    if (error.code !== 'need_more_data') throw error;
    want = Math.min(fileSize, Math.max(lf.fn.lf_gguf_needed_bytes(), want * 2));
  }
}

/**
 * The header as the C++ parser sees it: {version, alignment, data_offset, file_size, metadata, tensors}.
 * @param {{includeLargeArrays?: boolean}} [options] include tokens/merges/scores in full
 * @example const header = await readGgufHeader(lf, (s, e) => source.read(s, e), source.size);
 */
export async function readGgufHeader(lf, readRange, fileSize, { includeLargeArrays = false } = {}) {
  const handle = await openGgufHeader(lf, readRange, fileSize);
  try {
    return JSON.parse(lf.readCString(lf.fn.lf_gguf_json(handle, includeLargeArrays ? 1 : 0)));
  } finally {
    lf.fn.lf_gguf_free(handle);
  }
}
