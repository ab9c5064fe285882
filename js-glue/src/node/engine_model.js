// The engine's model of one node (an lf_model*): the node's tensors placed in WASM memory
// straight from the object source, then loaded by the engine (which may lay them out anew).
// `ptr` is 0 before the load and once closed: the node's other parts tell a closed node by it.
import { LayerfoldError } from '../wasm/capi.js';
import { checkSample } from '../sources/unvalidated.js';
import { cString, withCStrings } from '../wasm/wasm_copies.js';

/**
 * The error of a call still waiting when the node was closed: its engine is gone.
 * @example if (!model.ptr) throw closedError('readProbe');
 */
export function closedError(what) {
  return new LayerfoldError('failed_precondition', `${what}: the node was closed before the call could run`);
}

export class EngineModel {
  /** The lf_model* (0: not loaded, or closed). */
  ptr = 0;
  /** Bytes of tensors read from the source. */
  bytesLoaded = 0;
  #lf;
  #buffers = [];  // the placed tensors' WASM allocations, freed with the model

  constructor(lf) {
    this.#lf = lf;
  }

  /**
   * Reads the tensors `names` of the header's table from the source into WASM memory and loads
   * layers [begin, end) from them (with the token embedding and the head as withEmbedding and
   * withHead say); then nEmbd, nVocab and nLayer are the engine's. Its sessions' KV caches hold
   * K and V in cacheTypeK and cacheTypeV ('f16', 'q8_0' or 'q4_0') and take media spans of up to
   * maxSpan rows (lf_model_set_max_span).
   * @example await model.load(source, gguf, header, { names: needs.tensors, layers: [0, 2], withEmbedding: true, withHead: false, ffnDownLayout: 'units', perLayerRows: false, cacheTypeK: 'f16', cacheTypeV: 'f16', maxSpan: 0 });
   */
  async load(source, gguf, header, { names, layers: [begin, end], withEmbedding, withHead, ffnDownLayout, perLayerRows, cacheTypeK, cacheTypeV, maxSpan }) {
    const lf = this.#lf;
    const byName = new Map(header.tensors.map((t) => [t.name, t]));
    this.ptr = lf.fn.lf_model_create();
    if (!lf.fn.lf_model_set_threads(this.ptr, lf.threads)) throw lf.lastError();
    if (!lf.fn.lf_model_set_per_layer_rows(this.ptr, perLayerRows ? 1 : 0)) throw lf.lastError();
    withCStrings(lf, [ffnDownLayout], ([layout]) => {
      if (!lf.fn.lf_model_set_ffn_down_layout(this.ptr, layout)) throw lf.lastError();
    });
    withCStrings(lf, [cacheTypeK, cacheTypeV], ([k, v]) => {
      if (!lf.fn.lf_model_set_kv_types(this.ptr, k, v)) throw lf.lastError();
    });
    if (!lf.fn.lf_model_set_max_span(this.ptr, maxSpan)) throw lf.lastError();
    const placed = [];
    for (const name of names) {
      const info = byName.get(name);
      const ptr = lf.alloc(info.n_bytes);
      this.#buffers.push(ptr);
      await source.readInto(info.offset, info.offset + info.n_bytes, lf.bytes().subarray(ptr, ptr + info.n_bytes));
      this.bytesLoaded += info.n_bytes;
      placed.push({ offset: info.offset, bytes: () => lf.bytes().subarray(ptr, ptr + info.n_bytes) });
      const namePtr = cString(lf, name);
      lf.fn.lf_model_place_tensor(this.ptr, namePtr, ptr);
      lf.free(namePtr);
    }
    // Before the engine lays any weight out anew: the bytes placed are the bytes read.
    await checkSample(source.untracked ?? source, placed);
    if (!lf.fn.lf_model_load(this.ptr, gguf, begin, end, withEmbedding ? 1 : 0, withHead ? 1 : 0)) throw lf.lastError();
    this.nEmbd = lf.fn.lf_model_n_embd(this.ptr);
    this.nVocab = lf.fn.lf_model_n_vocab(this.ptr);
    this.nLayer = lf.fn.lf_model_n_layer(this.ptr);
  }

  /** Frees the model and its tensors' memory (the module stays open). */
  close() {
    if (this.ptr) this.#lf.fn.lf_model_free(this.ptr);
    for (const ptr of this.#buffers) this.#lf.free(ptr);
    this.#buffers = [];
    this.ptr = 0;
  }
}
