// The rows of per_layer_token_embd a first node reads for the tokens it sees, instead of holding
// the table (E2B: 2.35 B values; docs/forward-pass.md, "The per-layer table by rows"). Row id is
// one contiguous byte range of the tensor, [offset + id · rowBytes, + rowBytes); the rows of one
// call are read as few ranges (a run of adjacent ids is one read), from the node's object source
// (local file, HTTPS, S3, R2 binding, through the verified disk cache where it has one), and kept
// in a bounded least-recently-used cache, so a token seen before is not read again.
import { LayerfoldError } from '../wasm/capi.js';

/** The row cache a node keeps unless told otherwise: 8 MiB (E2B in Q8_0: 881 rows of 9 520 bytes). */
export const DEFAULT_ROW_CACHE_BYTES = 8 * 2 ** 20;

/**
 * Bytes the cache of rows may hold: cacheBytes, but never more than the whole table.
 * @example rowCacheBytes({ rowBytes: 9520, nVocab: 262144, cacheBytes: DEFAULT_ROW_CACHE_BYTES }) // 8 386 120
 */
export function rowCacheBytes({ rowBytes, nVocab, cacheBytes }) {
  return Math.min(Math.floor(cacheBytes / rowBytes), nVocab) * rowBytes;
}

export class PerLayerRows {
  #source;
  #offset;
  #cache = new Map();  // id -> Uint8Array [rowBytes], least recently used first
  #maxRows;

  /**
   * source: an opened object source ({read, readInto, close}), handed over (close() closes it);
   * offset: the file offset of per_layer_token_embd's data; rowBytes: one row's bytes
   * (lf_node_needs_json's per_layer_row_bytes); cacheBytes: what the cache of rows may hold.
   * @example const rows = new PerLayerRows(source, { offset: table.offset, rowBytes: 9520, nVocab: 262144, cacheBytes: 8 * 2 ** 20 });
   */
  constructor(source, { offset, rowBytes, nVocab, cacheBytes = DEFAULT_ROW_CACHE_BYTES }) {
    this.#source = source;
    this.#offset = offset;
    this.rowBytes = rowBytes;
    this.nVocab = nVocab;
    this.#maxRows = rowCacheBytes({ rowBytes, nVocab, cacheBytes }) / rowBytes;
    /** Range reads made, the bytes and rows they brought, and rows served from the cache. */
    this.stats = { reads: 0, bytesRead: 0, rowsRead: 0, cacheHits: 0 };
  }

  /** Bytes the cached rows hold now (at most the cacheBytes given, rounded down to whole rows). */
  get cachedBytes() {
    return this.#cache.size * this.rowBytes;
  }

  /**
   * token ids -> their distinct ids, ascending, and those rows' bytes, one after another.
   * @example const { ids, bytes } = await rows.rows([2, 818, 2]); // ids [2, 818], bytes [2 · rowBytes]
   */
  async rows(tokens) {
    for (const [i, id] of [...tokens].entries()) {
      if (!Number.isInteger(id) || id < 0 || id >= this.nVocab) {
        throw new LayerfoldError('invalid_argument', `token id ${id} at position ${i} is outside [0, ${this.nVocab})`);
      }
    }
    const ids = Int32Array.from(new Set(tokens)).sort();
    const bytes = new Uint8Array(ids.length * this.rowBytes);
    const missing = [];
    for (const [i, id] of ids.entries()) {
      const row = this.#cache.get(id);
      if (row === undefined) {
        missing.push(i);
        continue;
      }
      this.#cache.delete(id);
      this.#cache.set(id, row);
      bytes.set(row, i * this.rowBytes);
      this.stats.cacheHits++;
    }
    await Promise.all(this.#runs(ids, missing).map(([first, last]) => this.#read(ids, first, last, bytes)));
    for (const i of missing) this.#keep(ids[i], bytes.slice(i * this.rowBytes, (i + 1) * this.rowBytes));
    return { ids, bytes };
  }

  // Indices [first, last] into the ascending ids of each run of missing rows with adjacent ids.
  #runs(ids, missing) {
    const runs = [];
    for (const i of missing) {
      const run = runs.at(-1);
      if (run && run[1] === i - 1 && ids[i] === ids[i - 1] + 1) run[1] = i;
      else runs.push([i, i]);
    }
    return runs;
  }

  async #read(ids, first, last, bytes) {
    const start = this.#offset + ids[first] * this.rowBytes;
    const end = this.#offset + (ids[last] + 1) * this.rowBytes;
    await this.#source.readInto(start, end, bytes.subarray(first * this.rowBytes, (last + 1) * this.rowBytes));
    this.stats.reads++;
    this.stats.bytesRead += end - start;
    this.stats.rowsRead += last - first + 1;
  }

  #keep(id, row) {
    if (this.#maxRows === 0) return;
    if (this.#cache.size >= this.#maxRows) this.#cache.delete(this.#cache.keys().next().value);
    this.#cache.set(id, row);
  }

  /** Closes the source. */
  close() {
    this.#cache.clear();
    return this.#source.close();
  }
}
