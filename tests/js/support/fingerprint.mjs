// Embed + forward + logits on a few tokens: the bytes a node computes, to compare loads through
// different sources. fingerprintWith is self-contained, so a fresh process can run its source text.
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";

export async function fingerprintWith(LayerNode, options) {
  const node = await LayerNode.open({build: "single", ...options});
  try {
    const hidden = await node.forward({session: "s", startPos: 0, hidden: node.embed([2, 17, 301, 42])});
    const logits = node.logits(hidden);
    return Buffer.concat([hidden, logits].map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength)));
  } finally {
    node.close();
  }
}

/** @example assert.ok((await fingerprint({model: url})).equals(reference)); */
export const fingerprint = (options) => fingerprintWith(LayerNode, options);
