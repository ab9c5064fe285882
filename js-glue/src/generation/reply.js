// One started request's answer as its caller takes it (answer.js's shapes): whole, the response
// object once the generation has ended, or its stream chunks pulled one at a time. A stream its
// caller leaves early (a break out of for await) stops the generation at its next step and
// frees its session, as cancel() does for a caller that cannot wait for the next chunk (the
// gateway, whose client went away).
const leftEarly = () => Object.assign(new Error('the stream was left before its end'), { code: 'client_closed' });

export class Reply {
  /**
   * @param {import('./run.js').Run} run
   * @param {import('./answer.js').Answer} answer
   */
  constructor(run, answer) {
    this.run = run;
    this.answer = answer;
  }

  /** -> the whole response object ({choices, usage, timings, …}). */
  async whole() {
    for (;;) {
      const { value, done } = await this.run.events.next();
      if (done) return this.answer.complete(value);
      this.answer.add(value);
    }
  }

  /** The stream's chunks: the first ones, one per visible delta, the last ones with usage and timings. */
  async* chunks() {
    let over = false;
    try {
      yield* this.answer.first();
      for (;;) {
        const { value, done } = await this.run.events.next();
        if (done) {
          over = true;
          yield* this.answer.last(value);
          return;
        }
        yield* this.answer.next(value);
      }
    } finally {
      if (!over) await this.cancel(leftEarly());
    }
  }

  /** Stops the generation at its next step with `reason` and ends the request (its session dropped). */
  cancel(reason) {
    this.run.abort(reason);
    return this.run.close();
  }
}
