// A pipeline of layer nodes: the first embeds, each runs its layers, the last computes logits.
// Per session it feeds every node the positions it has not seen yet.
import { LayerNode } from './layer_node.js';

export class Pipeline {
  /**
   * @param {{model: string, nodes: {begin: number, end: number}[], threads?: number, build?: string}} options
   * @example const p = await Pipeline.open({ model, nodes: [{begin: 0, end: 2}] });
   */
  static async open({ model, nodes, threads, build }) {
    const opened = [];
    try {
      for (const [i, spec] of nodes.entries()) {
        opened.push(await LayerNode.open({ model, layers: [spec.begin, spec.end], threads, build, withTokenizer: i === 0 }));
      }
    } catch (error) {
      for (const node of opened) node.close();
      throw error;
    }
    return new Pipeline(opened);
  }

  constructor(nodes) {
    this.nodes = nodes;
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
