// What POST /v1/logits may cost and how its answer is made. Logits are rows × n_vocab floats
// (a 262144-token vocabulary makes one row 1 MiB), so a request of many rows is refused by its
// size before the engine runs, the engine computes them a few rows at a time (its buffers and
// the host's copy stay one chunk), and the answer is either those chunks streamed as they are
// pulled or, with top_k, a JSON reply bounded in entries.
import { HttpError } from './http_error.js';

const F32 = 4;

/** Default bound on one request's logits: rows × n_vocab × 4 bytes (64 rows of a 262144-token vocabulary). */
export const DEFAULT_MAX_LOGITS_BYTES = 64 * 1024 * 1024;
/** rows × top_k entries of a JSON answer (about 60 bytes each: a few MB of JSON). */
export const MAX_TOP_K_ENTRIES = 65536;
// Logits computed per engine call: as many rows as fit here, at least one.
const CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * 400 answer_too_large when the logits of `rows` rows exceed maxLogitsBytes, or when rows × k
 * entries of a top_k answer exceed MAX_TOP_K_ENTRIES; the message says how many rows fit.
 * @example checkLogitsSize({ rows: 2048, nVocab: 262144, k: null, maxLogitsBytes: DEFAULT_MAX_LOGITS_BYTES }) // throws: at most 64 rows
 */
export function checkLogitsSize({ rows, nVocab, k, maxLogitsBytes }) {
  const bytes = rows * nVocab * F32;
  if (bytes > maxLogitsBytes) {
    const fit = Math.floor(maxLogitsBytes / (nVocab * F32));
    throw new HttpError('answer_too_large', `logits of ${rows} rows × n_vocab ${nVocab} × 4 = ${bytes} bytes exceed the node's max_logits_bytes ${maxLogitsBytes}: ` +
      `send at most ${fit} rows per request`);
  }
  if (k !== null && rows * k > MAX_TOP_K_ENTRIES) {
    throw new HttpError('answer_too_large', `top_k ${k} over ${rows} rows is ${rows * k} entries, above the node's ${MAX_TOP_K_ENTRIES} per request: ` +
      `ask at most top_k ${Math.max(1, Math.floor(MAX_TOP_K_ENTRIES / rows))} for ${rows} rows, or fewer rows`);
  }
}

/** Rows of logits per engine call for this vocabulary. */
export function chunkRows(nVocab) {
  return Math.max(1, Math.floor(CHUNK_BYTES / (nVocab * F32)));
}

// Ids of the k largest values of row, largest first, equal values by id: a bounded min-heap,
// so k of 262144 costs one pass rather than a sort of the vocabulary.
function topIds(row, k) {
  const worse = (a, b) => row[a] < row[b] || (row[a] === row[b] && a > b);  // a ranks below b
  const heap = [];
  const down = (i) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && worse(heap[l], heap[m])) m = l;
      if (r < heap.length && worse(heap[r], heap[m])) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m], heap[i]];
      i = m;
    }
  };
  for (let id = 0; id < row.length; id++) {
    if (heap.length < k) {
      heap.push(id);
      for (let i = heap.length - 1; i > 0;) {
        const p = (i - 1) >> 1;
        if (!worse(heap[i], heap[p])) break;
        [heap[i], heap[p]] = [heap[p], heap[i]];
        i = p;
      }
    } else if (worse(heap[0], id)) {
      heap[0] = id;
      down(0);
    }
  }
  return heap.sort((a, b) => (worse(a, b) ? 1 : -1));
}

/**
 * logits [rows, nVocab] -> [{top: [{id, logit, p}, ...k]}] per row, p the softmax over the whole
 * row (log-sum-exp in double, as tokens/logits.js logSoftmax).
 * @example topKRows(logits, 1024, 5) // [{ top: [{ id: 17, logit: 3.2, p: 0.04 }, ...] }]
 */
export function topKRows(logits, nVocab, k) {
  const out = [];
  for (let r = 0; r * nVocab < logits.length; r++) {
    const row = logits.subarray(r * nVocab, (r + 1) * nVocab);
    let max = -Infinity;
    for (let i = 0; i < row.length; i++) max = Math.max(max, row[i]);
    let sum = 0;
    for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
    const logZ = max + Math.log(sum);
    out.push({ top: topIds(row, k).map((id) => ({ id, logit: row[id], p: Math.exp(row[id] - logZ) })) });
  }
  return out;
}
