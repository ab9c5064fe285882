// Admission and the engine's one-at-a-time order. A request that will use the engine is admitted
// first, before a byte of its body is read, and holds its place until its answer has been sent
// (or it failed): so at most maxWaiting + 1 requests hold a body, wait for the engine, run, or
// hold an answer at any time, and what a node can be made to hold is that many requests' worth.
// Beyond it a request is told "busy, retry in N s" at once, which serves a client better than a
// wait of minutes behind a long line. Engine calls run one at a time in the order they are
// asked for, so a slow upload at the front of the line delays nobody.
import { HttpError } from './http_error.js';

export class WorkQueue {
  #tail = Promise.resolve();
  #admitted = 0;
  #meanMs = 100;  // running mean of a job's duration, for Retry-After

  /** maxWaiting: requests admitted besides one; beyond it admit() refuses with 429 queue_full. */
  constructor(maxWaiting) {
    this.maxWaiting = maxWaiting;
  }

  /** Requests admitted and not finished (reading, waiting, running or answering). */
  get pending() {
    return this.#admitted;
  }

  /**
   * A place in the line, or 429 queue_full. The ticket's run(job) runs job() after every job
   * asked for before it; release() gives the place back (once; later calls do nothing).
   * @example const ticket = queue.admit(); try { await ticket.run(() => node.forward(r)); } finally { ticket.release(); }
   */
  admit() {
    if (this.#admitted > this.maxWaiting) {
      const seconds = Math.max(1, Math.ceil((this.#admitted * this.#meanMs) / 1000));
      throw new HttpError('queue_full', `${this.#admitted} requests are already in this node (limit ${this.maxWaiting} waiting besides the one running): retry in ${seconds} s`,
        { headers: { 'retry-after': String(seconds) } });
    }
    this.#admitted++;
    let held = true;
    return {
      run: (job) => this.#enqueue(job),
      release: () => {
        if (held) this.#admitted--;
        held = false;
      },
    };
  }

  /**
   * admit(), run(job) and release() in one: for an engine call with no body to read and no
   * answer to hold.
   * @example await queue.run(() => node.dropSession(id));
   */
  async run(job) {
    const ticket = this.admit();
    try {
      return await ticket.run(job);
    } finally {
      ticket.release();
    }
  }

  #enqueue(job) {
    const result = this.#tail.then(async () => {
      const t0 = performance.now();
      try {
        return await job();
      } finally {
        this.#meanMs = 0.8 * this.#meanMs + 0.2 * (performance.now() - t0);
      }
    });
    this.#tail = result.catch(() => {});
    return result;
  }
}
