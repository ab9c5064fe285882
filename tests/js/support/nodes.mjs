// A LayerNode for the length of a test body, closed whatever the body did.
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";

/**
 * Opens a LayerNode with `options`, runs fn(node) and closes the node.
 * @example await withNode({model: tiny(), build: "single"}, (node) => node.forward({...}));
 */
export async function withNode(options, fn) {
  const node = await LayerNode.open(options);
  try {
    return await fn(node);
  } finally {
    node.close();
  }
}
