// Where a layer node's process is in its life: loading its weights (with progress), ready, or
// shutting down. The HTTP app exists before the node does, so /healthz and /readyz answer while
// the weights stream in.

export class NodeState {
  /** The LayerNode once loaded, else null. */
  node = null;
  /**
   * A node serving its projector too (serve --mmproj): {vision, audio, config, maxImagePixels,
   * maxAudioSeconds} (server/encode_routes.js), set before the node is loaded; else null.
   */
  encoder = null;
  /** Bytes of the model read so far, and the total expected. */
  progress = { bytes: 0, totalBytes: 0 };
  shuttingDown = false;
  #pendingWork = 0;   // engine calls accepted and not finished
  #onIdle = [];

  /**
   * A state that is ready at once with `node` (what the edge worker and tests use).
   * @example const app = createLayerNodeApp({ state: NodeState.of(node) });
   */
  static of(node) {
    const state = new NodeState();
    state.loaded(node);
    return state;
  }

  get ready() {
    return this.node !== null && !this.shuttingDown;
  }

  /** Progress callback for LayerNode.open({ onProgress }). */
  onProgress = ({ bytes, totalBytes }) => {
    this.progress = { bytes, totalBytes };
  };

  loaded(node) {
    this.node = node;
  }

  /**
   * Counts `work` (a promise of an engine call) until it settles, so a shutdown can wait for the
   * engine even when the client that asked has gone away.
   * @example const out = await state.track(queue.run(() => node.forward(request)));
   */
  track(work) {
    this.#pendingWork++;
    work.finally(() => {
      if (--this.#pendingWork === 0) for (const resolve of this.#onIdle.splice(0)) resolve();
    }).catch(() => {});
    return work;
  }

  get pendingWork() {
    return this.#pendingWork;
  }

  /** Resolves once no engine call is pending. */
  whenIdle() {
    return this.#pendingWork === 0 ? Promise.resolve() : new Promise((resolve) => this.#onIdle.push(resolve));
  }
}
