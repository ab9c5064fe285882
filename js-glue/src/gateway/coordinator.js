// The one seam between the gateway's requests and the pipeline's forwards. Every request asks
// here for its sessions' steps; today the Pipeline runs one step at a time (a node runs one
// forward at a time), and the line is first come first served with each request holding at most
// one step in it, so concurrent requests take turns step by step. The batching engine (issue 20)
// replaces #run with one forward of many sessions' steps; nothing above this file changes.
// Admission is bounded (WorkQueue: 429 with Retry-After beyond maxWaiting).
import { WorkQueue } from '../server/work_queue.js';

// A local node's forward runs synchronously in this thread (the single-thread build) and its
// promise settles in a microtask: without a turn of the event loop between steps, a generation
// would hold the loop for its whole length, and no timer (a deadline), socket close (a client
// that went away) or new request could be seen until it ended.
const nextTurn = globalThis.setImmediate
  ? () => new Promise((resolve) => setImmediate(resolve))
  : () => new Promise((resolve) => setTimeout(resolve, 0));

export class Coordinator {
  /**
   * @param {import('../pipeline/pipeline_core.js').PipelineCore} pipeline a Pipeline, in Node or an edge isolate
   * @param {{maxWaiting?: number}} [options] requests admitted besides one (429 beyond)
   * @example const coordinator = new Coordinator(pipeline, { maxWaiting: 16 });
   */
  constructor(pipeline, { maxWaiting = 16 } = {}) {
    this.pipeline = pipeline;
    this.queue = new WorkQueue(maxWaiting);
    /** Steps run (each a pipeline.step of one session). */
    this.steps = 0;
  }

  /** A request's place (throws a 429 HttpError when the line is full); release() it at its end. */
  admit() {
    return this.queue.admit();
  }

  /**
   * Runs tokens of `session` through the pipeline in the request's turn -> the last position's
   * logits. A request whose signal fired before its turn came gives its turn away unrun.
   */
  step(ticket, session, tokens, signal) {
    return ticket.run(async () => {
      await nextTurn();
      signal?.throwIfAborted();
      this.steps++;
      return (await this.pipeline.step(session, tokens)).logits;
    });
  }

  /** Forgets the session on every node, in the request's turn, so no forward is under way meanwhile. */
  dropSession(ticket, session) {
    return ticket.run(() => this.pipeline.dropSession(session));
  }
}
