// Next-token choice: greedy (temperature 0) or sampled through llama.cpp's chain (logit bias and
// penalties -> top-k -> top-p -> min-p -> temperature -> draw) with a seeded generator, so a run
// can be repeated exactly. The choice is defined as follows, and tests/js/tokens/sampler.test.mjs
// checks the fast path below against this definition written plainly with a full sort:
//   - x = the logits with the request's adjustments (logit_adjustments.js); -Infinity and NaN
//     are never chosen; m = the highest; candidates are ordered by logit, ties lower id first.
//   - temperature <= 0, or a +Infinity logit: the first candidate (no draw).
//   - top_k > 0 (and below n_vocab, else off): the first top_k candidates.
//   - top_p < 1: with w = exp(x - m) and Z their sum over the candidates (in ascending id
//     order), those with x >= t, t the highest logit whose candidates at or above it reach
//     top_p·Z (summed in candidate order; up to rounding, as the fast path sums by buckets and
//     its w come from a series, bucketExp):
//     a run of equal logits is kept or cut whole.
//   - min_p > 0: the candidates with x >= m + ln(min_p).
//   - the draw, with w = exp((x - m) · (1 / temperature)) and u the next number in [0, 1) of
//     mulberry32(seed):
//       with top_k: one u, V the sum of w over the candidates in ascending id order, and the
//       first candidate in that order whose running sum exceeds u·V;
//       without: rejection from per-block bounds. Ids fall in blocks of BLOCK; block b's bound
//       is its length times the w of its highest candidate (e_b; 0 without one). Each try takes
//       three u: the first picks block b in proportion to e_b (the first whose running sum
//       exceeds u·Σe), the second an id i of the block (floor(u · its length)), and the third
//       accepts i when it is a candidate and u < exp((x_i - x_best_b) · (1 / temperature)). After
//       MAX_TRIES refused tries, one more u draws as with top_k over every candidate.
// The rejection draw is what spares a pass of exponentials over the whole vocabulary: the
// block maxima come with the argmax pass that greedy decoding needs anyway, and a try costs a
// few operations; its expected number of tries is Σe / V (a few for a flat distribution, at most
// a block's length for the most peaked).
import { LogitAdjustments } from './logit_adjustments.js';
import { topCandidates } from './top_candidates.js';

// mulberry32: a small, well-known 32-bit PRNG; enough for sampling, and reproducible from a seed.
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Ids per block of the rejection draw. */
export const BLOCK = 256;
/** Refused tries of the rejection draw before it falls back to a walk over every candidate. */
export const MAX_TRIES = 4096;
const BUCKETS_PER_NAT = 64;  // top-p's histogram of x - m
const BUCKETS = 64 * BUCKETS_PER_NAT;
// exp(-b / BUCKETS_PER_NAT) for each bucket b: top-p's pass over every logit takes each w from
// its bucket's entry and a short series for the rest of the way, a fraction of Math.exp's cost.
const BUCKET_EXP = Float64Array.from({ length: BUCKETS }, (_, b) => Math.exp(-b / BUCKETS_PER_NAT));

// The bucket of d = m - x >= 0 in top-p's histogram: floor(d · BUCKETS_PER_NAT), the last one
// for everything past it.
const bucketOf = (d) => {
  const f = d * BUCKETS_PER_NAT;
  return f < BUCKETS - 1 ? f | 0 : BUCKETS - 1;
};

// exp(-d) for d >= 0 in bucket b < BUCKETS - 1: exp(-b / 64) times the Taylor series of
// exp(-r), r = d - b / 64 in [0, 1/64), to r^5 (what is left, r^6 / 720, is under 3e-14 of the
// value: rounding, next to the cut's sums).
function bucketExp(d, b) {
  const r = b * (1 / BUCKETS_PER_NAT) - d;
  return BUCKET_EXP[b] * (1 + r * (1 + r * 0.5 * (1 + r * (1 / 3) * (1 + r * 0.25 * (1 + r * 0.2)))));
}

export class Sampler {
  /**
   * @param {{temperature?: number, topK?: number, topP?: number, minP?: number, seed?: number,
   *          logitBias?: Map<number, number>, repetitionPenalty?: number, presencePenalty?: number,
   *          frequencyPenalty?: number, random?: () => number}} options
   *   random: the generator of the draws (default mulberry32(seed))
   * @example const s = new Sampler({ temperature: 0.9, topP: 0.95, seed: 7 }); const id = s.sample(logits); s.accept(id);
   */
  constructor({ temperature = 0, topK = 0, topP = 1, minP = 0, seed = 1, random, ...adjustments } = {}) {
    this.temperature = temperature;
    this.topK = topK;
    this.topP = topP;
    this.minP = minP;
    this.random = random ?? mulberry32(seed);
    this.adjustments = new LogitAdjustments(adjustments);
    this.scratch = null;
    this.maxima = null;
    this.bounds = null;
    this.buckets = null;  // [BUCKETS] top-p's histogram
  }

  /** The prompt's tokens (the repetition penalty counts them). */
  notePrompt(ids) {
    this.adjustments.notePrompt(ids);
  }

  /** A token generated after sample(): the penalties count it. */
  accept(id) {
    this.adjustments.accept(id);
  }

