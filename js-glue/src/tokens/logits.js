// Small helpers over a logits vector, shared by the CLI and the tests.

/** logits [n] -> log-probabilities [n] (Float64Array), log-sum-exp in double. */
export function logSoftmax(logits) {
  let max = -Infinity;
  for (const l of logits) max = Math.max(max, l);
  let sum = 0;
  for (const l of logits) sum += Math.exp(l - max);
  const logZ = max + Math.log(sum);
  return Float64Array.from(logits, (l) => l - logZ);
}

/** Ids of the k largest values, largest first. */
export function topK(values, k) {
  return [...values.keys()].sort((a, b) => values[b] - values[a]).slice(0, k);
}
