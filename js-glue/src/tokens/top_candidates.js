// The best candidates of a logits vector without sorting the whole vocabulary: a bounded heap
// keeps the k best in one pass, which costs about what an argmax does when k is small next to
// the vocabulary (almost every logit is rejected by one comparison with the heap's worst).
//
// "Best" is one total order, the one the sampler's documented semantics use: higher logit
// first, and among equal logits the lower id first. -Infinity and NaN logits are never
// candidates.

/** a before b in the candidate order: [value, id] pairs. */
const better = (va, ia, vb, ib) => va > vb || (va === vb && ia < ib);

/**
 * The k best ids of x, best first (fewer when fewer are candidates).
 * x [n_vocab] -> Int32Array [min(k, candidates)]
 * @example topCandidates(logits, 40) // the 40 highest logits' ids, highest first
 */
export function topCandidates(x, k) {
  const heapV = new Float64Array(k);
  const heapI = new Int32Array(k);
  let size = 0;
  // What a logit must beat to enter: any finite value until the heap is full, then the worst
  // kept (ids arrive in ascending order, so a value equal to it is never better).
  let bar = -Infinity;
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    if (!(v > bar)) continue;
    if (size < k) siftUp(heapV, heapI, size++, v, i);
    else siftDown(heapV, heapI, size, v, i);
    if (size === k) bar = heapV[0];
  }
  const ids = Array.from(heapI.subarray(0, size));
  ids.sort((a, b) => (better(x[a], a, x[b], b) ? -1 : 1));
  return Int32Array.from(ids);
}

// A min-heap on the candidate order: the root is the worst candidate kept.
function siftUp(heapV, heapI, at, v, id) {
  let j = at;
  while (j > 0) {
    const parent = (j - 1) >> 1;
    if (!better(heapV[parent], heapI[parent], v, id)) break;
    heapV[j] = heapV[parent];
    heapI[j] = heapI[parent];
    j = parent;
  }
  heapV[j] = v;
  heapI[j] = id;
}

// Replaces the root with [v, id] and restores the heap.
function siftDown(heapV, heapI, size, v, id) {
  let j = 0;
  for (;;) {
    const left = 2 * j + 1;
    if (left >= size) break;
    const right = left + 1;
    const worse = right < size && better(heapV[left], heapI[left], heapV[right], heapI[right]) ? right : left;
    if (!better(v, id, heapV[worse], heapI[worse])) break;
    heapV[j] = heapV[worse];
    heapI[j] = heapI[worse];
    j = worse;
  }
  heapV[j] = v;
  heapI[j] = id;
}
