// The GGUF header of a local model file, parsed by the C++ reader in a single-thread module.
import { readGgufHeader } from './gguf_header.js';
import { LocalFileSource } from './object_source_local.js';
import { loadSingleThreadModule } from './wasm_module.js';

/** @example const { metadata, tensors } = await readModelHeader('model.gguf'); */
export async function readModelHeader(path, options) {
  const lf = await loadSingleThreadModule();
  const source = await LocalFileSource.open(path);
  try {
    return await readGgufHeader(lf, (s, e) => source.read(s, e), source.size, options);
  } finally {
    await source.close();
  }
}

/** Number of decoder layers the header declares. */
export function layerCount(header) {
  return Number(header.metadata[`${header.metadata['general.architecture']}.block_count`]);
}
