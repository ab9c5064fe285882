// The model-agnostic steps of the f64 forward pass, each as its formula (docs/gemma-architecture.md,
// "Primitive ops"), with no rounding but f64's.

/** x [n] -> RMSNorm(x) ⊙ w (w null: no weight). @example rmsnorm(x, g.vector("output_norm.weight"), 1e-6) */
export function rmsnorm(x, w, eps) {
  let ss = 0;
  for (const v of x) ss += v * v;
  const scale = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * scale * (w ? w[i] : 1));
}

/** Gemma's GELU, the tanh form (gelu_pytorch_tanh), evaluated in f64 rather than from ggml's f16 table. */
export const gelu = (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * x * (1 + 0.044715 * x * x)));

/** a [n], b [n] -> a + b */
export const add = (a, b) => a.map((v, i) => v + b[i]);

/** z [n] -> softmax(z) [n] */
export function softmax(z) {
  let m = -Infinity;
  for (const v of z) m = Math.max(m, v);
  const e = z.map((v) => Math.exp(v - m));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}

/** z [n] -> ln softmax(z) [n] */
export function logSoftmax(z) {
  let m = -Infinity;
  for (const v of z) m = Math.max(m, v);
  let sum = 0;
  for (const v of z) sum += Math.exp(v - m);
  const lse = m + Math.log(sum);
  return z.map((v) => v - lse);
}

/**
 * Rotates head x[off .. off+nRot) in place at position pos, NEOX pairs (j, j + nRot/2): angle
 * freqScale · pos · base^(−2j/nRot) / factors[j] (factors null: 1).
 * @example rope(q, h * D, {nRot: D, base: 10000, freqScale: 1, freqFactors: null}, pos)
 */
export function rope(x, off, {nRot, base, freqScale, freqFactors}, pos) {
  const half = nRot / 2;
  for (let j = 0; j < half; j++) {
    const angle = freqScale * (pos * base ** (-2 * j / nRot)) / (freqFactors ? freqFactors[j] : 1);
    const c = Math.cos(angle), s = Math.sin(angle);
    const x0 = x[off + j], x1 = x[off + j + half];
    x[off + j] = x0 * c - x1 * s;
    x[off + j + half] = x0 * s + x1 * c;
  }
}
