// The GGUF header of a model (a path or URL, see open_source.js), parsed by the C++ reader in a
// single-thread module.
import { readGgufHeader } from './gguf_header.js';
import { openSource } from './open_source.js';
import { loadSingleThreadModule } from './wasm_module.js';

/**
 * @param {{includeLargeArrays?: boolean}} [options] plus openSource options (cacheDir, retries...)
 * @example const { metadata, tensors } = await readModelHeader('https://example.com/model.gguf');
 */
export async function readModelHeader(model, { includeLargeArrays, ...sourceOptions } = {}) {
  const lf = await loadSingleThreadModule();
  const source = await openSource(model, sourceOptions);
  try {
    return await readGgufHeader(lf, (s, e) => source.read(s, e), source.size, { includeLargeArrays });
  } finally {
    await source.close();
  }
}

/** Number of decoder layers the header declares. */
export function layerCount(header) {
  return Number(header.metadata[`${header.metadata['general.architecture']}.block_count`]);
}
