// One admitted generation request from its prompt to its end: the session it continues or
// starts, its abort signal (the client going away, its deadline), the generator, and what is
// done at the end: a finished request's session is kept for the next turn, an aborted or failed
// one is dropped on every node, and its place in the line is given back either way. The signal
// goes down to every remote call of the request's steps and cuts (coordinator.js), so a
// deadline or a client that went away ends the request within moments, whatever a node does.
// The n choices of a request run one after another in its one session: the prompt is
// prefilled once, and each later choice starts from the prompt's logits in the session cut back
// to the prompt (a node that cannot cut in place rebuilds it by replay, docs/gateway.md).
import { OpenAIError } from './errors.js';
import { generate } from './decode.js';

export class Run {
  #ends;

  /**
   * @param {{coordinator, sessions, tokenizer, endIds: Set<number>, drafter?: object, mtp?: {maxDraft: number}, constraints?: object[], ticket, request,
   *          prompt: number[], items?: Map, maxTokens: number, checkpoint?: {at: number, keep: number}, deadlineMs?: number,
   *          clientSignal?: AbortSignal, trace?: object, observer?: object}} options
   *   items: the prompt's images by their placeholder ids (media.js)
   *   checkpoint: where the prompt's prefill stops for the session to keep a checkpoint (the
   *   model's turn opening), at most `keep` per node; null for none
   *   deadlineMs: none for a run only its caller stops (abort(): `layerfold chat`'s Ctrl-C)
   *   trace: the request's (protocol/traceparent.js requestTrace), carried to every node it calls
   *   drafter: prompt lookup's; mtp: the last node's MTP drafts, at most maxDraft at once (decode.js)
   *   constraints: one grammar state or thought channel per choice (tokens/grammar/constraint.js,
   *   thought_channel.js), or null; closed when the request ends
   */
  constructor({ coordinator, sessions, tokenizer, endIds, drafter = null, mtp = null, constraints = null, ticket, request, prompt, items = new Map(), maxTokens,
    checkpoint = null, deadlineMs,
    clientSignal, trace = null, observer = {} }) {
    this.controller = new AbortController();
    const taken = sessions.take(prompt);
    this.session = taken.session;
    this.reused = taken.reused;
    this.promptTokens = prompt.length;
    this.observer = observer;
    this.trace = trace;
    this.t0 = performance.now();
    if (deadlineMs !== undefined) {
      this.timer = setTimeout(() => this.abort(new OpenAIError(504, `the request's deadline of ${deadlineMs} ms passed`, { code: 'deadline_exceeded' })), deadlineMs);
      this.timer.unref?.();
    }
    this.onClientGone = () => this.abort(Object.assign(new Error('the client went away'), { code: 'client_closed' }));
    clientSignal?.addEventListener('abort', this.onClientGone, { once: true });
    this.clientSignal = clientSignal;
    const signal = this.controller.signal;
    const step = (tokens, allRows, draft) => coordinator.step(this.session, tokens, signal, { allRows, draft, trace, items });
    const cut = (n) => coordinator.truncate(this.session, n, signal, trace);
    this.#ends = { coordinator, sessions, ticket, constraints, checkpoint, items };
    this.finished = false;
    this.events = this.#guarded(this.#generation(taken.cut, { step, cut, drafter, mtp, tokenizer, prompt, endIds, request, maxTokens, signal }));
  }

