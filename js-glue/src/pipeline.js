// A pipeline of layer nodes: the first embeds, each runs its layers, the last computes logits.
// Per session it feeds every node the positions it has not seen yet.
import { LayerNode } from './layer_node.js';
import { layerCount, readModelHeader } from './model_header.js';
import { parseNodesSpec } from './nodes_spec.js';

export class Pipeline {
  /**
   * @param {{model: string, nodes?: string, threads?: number, build?: string, cacheDir?: string,
   *          onProgress?: (progress: object, node: number) => void}} options
   *   nodes: "local:0-29,local:30-59" (default: one node with every layer); onProgress gets each
   *   node's load progress and the node's index.
   * @example const p = await Pipeline.open({ model, nodes: 'local:0-0,local:1-1' });
   */
  static async open({ model, nodes: spec, threads, build, cacheDir, onProgress }) {
    const header = await readModelHeader(model, { cacheDir });
    const nLayer = layerCount(header);
    const nodes = parseNodesSpec(spec ?? `local:0-${nLayer - 1}`, nLayer);
    const opened = [];
    try {
      for (const [i, spec] of nodes.entries()) {
        opened.push(await LayerNode.open({
          model, layers: [spec.begin, spec.end], threads, build, withTokenizer: i === 0, cacheDir,
          onProgress: onProgress && ((progress) => onProgress(progress, i)),
        }));
      }
    } catch (error) {
      for (const node of opened) node.close();
      throw error;
    }
    return new Pipeline(opened, header);
  }

  constructor(nodes, header) {
    this.nodes = nodes;
    this.header = header;
    this.tokenizer = nodes[0].tokenizer;
    this.positions = new Map();  // session -> positions processed
  }

  /**
   * Runs new tokens of a session through every node; returns the last position's logits and
   * how long each node and layer took.
   */
  async step(session, tokens) {
    const startPos = this.positions.get(session) ?? 0;
    const timings = [];
    const t0 = performance.now();
    let hidden = this.nodes[0].embed(tokens);
    const embedMs = performance.now() - t0;
    for (const [i, node] of this.nodes.entries()) {
      const t = performance.now();
      hidden = await node.forward({ session, startPos, hidden, lastOnly: i === this.nodes.length - 1 });
      timings.push({ layers: node.layers, ms: performance.now() - t, layerMs: node.layerTimings(session) });
    }
    const th = performance.now();
    const logits = this.nodes.at(-1).logits(hidden);
    this.positions.set(session, startPos + tokens.length);
    return { logits, timings, embedMs, headMs: performance.now() - th };
  }

  dropSession(session) {
    for (const node of this.nodes) node.dropSession(session);
    this.positions.delete(session);
  }

  close() {
    for (const node of this.nodes) node.close();
  }
}
