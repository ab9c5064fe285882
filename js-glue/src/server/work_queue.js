// Admission and the order of engine calls. A request that will use the engine is admitted first,
// before a byte of its body is read, and holds its place until its answer has been sent (or it
// failed): so at most maxWaiting + 1 requests hold a body, wait for the engine, run, or hold an
// answer at any time, and what a node can be made to hold is that many requests' worth. Beyond it
// a request is told "busy, retry in N s" at once, which serves a client better than a wait of
// minutes behind a long line. Engine calls run in lines, each one call at a time in the order
// they are asked for: a session's calls in its own line (its next forward is checked against the
// positions its last one left, and its DELETE waits for them), so calls of different sessions
// reach the node together and it batches their forwards (node/batcher.js); a logits request's
// calls in a line of their own, so the node shares its LM-head passes among them; other calls of
// no session (the node's embed, the gateway's pipeline steps) in one common line. A slow upload
// delays nobody: a call is queued only once its request's body is in.
import { HttpError } from './http_error.js';

const COMMON = Symbol('the line of calls of no session');

export class WorkQueue {
  #tails = new Map();   // session id (or COMMON) -> the line's last call, while one is pending
  #admitted = 0;
  #meanMs = 100;        // running mean of a call's duration, for Retry-After

  /** maxWaiting: requests admitted besides one; beyond it admit() refuses with 429 queue_full. */
  constructor(maxWaiting) {
    this.maxWaiting = maxWaiting;
  }

  /** Requests admitted and not finished (reading, waiting, running or answering). */
  get pending() {
    return this.#admitted;
  }

  /**
   * A place in the line, or 429 queue_full. The ticket's run(job, session) runs job() after the
   * calls of that session asked for before it (without a session: after the other calls of no
   * session); release() gives the place back (once; later calls do nothing).
   * @example const ticket = queue.admit(); try { await ticket.run(() => node.forward(r), r.session); } finally { ticket.release(); }
   */
  admit() {
    if (this.#admitted > this.maxWaiting) {
      const seconds = Math.max(1, Math.ceil((this.#admitted * this.#meanMs) / 1000));
      throw new HttpError('queue_full', `${this.#admitted} requests are already in this node (the limit is max_queue ${this.maxWaiting} + 1): retry in ${seconds} s`,
        { headers: { 'retry-after': String(seconds) } });
    }
    this.#admitted++;
    let held = true;
    return {
      run: (job, session) => this.#enqueue(job, session),
      release: () => {
        if (held) this.#admitted--;
        held = false;
      },
    };
  }

  /**
   * admit(), run(job, session) and release() in one: for an engine call with no body to read and
   * no answer to hold.
   * @example await queue.run(() => node.dropSession(id), id);
   */
  async run(job, session) {
    const ticket = this.admit();
    try {
      return await ticket.run(job, session);
    } finally {
      ticket.release();
    }
  }

  #enqueue(job, session = COMMON) {
    const result = (this.#tails.get(session) ?? Promise.resolve()).then(async () => {
      const t0 = performance.now();
      try {
        return await job();
      } finally {
        this.#meanMs = 0.8 * this.#meanMs + 0.2 * (performance.now() - t0);
      }
    });
    const tail = result.catch(() => {});
    this.#tails.set(session, tail);
    tail.then(() => {
      if (this.#tails.get(session) === tail) this.#tails.delete(session);
    });
    return result;
  }
}
