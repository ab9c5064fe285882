// Next-token choice: greedy (temperature 0) or temperature / top-k / top-p sampling with a
// seeded generator, so a run can be repeated exactly.

// mulberry32: a small, well-known 32-bit PRNG; enough for sampling, and reproducible from a seed.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Sampler {
  /** @param {{temperature?: number, topK?: number, topP?: number, seed?: number}} options */
  constructor({ temperature = 0, topK = 0, topP = 1, seed = 1 } = {}) {
    this.temperature = temperature;
    this.topK = topK;
    this.topP = topP;
    this.random = mulberry32(seed);
  }

  /** logits [n_vocab] -> token id */
  sample(logits) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    if (this.temperature <= 0) return best;
    // Candidates by logit, cut to top-k, softmax at the temperature, cut to the top-p mass.
    let ids = [...logits.keys()].sort((a, b) => logits[b] - logits[a]);
    if (this.topK > 0) ids = ids.slice(0, this.topK);
    const weights = ids.map((id) => Math.exp((logits[id] - logits[best]) / this.temperature));
    const total = weights.reduce((s, w) => s + w, 0);
    let kept = ids.length;
    if (this.topP < 1) {
      let mass = 0;
      for (kept = 0; kept < ids.length && mass < this.topP * total; kept++) mass += weights[kept];
    }
    const keptTotal = weights.slice(0, kept).reduce((s, w) => s + w, 0);
    let r = this.random() * keptTotal;
    for (let i = 0; i < kept; i++) {
      r -= weights[i];
      if (r <= 0) return ids[i];
    }
    return ids[kept - 1];
  }
}