  // The generation, once a kept session that holds more than the shared prefix has been cut back
  // to it. A cut some node refused (its sliding ring has moved on: docs/gateway.md) or a pipeline
  // that cannot cut (early exit) starts cold instead, in a new session: the same answer bytes.
  async* #generation(cut, job) {
    const { coordinator, sessions } = this.#ends;
    const startedAt = performance.now();
    if (cut) {
      const refused = await coordinator.truncate(this.session, this.reused, job.signal, this.trace).then(
        ({ rebuilt }) => rebuilt.length > 0,
        (error) => {
          if (error.code === 'failed_precondition') return true;
          throw error;
        });
      if (refused) {
        await coordinator.dropSession(this.session);
        this.session = sessions.newSession();
        this.reused = 0;
      }
    }
    this.observer.promptTokens?.(this.promptTokens, this.reused);
    const prefilled = await this.#toCheckpoint(job);
    const prefill = job.request.n > 1 ? { logits: null } : null;
    const total = { completionTokens: 0, drafted: 0, accepted: 0 };
    let result = null;
    let firstTokenAt = null;
    for (let index = 0; index < job.request.n; index++) {
      const reused = index === 0 ? prefilled : await this.#backToPrompt(job);
      const constraint = this.#ends.constraints?.[index] ?? null;
      const choice = generate({ ...job, reused, prefill: index === 0 || reused === job.prompt.length ? prefill : null, index, constraint });
      try {
        for (;;) {
          const { value, done } = await choice.next();
          if (done) {
            result = value;
            break;
          }
          yield { ...value, index };
        }
      } finally {
        await choice.return();
      }
      yield { index, finishReason: result.finishReason };
      for (const key of Object.keys(total)) total[key] += result[key];
      firstTokenAt ??= result.firstTokenAt;
    }
    return { ...result, ...total, startedAt, firstTokenAt };
  }

  // The prompt prefilled up to the checkpoint's position, where the session keeps one: a later
  // request whose prompt parts from this one's anywhere after it (an edited message, a reply the
  // template renders otherwise than it was generated) returns there on every node, however far
  // the sliding rings have moved on (docs/gateway.md, "Sessions and prefix reuse"). Split there,
  // the prefill gives the bytes of one step. -> the positions the session then holds
  async #toCheckpoint(job) {
    const checkpoint = this.#ends.checkpoint;
    if (checkpoint === null || checkpoint.at <= this.reused) return this.reused;
    const { coordinator } = this.#ends;
    await coordinator.step(this.session, job.prompt.slice(this.reused, checkpoint.at), job.signal, { logits: false, trace: this.trace, items: this.#ends.items });
    await coordinator.checkpoint(this.session, checkpoint.keep, job.signal, this.trace);
    return checkpoint.at;
  }

  // The session cut back to the whole prompt for the next choice -> the positions it keeps; a
  // pipeline that cannot cut (early exit) starts the choice cold in a new session instead.
  async #backToPrompt(job) {
    const { coordinator, sessions } = this.#ends;
    try {
      await coordinator.truncate(this.session, job.prompt.length, job.signal, this.trace);
      return job.prompt.length;
    } catch (error) {
      if (error.code !== 'failed_precondition') throw error;
      await coordinator.dropSession(this.session);
      this.session = sessions.newSession();
      return 0;
    }
  }

  /** Stops the generation at its next step with `reason` (an Error). */
  abort(reason) {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
  }

  // The generator with the end-of-request work in its finally: it runs when the generation
  // returns, throws, or is closed early (return(): a stream whose client went away).
  async* #guarded(events) {
    let result = null;
    try {
      result = yield* this.#timed(events);
      this.observer.drafts?.(result.drafted, result.accepted);
      return {
        ...result,
        usage: {
          promptTokens: this.promptTokens, completionTokens: result.completionTokens, cachedTokens: this.reused,
          acceptedDrafts: result.accepted, rejectedDrafts: result.drafted - result.accepted,
        },
        // The n choices share one prompt; their tokens are timed together, first to last.
        timings: {
          cachedTokens: this.reused, promptTokens: this.promptTokens - this.reused, promptMs: result.firstTokenAt - result.startedAt,
          predictedTokens: result.completionTokens, predictedMs: result.lastTokenAt - result.firstTokenAt,
          drafted: result.drafted, accepted: result.accepted,
        },
      };
    } finally {
      await this.#finish(result);
    }
  }

  /**
   * Ends a request whose generator may never have started (a stream cancelled before its
   * first step): what the generator's own end would have done, once.
   */
  async close() {
    await this.events.return();
    await this.#finish(null);
  }

  async #finish(result) {
    if (this.finished) return;
    this.finished = true;
    const { coordinator, sessions, ticket, constraints } = this.#ends;
    clearTimeout(this.timer);
    for (const constraint of constraints ?? []) constraint.close();
    this.clientSignal?.removeEventListener('abort', this.onClientGone);
    const drop = (session) => coordinator.dropSession(session);
    if (!result) {
      // The answer (an error) does not wait for the nodes to forget the session: a node that is
      // down or hanging would hold it past the deadline. The drop is bounded on its own
      // (RemoteNode.dropSession), and the place in the line comes back now.
      ticket.release();
      drop(this.session).catch(() => {});
    } else {
      try {
        await sessions.keep(this.session, result.history, drop);
      } finally {
        ticket.release();
      }
    }
    this.observer.finished?.(result ? result.completionTokens : null, performance.now() - this.t0, this.trace);
    this.trace?.end(result ? null : this.controller.signal.reason ?? new Error('the generation ended without a result'));
  }

  // Time to first token and between tokens, for the metrics.
  async* #timed(events) {
    let previous = null;
    try {
      for (;;) {
        const { value, done } = await events.next();
        if (done) return value;
        if (value.token) {
          const now = performance.now();
          if (previous === null) this.observer.firstToken?.(now - this.t0);
          else this.observer.interToken?.(now - previous);
          previous = now;
        }
        yield value;
      }
    } finally {
      await events.return();
    }
  }
}
