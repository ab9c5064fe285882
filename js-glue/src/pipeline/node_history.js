// What a pipeline has sent one node for one session, kept so that a node that lost the session
// gets its cache rebuilt by replaying it: one entry record per step that reached the node, in
// order, and how many positions the node has run. Nodes always run whole entries, so the
// positions run fall on an entry boundary.

/**
 * An entry: { input, rows, exitState, perLayer, kvRows }. input: the step's token ids (first
 * node) or hidden states [rows, n_embd] (the others); exitState: the early-exit state its last
 * row arrived in (null: fresh); perLayer: models with per-layer embeddings, every layer's inputs
 * [n_layer, rows, n_pl]; kvRows: the K/V rows the nodes before this one handed out,
 * { [layer]: [rows, ...] } (null: none).
 */
export class NodeHistory {
  entries = [];
  positions = 0;  // positions the node has run (its cache length as far as we know)
  lost = false;   // the node's session was dropped (a refused cut): the next forward replays first

  /** Positions in the entries. */
  get available() {
    return this.entries.reduce((sum, entry) => sum + entry.rows, 0);
  }

  /**
   * The entries from position `from` on (an entry boundary).
   * @example for (const entry of history.entriesFrom(history.positions)) send(entry);
   */
  entriesFrom(from) {
    const out = [];
    let start = 0;
    for (const entry of this.entries) {
      if (start >= from) out.push(entry);
      start += entry.rows;
    }
    return out;
  }

  /**
   * Keeps the first n positions: the entry across n keeps its first rows, of its input, its
   * per-layer inputs (nPl values per row and layer) and its K/V rows.
   * @example history.cut(40, header.info.n_embd_per_layer ?? 0);
   */
  cut(n, nPl) {
    let start = 0;
    let k = 0;
    for (; k < this.entries.length && start < n; k++) {
      const entry = this.entries[k];
      if (start + entry.rows > n) this.entries[k] = firstRowsOf(entry, n - start, nPl);
      start += entry.rows;
    }
    this.entries.length = k;
    this.positions = Math.min(this.positions, n);
  }
}

// The entry with only its first `keep` rows.
function firstRowsOf({ input, rows, exitState, perLayer, kvRows }, keep, nPl) {
  return {
    input: input.slice(0, keep * (input.length / rows)),
    rows: keep,
    exitState,
    perLayer: perLayer && firstRows(perLayer, rows, keep, nPl),
    kvRows: kvRows && Object.fromEntries(Object.entries(kvRows).map(([layer, values]) => [layer, values.slice(0, keep * (values.length / rows))])),
  };
}

// The first `keep` of `rows` rows of each layer of per-layer inputs [n_layer, rows, nPl].
function firstRows(perLayer, rows, keep, nPl) {
  const layers = perLayer.length / (rows * nPl);
  const out = new Float32Array(layers * keep * nPl);
  for (let l = 0; l < layers; l++) out.set(perLayer.subarray(l * rows * nPl, (l * rows + keep) * nPl), l * keep * nPl);
  return out;
}
