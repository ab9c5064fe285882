// What a pipeline has sent one node for one session, kept so that a node that lost the session
// gets its cache rebuilt by replaying it: one entry record per step that reached the node, in
// order, and how many positions the node has run. Nodes always run whole entries, so the
// positions run fall on an entry boundary; the positions a node still holds after a cut that
// returned to a checkpoint (held) need not, and a replay from there starts mid-entry (runFrom).

/**
 * An entry: { input, rows, span, media, exitState, perLayer, kvRows }. input: the step's token ids
 * (first node; a media item's rows [rows, n_embd] there when `media`) or hidden states [rows,
 * n_embd] (the others); span: its rows are one media span (PipelineCore.stepMedia); exitState:
 * the early-exit state its last row arrived in (null: fresh); perLayer: models with per-layer
 * embeddings, every layer's inputs [n_layer, rows, n_pl]; kvRows: the K/V rows the nodes before this one handed out,
 * { [layer]: [rows, ...] } (null: none).
 */
export class NodeHistory {
  entries = [];
  positions = 0;  // positions the node has run (its cache length as far as we know)
  // null, or the positions the node's session holds of those when it holds fewer: 0 when it was
  // dropped (a refused cut), a checkpoint's position when a cut returned there. The next forward
  // replays the rest first.
  held = null;

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
   * The positions [start, end) of the span entry that a cut to n would split, or null.
   * @example history.spanAcross(40) // [35, 315]: an image's rows
   */
  spanAcross(n) {
    let start = 0;
    for (const entry of this.entries) {
      if (entry.span && start < n && n < start + entry.rows) return [start, start + entry.rows];
      start += entry.rows;
    }
    return null;
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
      if (start + entry.rows > n) this.entries[k] = rowsOf(entry, 0, n - start, nPl);
      start += entry.rows;
    }
    this.entries.length = k;
    this.positions = Math.min(this.positions, n);
  }

  /**
   * The positions [from, positions) as {startPos, entry}: the entry across `from` as its rows
   * from there on.
   * @example for (const { startPos, entry } of history.runFrom(history.held, nPl)) replay(startPos, entry);
   */
  runFrom(from, nPl) {
    const out = [];
    let start = 0;
    for (const entry of this.entries) {
      if (start >= this.positions) break;
      if (start + entry.rows > from) {
        out.push(start >= from ? { startPos: start, entry } : { startPos: from, entry: rowsOf(entry, from - start, entry.rows, nPl) });
      }
      start += entry.rows;
    }
    return out;
  }
}

// The entry's rows [begin, end).
function rowsOf({ input, rows, media, exitState, perLayer, kvRows }, begin, end, nPl) {
  const slice = (values) => values.slice(begin * (values.length / rows), end * (values.length / rows));
  return {
    input: slice(input),
    rows: end - begin,
    ...(media ? { media } : {}),
    exitState,
    perLayer: perLayer && layerRows(perLayer, rows, begin, end, nPl),
    kvRows: kvRows && Object.fromEntries(Object.entries(kvRows).map(([layer, values]) => [layer, slice(values)])),
  };
}

// Rows [begin, end) of each layer of per-layer inputs [n_layer, rows, nPl].
function layerRows(perLayer, rows, begin, end, nPl) {
  const layers = perLayer.length / (rows * nPl);
  const keep = end - begin;
  const out = new Float32Array(layers * keep * nPl);
  for (let l = 0; l < layers; l++) out.set(perLayer.subarray((l * rows + begin) * nPl, (l * rows + end) * nPl), l * keep * nPl);
  return out;
}