  /** logits [n_vocab] -> token id; an Error when every logit is -Infinity or NaN. */
  sample(logits) {
    const x = this.#adjusted(logits);
    const nBlocks = Math.ceil(x.length / BLOCK);
    if (this.maxima?.length !== nBlocks) {
      this.maxima = new Float64Array(nBlocks);
      this.bounds = new Float64Array(nBlocks);
    }
    // The argmax, with each block's highest logit beside it.
    let best = -1;
    let m = -Infinity;
    for (let b = 0; b < nBlocks; b++) {
      let top = -Infinity;
      let at = -1;
      const end = Math.min(x.length, (b + 1) * BLOCK);
      for (let i = b * BLOCK; i < end; i++) {
        if (x[i] > top) {
          top = x[i];
          at = i;
        }
      }
      this.maxima[b] = top;
      if (top > m) {
        m = top;
        best = at;
      }
    }
    if (best < 0) throw new Error('no token can be sampled: every logit is -Infinity or NaN (all banned)');
    if (this.temperature <= 0 || m === Infinity) return best;
    let lo = this.minP > 0 ? m + Math.log(this.minP) : -Infinity;
    if (this.topK > 0 && this.topK < x.length) {
      let kept = topCandidates(x, this.topK);
      if (this.topP < 1) kept = topPRun(x, m, kept, this.topP);
      let n = 0;
      while (n < kept.length && x[kept[n]] >= lo) n++;
      return walk(x, m, this.temperature, Int32Array.from(kept.subarray(0, n)).sort(), this.random());
    }
    if (this.topP < 1) lo = Math.max(lo, this.#topPThreshold(x, m));
    return this.#rejection(x, m, lo);
  }

  #adjusted(logits) {
    if (!this.adjustments.active) return logits;
    if (this.scratch?.length !== logits.length) this.scratch = new Float32Array(logits.length);
    this.scratch.set(logits);
    this.adjustments.apply(this.scratch);
    return this.scratch;
  }

  // Top-p's threshold over every candidate: Z and a histogram of w by x - m in one pass (w from
  // the bucket's exponential, bucketExp); only the bucket where the mass crosses top_p·Z is
  // sorted.
  #topPThreshold(x, m) {
    this.buckets ??= new Float64Array(BUCKETS);
    const buckets = this.buckets.fill(0);
    let z = 0;
    for (let i = 0; i < x.length; i++) {
      const d = m - x[i];
      if (!(d < Infinity)) continue;  // no candidate
      const b = bucketOf(d);
      const w = b < BUCKETS - 1 ? bucketExp(d, b) : Math.exp(-d);
      z += w;
      buckets[b] += w;
    }
    const target = this.topP * z;
    let cum = 0;
    let b = 0;
    while (b < BUCKETS && cum + buckets[b] < target) cum += buckets[b++];
    if (b === BUCKETS) return -Infinity;
    // The bucket's logits, found by a comparison with bounds a little wider than the bucket's
    // before bucketOf decides (rounding may put a logit at the edge either side).
    const hi = m - (b - 1) / BUCKETS_PER_NAT;
    const lo = m - (b + 2) / BUCKETS_PER_NAT;
    const ids = [];
    for (let i = 0; i < x.length; i++) {
      const v = x[i];
      if (v <= hi && v >= lo && bucketOf(m - v) === b) ids.push(i);
    }
    ids.sort((p, q) => x[q] - x[p]);
    for (const id of ids) {
      cum += Math.exp(x[id] - m);
      if (cum >= target) return x[id];
    }
    return x[ids[ids.length - 1]];
  }

  // The draw without top_k: rejection from the blocks' bounds (the definition above).
  #rejection(x, m, lo) {
    const invT = 1 / this.temperature;
    const { maxima, bounds } = this;
    const nBlocks = maxima.length;
    let total = 0;
    for (let b = 0; b < nBlocks; b++) {
      const length = Math.min(x.length, (b + 1) * BLOCK) - b * BLOCK;
      total += maxima[b] >= lo ? length * Math.exp((maxima[b] - m) * invT) : 0;
      bounds[b] = total;
    }
    for (let tries = 0; tries < MAX_TRIES; tries++) {
      const r = this.random() * total;
      let low = 0;
      let high = nBlocks - 1;
      while (low < high) {
        const mid = (low + high) >> 1;
        if (bounds[mid] > r) high = mid;
        else low = mid + 1;
      }
      const start = low * BLOCK;
      const i = start + Math.floor(this.random() * (Math.min(x.length, start + BLOCK) - start));
      const u = this.random();
      const v = x[i];
      if (v >= lo && v > -Infinity && u < Math.exp((v - maxima[low]) * invT)) return i;
    }
    const ids = [];
    for (let i = 0; i < x.length; i++) if (x[i] >= lo && x[i] > -Infinity) ids.push(i);
    return walk(x, m, this.temperature, ids, this.random());
  }
}

// Top-p over a list of candidates, best first: its shortest run reaching top_p·Z, with the rest
// of a run of equal logits at its end.
function topPRun(x, m, kept, topP) {
  let z = 0;
  for (const id of Int32Array.from(kept).sort()) z += Math.exp(x[id] - m);
  let cum = 0;
  for (let j = 0; j < kept.length; j++) {
    cum += Math.exp(x[kept[j]] - m);
    if (cum >= topP * z) {
      let n = j + 1;
      while (n < kept.length && x[kept[n]] === x[kept[j]]) n++;
      return kept.subarray(0, n);
    }
  }
  return kept;
}

// The draw over a candidate list in ascending id order, from one u.
function walk(x, m, temperature, ids, u) {
  const invT = 1 / temperature;
  let v = 0;
  for (const id of ids) v += Math.exp((x[id] - m) * invT);
  const r = u * v;
  let cum = 0;
  for (const id of ids) {
    cum += Math.exp((x[id] - m) * invT);
    if (cum > r) return id;
  }
  throw new Error('sampler: the draw ran past the last candidate');
}
