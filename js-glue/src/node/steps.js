// A LayerNode's engine steps. The engine refuses a second forward while one runs, so forward
// calls go to the batcher (batcher.js, docs/batching.md), which hands the calls waiting when the
// engine frees to one step; jobs that must not overlap a step run alone in the same line. Here a
// step's calls get their sessions (sessions.js) and inputs (session_inputs.js), run as one
// engine forward (engine_forward.js), and change the sessions only as far as the engine
// answered them. Each step is counted and told to the listeners of observe().
import { Batcher } from './batcher.js';
import { closedError } from './engine_model.js';
import { forwardBatch, forwardOne } from './engine_forward.js';
import { readKvRows, setCallInputs } from './session_inputs.js';

export class Steps {
  #lf;
  #model;     // EngineModel
  #sessions;  // SessionTable
  #kvRowsIn;
  #kvRowsOut;
  #batcher;
  #handedOut = new WeakMap();  // a forward's output -> the K/V rows the call handed out
  #listeners = new Set();
  #stats = { batches: 0, entries: 0, rows: 0, maxEntries: 0, maxRows: 0 };

  /** @example const steps = new Steps({ lf, model, sessions, kvRowsIn: [], kvRowsOut: [], maxBatchRows: 512 }); */
  constructor({ lf, model, sessions, kvRowsIn, kvRowsOut, maxBatchRows }) {
    this.#lf = lf;
    this.#model = model;
    this.#sessions = sessions;
    this.#kvRowsIn = kvRowsIn;
    this.#kvRowsOut = kvRowsOut;
    this.maxBatchRows = maxBatchRows;
    this.#batcher = new Batcher({ maxRows: maxBatchRows, runBatch: (calls) => this.#run(calls), onBatch: (batch) => this.#observed(batch) });
  }

  /** LayerNode.forward: the call, checked, in the line for the next step that takes it. */
  forward({ session, startPos, hidden, lastOnly = false, approx = {}, exitState = null, perLayer = null, kvRows = null, span = false }) {
    const nEmbd = this.#model.nEmbd;
    const n = hidden.length / nEmbd;
    if (!Number.isInteger(n) || n < 1) {
      return Promise.reject(new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${nEmbd}`));
    }
    return this.#batcher.submit({ session, rows: n, startPos, hidden, lastOnly, approx, exitState, perLayer, kvRows, span });
  }

  /** Runs job() alone, once the steps and jobs asked for before it are done. */
  exclusive(job) {
    return this.#batcher.exclusive(job);
  }

  /** The K/V rows the forward that answered `out` handed out (LayerNode.kvRowsOf). */
  kvRowsOf(out) {
    return this.#handedOut.get(out) ?? null;
  }

  /** Calls listener({entries, rows, waitMs}) after every step; returns the function that stops it. */
  observe(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The steps so far (totals and the largest) and the row budget maxBatchRows. */
  stats() {
    return { ...this.#stats, maxBatchRows: this.maxBatchRows };
  }

  // One engine step of the batcher's calls: each call's inputs are set on its session and a new
  // session's room among the limits is found (admission) before anything else changes; then the
  // calls that got so far run as one forward, and only those the engine answered change the
  // sessions (SessionTable.settle). So a refusal, of an option, of the admission or by the engine
  // (a non-finite row, a stale startPos, beyond max context), fails its call alone and leaves the
  // sessions, their order, their positions and their caches as they were: nothing is evicted
  // for a new session whose first forward is refused.
  async #run(calls) {
    if (!this.#model.ptr) return calls.map(() => ({ error: closedError('forward') }));
    const outcomes = [];
    const entries = [];
    // The step's sessions, its new ones, and whether one of those displaces others (SessionTable.room).
    const step = { ids: new Set(), fresh: [], evicting: false };
    for (const call of calls) {
      try {
        const target = this.#prepare(call, step);
        if (!target) {
          outcomes.push({ deferred: true });
          continue;
        }
        step.ids.add(call.session);
        entries.push({ call, ...target, outcome: outcomes.length });
        outcomes.push(null);
      } catch (error) {
        outcomes.push({ error });
      }
    }
    if (entries.length === 0) return outcomes;
    this.#sessions.stepStarted(entries);
    let results;
    try {
      results = entries.length === 1
        ? [await forwardOne(this.#lf, this.#model.ptr, entries[0]).then((value) => ({ value }), (error) => ({ error }))]
        : await forwardBatch(this.#lf, this.#model.ptr, entries);
      // Before a session dropped during the step is freed.
      entries.forEach(({ handle }, i) => {
        if (results[i].value && this.#kvRowsOut.length) this.#handedOut.set(results[i].value, readKvRows(this.#lf, handle, this.#kvRowsOut));
      });
    } catch (error) {
      results = entries.map(() => ({ error }));
    } finally {
      this.#sessions.stepEnded();
    }
    entries.forEach(({ call, outcome, ...target }, i) => {
      outcomes[outcome] = results[i];
      this.#sessions.settle(call.session, target, !results[i].error);
    });
    return outcomes;
  }

  // The call's session with its inputs set and, for a new one, the sessions it displaces
  // ({handle, fresh, victims}), or null when it must wait for the next step (SessionTable.room).
  #prepare(call, step) {
    const target = this.#sessions.forCall(call.session, call.startPos);
    let victims = [];
    try {
      setCallInputs(this.#lf, target.handle, call, this.#kvRowsIn);
      if (target.fresh) victims = this.#sessions.room(call.session, target.handle, step);
    } catch (error) {
      if (target.fresh) this.#lf.fn.lf_session_free(target.handle);
      throw error;
    }
    if (victims) return { ...target, victims };
    this.#lf.fn.lf_session_free(target.handle);
    return null;
  }

  #observed(batch) {
    const stats = this.#stats;
    stats.batches++;
    stats.entries += batch.entries;
    stats.rows += batch.rows;
    stats.maxEntries = Math.max(stats.maxEntries, batch.entries);
    stats.maxRows = Math.max(stats.maxRows, batch.rows);
    for (const listener of this.#listeners) listener(batch);
  }
}
