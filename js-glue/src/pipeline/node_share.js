// How many of the sessions in flight a node is handed at once. A node that batches (node/
// batcher.js, the server in front of one) runs every call waiting for it as one step; handed all
// N sessions at once, it would run them as one batch, the next node likewise, and the sessions
// would move through the pipeline in one lock-step group, each node idle while another works.
// Handed at most ceil(N / nodes) at once, the sessions fall into as many groups as there are
// nodes, and the groups go through the nodes staggered: node k runs one group's batch while
// node k + 1 runs another's. A node that runs one call at a time is never idle either way (it
// always has a call before it while any is waiting), so the share costs it nothing.

export class NodeShare {
  #running = 0;
  #waiting = [];  // resolvers, first come first served
  #limit;

  /** limit() -> how many calls may run at once now (read at every admission; at least 1). */
  constructor(limit) {
    this.#limit = limit;
  }

  /**
   * Runs job() once fewer than limit() calls of this node are under way; its place is given
   * back when it settles. A call whose signal fires while it waits leaves the line with the
   * signal's reason, without running.
   * @example const out = await share.run(() => node.forward(args), signal);
   */
  async run(job, signal) {
    signal?.throwIfAborted();
    if (this.#running >= this.#limit()) await this.#wait(signal);
    else this.#running++;
    try {
      return await job();
    } finally {
      this.#running--;
      this.#admit();
    }
  }

  // Resolves once #admit has taken a place for this call; rejects if the signal fires first.
  #wait(signal) {
    return new Promise((resolve, reject) => {
      const admitted = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const at = this.#waiting.indexOf(admitted);
        if (at >= 0) this.#waiting.splice(at, 1);
        reject(signal.reason);
      };
      this.#waiting.push(admitted);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  // The longest waiting calls, as many as the limit now allows; each one's place is taken here.
  #admit() {
    while (this.#waiting.length > 0 && this.#running < this.#limit()) {
      this.#running++;
      this.#waiting.shift()();
    }
  }
}
