// The header of a model given as a path or URL (sources/open_source.js), parsed by the C++ reader
// in a single-thread module: what a pipeline's coordinator, `inspect` and `plan` read, with no
// tensor bytes.
import { openSource } from '../sources/open_source.js';
import { Tokenizer } from '../tokens/tokenizer.js';
import { loadSingleThreadModule } from '../wasm/load_node.js';
import { openModelHeader } from './header.js';

/**
 * fn(lf, gguf, header) on the model's parsed header, in a single-thread module; the module and
 * source are released after (after its promise settles, for an async fn).
 * @example const needs = await withModelHeader('model.gguf', {}, (lf, gguf) => lf.json(lf.fn.lf_node_needs_json(gguf, 0, 2, 1, 0, 0, 64, 0, 0, 0, 0)));
 */
export async function withModelHeader(model, sourceOptions, fn) {
  const lf = await loadSingleThreadModule();
  const source = await openSource(model, sourceOptions);
  try {
    const { gguf, header } = await openModelHeader(lf, source);
    try {
      return await fn(lf, gguf, header);
    } finally {
      lf.fn.lf_gguf_free(gguf);
    }
  } finally {
    await source.close();
  }
}

/**
 * The model's header (gguf/header.js ModelHeader): metadata, tensors, the engine's configuration
 * `info`, and the bytes a LayerNode opened with it parses instead of reading them again.
 * @param {string|object} model a path, URL or R2 binding
 * @param {object} [sourceOptions] openSource options (cacheDir, retries, ...)
 * @example const { info, tensors } = await readModelHeader('https://example.com/model.gguf'); info.n_layer
 */
export async function readModelHeader(model, sourceOptions = {}) {
  return withModelHeader(model, sourceOptions, (lf, gguf, header) => header);
}

/**
 * The header and the model's tokenizer from one read of the header: what a pipeline's
 * coordinator needs when its nodes hold the tensors.
 * @example const { header, tokenizer } = await readModelTokenizer('model.gguf');
 */
export async function readModelTokenizer(model, sourceOptions = {}) {
  return withModelHeader(model, sourceOptions, (lf, gguf, header) => ({ header, tokenizer: Tokenizer.fromGguf(lf, gguf) }));
}
