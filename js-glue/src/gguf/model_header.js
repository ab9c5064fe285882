// The GGUF header of a model (a path or URL, see open_source.js), parsed by the C++ reader in a
// single-thread module.
import { openGgufHeader, readGgufHeader } from './header.js';
import { openSource } from '../sources/open_source.js';
import { Tokenizer } from '../tokens/tokenizer.js';
import { loadSingleThreadModule } from '../wasm/load_node.js';

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

/**
 * The header and the model's tokenizer from one read of the header: what a pipeline's
 * coordinator needs when its nodes hold the tensors.
 * @example const { header, tokenizer } = await readModelTokenizer('model.gguf');
 */
export async function readModelTokenizer(model, sourceOptions = {}) {
  const lf = await loadSingleThreadModule();
  const source = await openSource(model, sourceOptions);
  let gguf = 0;
  try {
    gguf = await openGgufHeader(lf, (s, e) => source.read(s, e), source.size);
    const header = JSON.parse(lf.readCString(lf.fn.lf_gguf_json(gguf, 0)));
    return { header, tokenizer: Tokenizer.fromGguf(lf, gguf) };
  } finally {
    if (gguf) lf.fn.lf_gguf_free(gguf);
    await source.close();
  }
}

/** Number of decoder layers the header declares. */
export function layerCount(header) {
  return Number(header.metadata[`${header.metadata['general.architecture']}.block_count`]);
}
