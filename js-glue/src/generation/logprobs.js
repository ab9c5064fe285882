// Log-probabilities of the sampled tokens and their best alternatives, from the model's own
// distribution (the logits before temperature, top-k or top-p), as OpenAI reports them.
import { logSoftmax } from '../tokens/logits.js';

// Ids of the k largest values, largest first (ties: the lower id), in one pass over the
// vocabulary rather than a sort of all of it.
function largest(values, k) {
  const ids = [];
  for (let i = 0; i < values.length; i++) {
    if (ids.length === k && !(values[i] > values[ids[k - 1]])) continue;
    if (ids.length === k) ids.pop();
    let at = ids.length;
    ids.push(i);
    for (; at > 0 && values[ids[at - 1]] < values[i]; at--) ids[at] = ids[at - 1];
    ids[at] = i;
  }
  return ids;
}

/**
 * logits [n_vocab] and the sampled id -> {id, logprob, top: [{id, logprob}] (topN of them)}.
 * @example tokenLogprobs(logits, 17, 3) // {id: 17, logprob: -0.2, top: [{id: 17, logprob: -0.2}, ...]}
 */
export function tokenLogprobs(logits, id, topN) {
  const lp = logSoftmax(logits);
  return { id, logprob: lp[id], top: topN > 0 ? largest(lp, topN).map((t) => ({ id: t, logprob: lp[t] })) : [] };
}
