// Continuous batching (docs/batching.md): forward calls that arrive while the engine is busy wait;
// when it frees, the waiting calls go to it as one step. A step takes calls in arrival order, at
// most one per session (a session's next call needs its previous one's positions in the cache, so
// it waits for the next step) and at most maxRows rows, stopping at the first call that would
// exceed them so that a long prompt is not overtaken forever by short decode steps; the first call
// of a step always goes, so a call larger than the budget runs alone. Jobs that must not overlap a
// step (the read probe, reading the threads' timings) run alone, in their place in the line.
// Nothing here knows the engine: the node hands it runBatch.
//
// Every caller drives the line from its own context until its call is settled: whoever is waiting
// when a step ends sets its own timer for the next one, and the first to fire runs it. A single
// timer set by whichever call ended the last step would belong to that caller's request, and a
// Workers-style runtime (workerd) cancels a finished request's timers: the next step would never
// start, every waiting request would be cancelled as hung, and the line would stay busy for the
// isolate's life (docs/edge.md, "Concurrent sessions").

// The next step starts once the callers of the last one have run what they do on its results
// (their continuations are microtasks, and a decode loop's next call is often among them), so it
// can join, and nothing reads a session that the next step is writing.
const nextTask = globalThis.setImmediate ?? ((fn) => setTimeout(fn, 0));

/**
 * Throws a RangeError unless maxRows is a row budget a Batcher takes: a node checks it before
 * loading anything.
 * @example checkMaxRows(0) // RangeError: the batch row budget must be a positive integer, got 0
 */
export function checkMaxRows(maxRows) {
  if (!(Number.isInteger(maxRows) && maxRows >= 1)) throw new RangeError(`the batch row budget must be a positive integer, got ${maxRows}`);
}

export class Batcher {
  #waiting = [];        // calls and jobs, in arrival order
  #busy = false;        // a step is running
  #wakeups = [];        // callers waiting for the running step to end
  #maxRows;
  #runBatch;
  #onBatch;

  /**
   * runBatch(calls) -> Promise<outcome[]> runs one step: outcome i is {value}, {error}, or
   * {deferred: true} for a call the step could not take after all (it goes back to the front of
   * the line, before anything that arrived later; never the first call, so every step makes
   * progress). onBatch({entries, rows, waitMs}) is told of every step of calls (those deferred
   * left out): waitMs[i] is the ms from the i-th call's submit() to the step starting.
   * @example const batcher = new Batcher({ maxRows: 512, runBatch: (calls) => engine.run(calls) });
   *   const out = await batcher.submit({ session: 'a', rows: 1, request });
   */
  constructor({ maxRows, runBatch, onBatch = () => {} }) {
    checkMaxRows(maxRows);
    this.#maxRows = maxRows;
    this.#runBatch = runBatch;
    this.#onBatch = onBatch;
  }

  /** Queues a forward call {session, rows, ...}; resolves with its value, rejects with its error. */
  submit(call) {
    return this.#enqueue({ call, t0: performance.now() });
  }

  /** Runs job() alone once every step and job asked for before it is done. */
  exclusive(job) {
    return this.#enqueue({ job });
  }

  #enqueue(item) {
    const settled = new Promise((resolve, reject) => {
      item.resolve = (value) => {
        item.done = true;
        resolve(value);
      };
      item.reject = (error) => {
        item.done = true;
        reject(error);
      };
    });
    this.#waiting.push(item);
    this.#drive(item);
    return settled;
  }

  // Until the item is settled: wait for the running step to end, then for the next task (made by
  // this caller, so it lives as long as the caller waits), and run a step unless another caller's
  // task came first. A caller that went away leaves its item in the line for the others' steps.
  async #drive(item) {
    while (!item.done) {
      if (this.#busy) {
        await new Promise((resolve) => this.#wakeups.push(resolve));
        continue;
      }
      await new Promise((resolve) => nextTask(resolve));
      if (item.done || this.#busy) continue;
      this.#busy = true;
      try {
        await this.#step();
      } finally {
        this.#busy = false;
        for (const wake of this.#wakeups.splice(0)) wake();
      }
    }
  }

  async #step() {
    const head = this.#waiting[0];
    if (head.job) {
      this.#waiting.shift();
      try {
        head.resolve(await head.job());
      } catch (error) {
        head.reject(error);
      }
      return;
    }
    const batch = this.#take();
    const t = performance.now();
    let outcomes;
    try {
      outcomes = await this.#runBatch(batch.map((item) => item.call));
    } catch (error) {
      outcomes = batch.map(() => ({ error }));
    }
    const ran = batch.filter((_, i) => !outcomes[i].deferred);
    this.#waiting.unshift(...batch.filter((_, i) => outcomes[i].deferred));
    batch.forEach((item, i) => {
      const { deferred, error, value } = outcomes[i];
      if (deferred) return;
      if (error) item.reject(error);
      else item.resolve(value);
    });
    // Before the callers' continuations run (they are microtasks): they may read the figures.
    this.#onBatch({
      entries: ran.length,
      rows: ran.reduce((sum, item) => sum + item.call.rows, 0),
      waitMs: ran.map((item) => t - item.t0),
    });
  }

  // The calls of the next step, taken out of the line (which keeps the rest in order).
  #take() {
    const taken = [];
    const sessions = new Set();
    let rows = 0;
    for (let i = 0; i < this.#waiting.length;) {
      const item = this.#waiting[i];
      if (item.job) break;
      if (sessions.has(item.call.session)) {
        i++;
        continue;
      }
      if (taken.length > 0 && rows + item.call.rows > this.#maxRows) break;
      taken.push(item);
      sessions.add(item.call.session);
      rows += item.call.rows;
      this.#waiting.splice(i, 1);
    }
    return taken;
  }
}
