// What a first node makes of token ids: their embeddings and, on a model with per-layer
// embeddings (gemma4 E2B/E4B), every layer's per-layer input, computed from the whole table in
// WASM memory or from the tokens' rows read by range (per_layer_rows.js).
import { LayerfoldError } from '../wasm/capi.js';
import { withCopies } from '../wasm/wasm_copies.js';
import { withBuffers } from './engine_forward.js';

export class TokenInputs {
  #lf;
  #model;  // EngineModel
  #rows;   // PerLayerRows, or null when the table is loaded whole (or the model has none)
  #nEmbdPerLayer;

  /** @example const inputs = new TokenInputs(lf, model, rows, header.info.n_embd_per_layer ?? 0); */
  constructor(lf, model, rows, nEmbdPerLayer) {
    this.#lf = lf;
    this.#model = model;
    this.#rows = rows;
    this.#nEmbdPerLayer = nEmbdPerLayer;
  }

  /** LayerNode.embed: token ids -> hidden [n, n_embd]. */
  embed(tokens) {
    const ids = Int32Array.from(tokens);
    return withBuffers(this.#lf, ids, ids.length * this.#model.nEmbd, (inPtr, outPtr) => this.#lf.fn.lf_embed(this.#model.ptr, inPtr, ids.length, outPtr));
  }

  /** LayerNode.perLayerInputs: token ids and their embed() -> [n_layer, n, nEmbdPerLayer]. */
  async perLayerInputs(tokens, hidden) {
    const lf = this.#lf;
    const ids = Int32Array.from(tokens);
    const outFloats = this.#model.nLayer * ids.length * this.#nEmbdPerLayer;
    const table = this.#rows;
    if (!table) {
      return withCopies(lf, [ids], ([idsPtr]) => withBuffers(lf, hidden, outFloats,
        (inPtr, outPtr) => lf.fn.lf_per_layer_inputs(this.#model.ptr, idsPtr, ids.length, inPtr, outPtr)));
    }
    const rows = await table.rows(ids);
    if (!this.#model.ptr) throw new LayerfoldError('failed_precondition', 'the node was closed while its per-layer rows were read');
    return withCopies(lf, [ids, rows.ids, rows.bytes], ([idsPtr, rowIdsPtr, rowsPtr]) => withBuffers(lf, hidden, outFloats,
      (inPtr, outPtr) => lf.fn.lf_per_layer_inputs_from_rows(this.#model.ptr, idsPtr, ids.length, inPtr, rowIdsPtr, rows.ids.length,
        rowsPtr, table.rowBytes, outPtr)));
  }

  /** LayerNode.perLayerRowStats: what reading the table by rows has cost, or null. */
  rowStats() {
    const rows = this.#rows;
    return rows && { ...rows.stats, cachedBytes: rows.cachedBytes, rowBytes: rows.rowBytes };
  }

  /** Closes the reader of rows and the source it reads from; close() stays synchronous, a failure of theirs ignored. */
  close() {
    const rows = this.#rows;
    this.#rows = null;
    if (rows) Promise.resolve().then(() => rows.close()).catch(() => {});
  }
}
