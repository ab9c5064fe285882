// What a LayerNode's engine says of its work: per session, what the last forward did (its
// approximate modes, its time per layer and per phase, a digest of its KV cache), read only while
// no step runs it; per node, each thread's time in the last forward and the memory-read probe,
// run alone in the node's line of steps.
import { closedError } from './engine_model.js';
import { flagSet } from '../wasm/done_flag.js';

export class EngineReports {
  #lf;
  #model;      // EngineModel
  #sessions;   // SessionTable
  #exclusive;  // job -> its promise, run alone in the node's line

  /** @example const reports = new EngineReports(lf, model, sessions, (job) => steps.exclusive(job)); */
  constructor(lf, model, sessions, exclusive) {
    this.#lf = lf;
    this.#model = model;
    this.#sessions = sessions;
    this.#exclusive = exclusive;
  }

  /** LayerNode.approxStats: the engine's JSON, or null for an unknown session. */
  approxStats(id) {
    const session = this.#sessions.idle(id, 'approxStats');
    return session === undefined ? null : this.#lf.json(this.#lf.fn.lf_session_approx_stats(session));
  }

  /** The session's last forward as the engine timed it, or null for an unknown session. */
  timings(id) {
    const session = this.#sessions.idle(id, 'timings');
    return session === undefined ? null : this.#lf.json(this.#lf.fn.lf_session_timings_json(session));
  }

  /** LayerNode.kvDigest: lf_session_kv_digest, or null for an unknown session. */
  kvDigest(id) {
    const session = this.#sessions.idle(id, 'kvDigest');
    return session === undefined ? null : this.#lf.fn.lf_session_kv_digest(session);
  }

  /** LayerNode.workerTimings: [{ jobMs, barrierMs }] per engine thread. */
  workerTimings() {
    return this.#exclusive(() => {
      if (!this.#model.ptr) throw closedError('workerTimings');
      return this.#lf.json(this.#lf.fn.lf_model_worker_timings_json(this.#model.ptr))
        .map(({ job_ms: jobMs, barrier_ms: barrierMs }) => ({ jobMs, barrierMs }));
    });
  }

  /** LayerNode.readProbe: { bytes, ms, gbPerSecond, checksum }. */
  readProbe() {
    return this.#exclusive(async () => {
      if (!this.#model.ptr) throw closedError('readProbe');
      const lf = this.#lf;
      const flagPtr = lf.alloc(4);
      try {
        if (!lf.fn.lf_model_read_probe_async(this.#model.ptr, flagPtr)) throw lf.lastError();
        await flagSet(lf, flagPtr);
        const { bytes, ms, checksum } = lf.json(lf.fn.lf_model_read_probe_json(this.#model.ptr));
        return { bytes, ms, gbPerSecond: bytes / ms / 1e6, checksum };
      } finally {
        lf.free(flagPtr);
      }
    });
  }
}
