// A last node's LM head. logits() runs it on the calling thread; logitsAsync() calls go in the
// node's line of steps (steps.js), and the calls waiting when the engine frees go through the
// head together: one pass over its weights for all their rows, each row's logits the bytes
// logits() gives.
import { closedError } from './engine_model.js';
import { headAsync, withBuffers } from './engine_forward.js';

export class HeadPasses {
  #lf;
  #model;      // EngineModel
  #exclusive;  // job -> its promise, run alone in the node's line
  #waiting = [];  // logitsAsync calls waiting for the next pass
  #stats = { passes: 0, calls: 0, rows: 0 };

  /** @example const heads = new HeadPasses(lf, model, (job) => steps.exclusive(job)); */
  constructor(lf, model, exclusive) {
    this.#lf = lf;
    this.#model = model;
    this.#exclusive = exclusive;
  }

  /** LayerNode.logits: hidden [rows, n_embd] -> logits [rows, n_vocab]. */
  logits(hidden) {
    const { ptr, nEmbd, nVocab } = this.#model;
    const rows = hidden.length / nEmbd;
    return withBuffers(this.#lf, hidden, rows * nVocab, (inPtr, outPtr) => this.#lf.fn.lf_head(ptr, inPtr, rows, outPtr));
  }

  /** LayerNode.logitsAsync: logits() in the next pass. */
  logitsAsync(hidden) {
    const rows = hidden.length / this.#model.nEmbd;
    if (!Number.isInteger(rows) || rows < 1) {
      return Promise.reject(new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.#model.nEmbd}`));
    }
    return new Promise((resolve, reject) => {
      this.#waiting.push({ hidden, rows, resolve, reject });
      // Each call queues a pass, so that each drives the line from its own request (batcher.js);
      // the first pass answers every call waiting, the others find none.
      this.#exclusive(() => this.#pass()).catch(() => {});
    });
  }

  /** The passes so far: { passes, calls, rows }. */
  stats() {
    return { ...this.#stats };
  }

  // One pass over every waiting call's rows.
  async #pass() {
    const calls = this.#waiting.splice(0);
    if (calls.length === 0) return;
    const { nEmbd, nVocab } = this.#model;
    try {
      if (!this.#model.ptr) throw closedError('logitsAsync');
      const rows = calls.reduce((sum, c) => sum + c.rows, 0);
      const hidden = new Float32Array(rows * nEmbd);
      let at = 0;
      for (const c of calls) {
        hidden.set(c.hidden, at);
        at += c.hidden.length;
      }
      const logits = await headAsync(this.#lf, this.#model.ptr, hidden, rows, nVocab);
      Object.assign(this.#stats, { passes: this.#stats.passes + 1, calls: this.#stats.calls + calls.length, rows: this.#stats.rows + rows });
      let row = 0;
      for (const c of calls) {
        c.resolve(logits.slice(row * nVocab, (row + c.rows) * nVocab));
        row += c.rows;
      }
    } catch (error) {
      // A bad row (not finite, or logits that overflow) fails its own call only.
      if (calls.length === 1 || !this.#model.ptr) {
        for (const c of calls) c.reject(error);
        return;
      }
      for (const c of calls) {
        await headAsync(this.#lf, this.#model.ptr, c.hidden, c.rows, nVocab).then(c.resolve, c.reject);
      }
    }
  }
}
