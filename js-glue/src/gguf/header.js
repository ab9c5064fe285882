// A model's GGUF header as the host keeps it: read by range and handed to the C++ parser (the
// host never parses GGUF itself), with the engine's configuration of the model and the header's
// bytes, so that another module (a pipeline's local node) parses it without reading it again.
// No node: imports: edge workers use it too.
const FIRST_READ = 1 << 20;

/**
 * @typedef {object} ModelHeader
 * @property {object} metadata GGUF key-value pairs (large arrays summarized)
 * @property {Array<{name: string, type: string, ne: number[], offset: number, n_bytes: number}>} tensors
 * @property {number} file_size
 * @property {number} data_offset
 * @property {import('../../index.d.ts').ModelInfo} info the configuration as the engine reads it
 *   (lf_model_info_json; model_info.schema.json its fields)
 * @property {Uint8Array} bytes the file's first bytes, enough for the parser
 * @property {string} [identity] the source's identity when read (its ETag, or size and mtime): a
 *   node handed the header checks that its source is the same object
 */

/**
 * The engine's configuration of the model in a parsed header: the one place the host learns the
 * layer count, the widths and which layers slide. Throws LayerfoldError when the header is not a
 * model the engine runs.
 * @param lf a bound module (wasm/capi.js)
 * @param {number} gguf an lf_gguf* of that module
 * @returns {import('../../index.d.ts').ModelInfo}
 * @example const { n_layer, n_embd } = readModelInfo(lf, gguf);
 */
export function readModelInfo(lf, gguf) {
  return lf.json(lf.fn.lf_model_info_json(gguf));
}

// bytes [0, n) of a file of fileSize bytes -> lf_gguf*, or null when the parser needs more.
function parse(lf, bytes, fileSize) {
  const ptr = lf.alloc(bytes.length);
  lf.bytes().set(bytes, ptr);
  const handle = lf.fn.lf_gguf_parse(ptr, bytes.length, fileSize);
  const error = handle ? null : lf.lastError();
  lf.free(ptr);
  if (handle) return handle;
  if (error.code === 'need_more_data') return null;
  throw error;
}

/**
 * Reads the header of `source` ({size, read(start, end)}) by growing ranges from byte 0 until
 * the parser accepts it, whatever the file's architecture (a drafter's too). -> { gguf: the
 * lf_gguf* (free it with lf.fn.lf_gguf_free), header: its table and metadata, without info }
 * @example const { gguf, header } = await openGgufHeader(lf, source); header.tensors.length
 */
export async function openGgufHeader(lf, source) {
  let want = Math.min(source.size, FIRST_READ);
  for (;;) {
    const bytes = await source.read(0, want);
    const gguf = parse(lf, bytes, source.size);
    if (gguf) {
      try {
        return { gguf, header: { ...lf.json(lf.fn.lf_gguf_json(gguf, 0)), bytes, identity: source.identity } };
      } catch (error) {
        lf.fn.lf_gguf_free(gguf);
        throw error;
      }
    }
    want = Math.min(source.size, Math.max(lf.fn.lf_gguf_needed_bytes(), want * 2));
  }
}

/**
 * openGgufHeader for a model the engine runs, with its configuration as header.info.
 * @example const { gguf, header } = await openModelHeader(lf, source); header.info.n_layer
 */
export async function openModelHeader(lf, source) {
  const { gguf, header } = await openGgufHeader(lf, source);
  try {
    return { gguf, header: { ...header, info: readModelInfo(lf, gguf) } };
  } catch (error) {
    lf.fn.lf_gguf_free(gguf);
    throw error;
  }
}

/**
 * The lf_gguf* of a header read before (by another module, say), parsed from its bytes in
 * module lf without reading the file. Free it with lf.fn.lf_gguf_free.
 * @example const gguf = reparseModelHeader(lf, pipeline.header);
 */
export function reparseModelHeader(lf, header) {
  const gguf = parse(lf, header.bytes, header.file_size);
  if (!gguf) throw new RangeError(`header.bytes holds ${header.bytes.length} bytes, fewer than the header needs`);
  return gguf;
}

/**
 * Whether make-model made the model (its general.name says "layerfold synthetic …"): random
 * weights, whose text means nothing, however well the engine runs them.
 * @example if (isSynthetic(pipeline.header)) console.error('note: synthetic weights');
 */
export function isSynthetic(header) {
  return String(header.metadata['general.name'] ?? '').startsWith('layerfold synthetic');
}
