// One engine call at a time per node, behind a bounded wait: the engine runs one forward at a
// time, and a client told "busy, retry in N s" at once is better off than one whose request
// waits minutes behind a long line.
import { HttpError } from './http_error.js';

export class WorkQueue {
  #tail = Promise.resolve();
  #waiting = 0;
  #running = false;
  #meanMs = 100;  // running mean of a job's duration, for Retry-After

  /** maxWaiting: jobs that may wait while one runs; beyond it run() refuses with 429 queue_full. */
  constructor(maxWaiting) {
    this.maxWaiting = maxWaiting;
  }

  /** Jobs accepted and not finished (running or waiting). */
  get pending() {
    return this.#waiting + (this.#running ? 1 : 0);
  }

  /**
   * Runs job() after every job accepted before it.
   * @example const out = await queue.run(() => node.forward(request));
   */
  run(job) {
    if (this.pending > this.maxWaiting) {
      const seconds = Math.max(1, Math.ceil((this.pending * this.#meanMs) / 1000));
      return Promise.reject(new HttpError('queue_full', `${this.#waiting} requests already wait for this node (limit ${this.maxWaiting}): retry in ${seconds} s`,
        { headers: { 'retry-after': String(seconds) } }));
    }
    this.#waiting++;
    const result = this.#tail.then(async () => {
      this.#waiting--;
      this.#running = true;
      const t0 = performance.now();
      try {
        return await job();
      } finally {
        this.#running = false;
        this.#meanMs = 0.8 * this.#meanMs + 0.2 * (performance.now() - t0);
      }
    });
    this.#tail = result.catch(() => {});
    return result;
  }
}
