// What the oracle tests ask of our engine: the next-token distribution after a prompt and a
// greedy continuation, through one LayerNode that holds every layer (embed -> forward -> logits
// per step); a model with per-layer embeddings gets their inputs with each forward.
import {logSoftmax, topK} from "../../../js-glue/src/tokens/logits.js";

/**
 * -> {logProbs: the prompt's next-token log-probabilities, greedy: `steps` tokens, the first from those}
 * @example const ours = await nodeGreedy(node, tokens, 16);
 */
export async function nodeGreedy(node, tokens, steps) {
  const session = `s${Math.random()}`;
  const forward = async (startPos, ids) => {
    const hidden = node.embed(ids);
    const perLayer = node.nEmbdPerLayer > 0 ? await node.perLayerInputs(ids, hidden) : null;
    return node.forward({session, startPos, hidden, lastOnly: true, perLayer});
  };
  let hidden = await forward(0, tokens);
  const logProbs = logSoftmax(node.logits(hidden));
  const greedy = [topK(logProbs, 1)[0]];
  while (greedy.length < steps) {
    hidden = await forward(tokens.length + greedy.length - 1, [greedy.at(-1)]);
    greedy.push(topK(node.logits(hidden), 1)[0]);
  }
  node.dropSession(session);
  return {logProbs, greedy};
}
