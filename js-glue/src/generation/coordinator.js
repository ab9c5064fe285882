// The one seam between the gateway's requests and the pipeline's forwards. Every request asks
// here for its sessions' steps, and the steps of different requests go to the Pipeline at once:
// it runs them concurrently through the nodes (a session's own steps stay in call order:
// pipeline_core.js), so each node sees several sessions' forwards together, to run in turn or
// as one batch (the node's batcher, docs/batching.md), while the next node runs others. Admission is
// bounded (WorkQueue: 429 with Retry-After beyond maxWaiting); nothing else is queued here.
import { WorkQueue } from '../server/work_queue.js';
import { inSpan } from '../telemetry/spans.js';
import { stepWithMedia } from './media.js';

// A local node's forward runs synchronously in this thread (the single-thread build) and its
// promise settles in a microtask: without a turn of the event loop between steps, a generation
// would hold the loop for its whole length, and no timer (a deadline), socket close (a client
// that went away), new request or other request's step could be seen until it ended.
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
   * Runs tokens of `session` through the pipeline beside the other requests' steps -> {logits, draft}:
   * the last position's logits, or with allRows every position's, or with logits false none, and
   * with draft k > 0 the last node's MTP drafts after the step, or null (Pipeline.step). An image's
   * run of placeholder ids goes through as its rows (items: placeholder -> image, media.js), in a
   * pipeline step of its own (Pipeline.stepMedia); the options are the last run's.
   * A request whose signal fired while it waited for its turn of the event loop is not run; one whose signal fires
   * during the step ends with the signal's reason as soon as the remote call under way sees it.
   * Only an admitted request (admit()) asks for steps; trace: the request's, carried to the nodes.
   * @example const { logits } = await coordinator.step('chat-0', promptIds, controller.signal);
   */
  async step(session, tokens, signal, { allRows = false, logits = true, draft = 0, trace = null, items = null } = {}) {
    await nextTurn();
    signal?.throwIfAborted();
    this.steps++;
    const attributes = { 'layerfold.session': session, 'layerfold.tokens': tokens.length };
    const { logits: answered, draft: drafted } = await inSpan(trace, 'pipeline step', attributes,
      (span) => stepWithMedia(this.pipeline, session, tokens, items ?? new Map(), { allRows, logits, draft, signal, trace: span }));
    return { logits: answered, draft: drafted ?? null };
  }

  /** Cuts the session back to its first n positions on every node (Pipeline.truncate), after its steps under way. */
  truncate(session, n, signal, trace = null) {
    return inSpan(trace, 'pipeline truncate', { 'layerfold.session': session, 'layerfold.n_past': n }, (span) => this.pipeline.truncate(session, n, { signal, trace: span }));
  }

  /** Keeps a checkpoint of the session on every node, at most `keep` (Pipeline.checkpoint), after its steps under way. */
  checkpoint(session, keep, signal, trace = null) {
    return inSpan(trace, 'pipeline checkpoint', { 'layerfold.session': session }, (span) => this.pipeline.checkpoint(session, { keep, signal, trace: span }));
  }

  /** Forgets the session on every node, after its steps under way (the pipeline orders them). */
  dropSession(session) {
    return this.pipeline.dropSession(session);
  }
}
