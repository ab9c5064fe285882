// A projector's towers (local, or an encoder node's) put in front of a pipeline: refused when
// they are another model's, or when a node of the pipeline cannot take the items they make.
import { GroupNode } from '../pipeline/group_node.js';
import { MediaInput } from './media.js';

/**
 * A MediaInput over `towers` ({vision, audio}: openProjector's or RemoteEncoder's) for
 * `pipeline`, with MediaInput's options; an Error naming `flag` (the option the towers came
 * from) when the projector's width is not the model's, when the model's first node is a
 * tensor-parallel group on an E-model (its media rows' per-layer inputs are computed on the first
 * node from the rows, which a group's members are not sent), or when a node takes shorter media
 * spans than an image's maxTokens.
 * @example const media = mediaInput(pipeline, projector, { maxTokens: 280 }, '--mmproj');
 */
export function mediaInput(pipeline, towers, options, flag) {
  const width = pipeline.header.info.n_embd;
  if ((pipeline.header.info.n_embd_per_layer ?? 0) > 0 && pipeline.nodes[0] instanceof GroupNode) {
    throw new Error(`${flag}: node 0 is a tensor-parallel group: an E-model's first node computes media rows' per-layer inputs from the rows, ` +
      'which a group\'s members are not sent; serve the first layers from a node (--nodes local:0-N,... or a served node)');
  }
  if (towers.vision.nEmbdText !== width) {
    throw new Error(`${flag}: the projector gives rows of ${towers.vision.nEmbdText} values, this model's width is ${width}: a projector of another model`);
  }
  const takes = (node) => Math.max(64, node.maxSpan ?? 0);
  const media = new MediaInput(towers, { ...options, maxSpan: Math.min(...pipeline.nodes.map(takes)) });
  const short = media.nonCausal ? pipeline.nodes.findIndex((node) => takes(node) < media.maxTokens) : -1;
  if (short >= 0) {
    throw new Error(`node ${short} takes media spans of at most ${takes(pipeline.nodes[short])} rows; images of up to ` +
      `${media.maxTokens} tokens need serve --max-span ${media.maxTokens} there (or a lower --image-max-tokens)`);
  }
  return media;
}
