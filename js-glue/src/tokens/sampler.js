// Next-token choice: greedy (temperature 0) or sampled through llama.cpp's chain (logit bias and
// penalties -> top-k -> top-p -> min-p -> temperature -> draw) with a seeded generator, so a run
// can be repeated exactly. The choice is defined as follows, and tests/js/sampler.test.mjs
// checks the fast path below against this definition written plainly with a full sort:
//   - x = the logits with the request's adjustments (logit_adjustments.js); -Infinity and NaN
//     are never chosen; m = the highest; candidates are ordered by logit, ties lower id first.
//   - temperature <= 0: the first candidate (no draw).
//   - top_k > 0: the first top_k candidates.
//   - top_p < 1: with w = exp(x - m) and Z their sum over the candidates in ascending id order,
//     the shortest run of first candidates whose w, summed in candidate order, reach top_p·Z.
//   - min_p > 0: the candidates with x >= m + ln(min_p).
//   - the draw: one number u in [0, 1) from mulberry32(seed) per sampled token; with
//     w = exp((x - m) · (1 / temperature)) and V their sum over the candidates in ascending id order,
//     the first candidate in ascending id order whose running sum exceeds u·V.
// Walking in id order rather than logit order is what spares the sort: with no cut, a draw is
// one pass of exponentials with a running sum per block of ids and a walk through one block.
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

const BLOCK = 1024;            // ids per running sum of the uncut draw
const FIRST_TOP_P_ROUND = 256; // candidates sorted before top-p looks further (x8 each round)

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
    this.blockSums = null;
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
    let best = -1;
    let m = -Infinity;
    for (let i = 0; i < x.length; i++) {
      if (x[i] > m) {
        m = x[i];
        best = i;
      }
    }
    if (best < 0) throw new Error('no token can be sampled: every logit is -Infinity or NaN (all banned)');
    if (this.temperature <= 0) return best;
    const u = this.random();
    const lo = this.minP > 0 ? m + Math.log(this.minP) : -Infinity;
    let kept = null;  // the candidates left by top-k and top-p, best first; null: all of them
    if (this.topK > 0 && this.topK < x.length) kept = topCandidates(x, this.topK);
    if (this.topP < 1) kept = this.#topP(x, m, kept);
    if (kept === null) return this.#drawAll(x, m, lo, u);
    let n = 0;
    while (n < kept.length && x[kept[n]] >= lo) n++;
    return draw(x, m, this.temperature, Int32Array.from(kept.subarray(0, n)).sort(), u);
  }

  #adjusted(logits) {
    if (!this.adjustments.active) return logits;
    if (this.scratch?.length !== logits.length) this.scratch = new Float32Array(logits.length);
    this.scratch.set(logits);
    this.adjustments.apply(this.scratch);
    return this.scratch;
  }

  // Top-p's run of first candidates: sorted a few hundred at a time, as far as the mass needs.
  #topP(x, m, kept) {
    let z = 0;
    if (kept) {
      for (const id of Int32Array.from(kept).sort()) z += Math.exp(x[id] - m);
    } else {
      for (let i = 0; i < x.length; i++) if (x[i] > -Infinity) z += Math.exp(x[i] - m);
    }
    const target = this.topP * z;
    for (let round = FIRST_TOP_P_ROUND; ; round *= 8) {
      const first = kept ?? topCandidates(x, Math.min(round, x.length));
      let cum = 0;
      for (let j = 0; j < first.length; j++) {
        cum += Math.exp(x[first[j]] - m);
        if (cum >= target) return first.subarray(0, j + 1);
      }
      // Rounding can leave the whole set's sum in candidate order just short of top_p·Z.
      if (kept || round >= x.length) return first;
    }
  }

  // The draw over every candidate with x >= lo, without building the candidate list.
  #drawAll(x, m, lo, u) {
    const invT = 1 / this.temperature;
    const nBlocks = Math.ceil(x.length / BLOCK);
    if (this.blockSums?.length !== nBlocks + 1) this.blockSums = new Float64Array(nBlocks + 1);
    const sums = this.blockSums;
    let v = 0;
    for (let b = 0; b < nBlocks; b++) {
      sums[b] = v;
      const end = Math.min(x.length, (b + 1) * BLOCK);
      for (let i = b * BLOCK; i < end; i++) {
        const l = x[i];
        if (l >= lo && l > -Infinity) v += Math.exp((l - m) * invT);
      }
    }
    sums[nBlocks] = v;
    const r = u * v;
    let b = 0;
    while (b < nBlocks - 1 && !(sums[b + 1] > r)) b++;
    let cum = sums[b];
    const end = Math.min(x.length, (b + 1) * BLOCK);
    for (let i = b * BLOCK; i < end; i++) {
      const l = x[i];
      if (!(l >= lo && l > -Infinity)) continue;
      cum += Math.exp((l - m) * invT);
      if (cum > r) return i;
    }
    throw new Error('sampler: the draw ran past the last candidate');
  }
}

// The draw over a candidate list in ascending id order.
function draw(x, m, temperature, ids, u) {
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
