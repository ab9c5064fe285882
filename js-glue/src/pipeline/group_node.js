// A tensor-parallel group (group/member_group.js) as one node of a pipeline: its layers, sizes,
// forward, cuts and checkpoints as LayerNode's; at the pipeline's start its embedding, at its end
// its head, each computed vocabulary-parallel by the members. It runs the exact engine only, no
// media span (its maxSpan is 0: an image that Gemma 4 attends both ways goes to nodes) and, at
// an E-model's start, no media rows (their per-layer inputs are computed from the rows). A
// cut its members cannot all make alike, and a member that restarted (position_mismatch), have
// the pipeline replay the session from its history.
import { approxModesOn } from '../protocol/approx_options.js';
import { LayerfoldError } from '../wasm/capi.js';

export class GroupNode {
  #group;
  #perLayer = new WeakMap();  // embed()'s hidden -> the per-layer inputs that came with it
  #handedOut = new WeakMap(); // forward()'s output -> the K/V rows the group handed out

  /** Over an open MemberGroup; `url` names it in errors and timings (its members' addresses). */
  constructor(group, url) {
    this.#group = group;
    this.url = url;
    Object.assign(this, { layers: group.layers, nEmbd: group.nEmbd, nLayer: group.nLayer, nVocab: group.nVocab, maxSpan: 0 });
  }

  /** The group runs its calls in call order, as a local node does. */
  get keepsForwardOrder() {
    return true;
  }

  /**
   * LayerNode.forward's call: hidden [n, n_embd] -> [n or 1, n_embd], with the K/V rows of the
   * shared-KV sources before the group that its layers read (kvRows); approximate modes are
   * refused.
   * @example const out = await node.forward({ session: 'a', startPos: 0, hidden, lastOnly: false });
   */
  async forward({ session, startPos, hidden, lastOnly = false, approx = {}, perLayer = null, kvRows = null, span = false, signal }) {
    if (approxModesOn(approx)) {
      throw new LayerfoldError('unsupported', 'a tensor-parallel group runs the exact engine only: no approximate modes');
    }
    if (span) {
      throw new LayerfoldError('unsupported', 'a tensor-parallel group takes no media span (an image attended both ways): serve those layers from nodes');
    }
    signal?.throwIfAborted();
    const out = await this.#group.forward({ session, startPos, hidden, perLayer, kvRows });
    const result = lastOnly ? out.slice(out.length - this.nEmbd) : out;
    const handedOut = this.#group.kvRowsOf(out);
    if (handedOut) this.#handedOut.set(result, handedOut);
    return result;
  }

  /** LayerNode.kvRowsOf's: the rows of the group's sources that later layers read, or null. */
  kvRowsOf(out) {
    return this.#handedOut.get(out) ?? null;
  }

  /** LayerNode.embed's, the group holding the embedding (MemberGroup.embed). */
  async embed(tokens, { signal } = {}) {
    signal?.throwIfAborted();
    const { hidden, perLayer } = await this.#group.embed(Array.from(tokens));
    if (perLayer) this.#perLayer.set(hidden, perLayer);
    return hidden;
  }

  /**
   * LayerNode.perLayerInputs's for the hidden states embed() gave: the members computed them with
   * its rows. Rows of no token (a media item's on an E-model) are refused: their inputs come
   * from the rows themselves, which no member is sent.
   */
  async perLayerInputs(tokens, hidden) {
    const held = this.#perLayer.get(hidden);
    if (held) return held;
    throw new LayerfoldError('unsupported', 'a tensor-parallel group computes per-layer inputs only of the tokens it embeds, not of a media ' +
      'item\'s rows: serve an E-model\'s first layers from a node (local or remote) to give it images or audio');
  }

  /** LayerNode.logitsAsync's, the group holding the head (MemberGroup.logits). */
  async logitsAsync(hidden, { signal } = {}) {
    signal?.throwIfAborted();
    return this.#group.logits(hidden);
  }

  /** What the group is, in LayerNode.info's terms. */
  info() {
    return {
      url: this.url, layers: this.layers, nEmbd: this.nEmbd, nVocab: this.nVocab, threads: null,
      build: `tensor-parallel group of ${this.#group.names.length} (exchange ${this.#group.exchange})`,
      wasmMemoryBytes: this.#group.memoryBytes(),
    };
  }

  /** LayerNode.truncate's, on every member (MemberGroup.truncate). */
  truncate(session, nPast) {
    return this.#group.truncate(session, nPast);
  }

  /** LayerNode.checkpoint's, on every member (MemberGroup.checkpoint). */
  checkpoint(session, { keep } = {}) {
    return this.#group.checkpoint(session, { keep });
  }

  dropSession(session) {
    return this.#group.dropSession(session);
  }

  layerTimings() {
    return [];
  }

  approxStats() {
    return null;
  }

  close() {
    this.#group.close();
  }
}
