// One request's answer built from its generation's events (run.js: {index, text, token} for a
// choice's tokens, {index, finishReason} when a choice ends): each choice's text as it comes, or,
// through a reader (chat_output.js), the content, reasoning_content and tool_calls it reads; as
// one response object or as stream chunks. Logprobs of tokens whose text gives no chunk yet
// travel with the choice's next chunk. The request's timings (llama.cpp's, timings.js) go on
// the whole answer, or on the stream's last chunk as llama.cpp's server puts them: the usage
// chunk when there is one, else the last choice's finish chunk, which waits for the generation's
// end to carry them.
import { finishReasonOf } from './chat_output.js';
import { streamDeltas, usage } from './responses.js';
import { timings } from './timings.js';

// One choice: its text, its reader, the tokens whose logprobs wait for a chunk.
class Choice {
  tokens = [];
  text = '';
  finishReason = null;

  constructor(index, reader) {
    this.index = index;
    this.reader = reader;
  }

  hold(token) {
    if (token?.logprob !== undefined) this.tokens.push(token);
  }

  take() {
    const tokens = this.tokens;
    this.tokens = [];
    return tokens;
  }
}

export class Answer {
  #finish = null;  // the last choice's finish chunk, until the generation returns its timings

  /**
   * @param {import('./responses.js').ResponseShapes} shapes
   * @param {() => (import('../chat/gemma4_output.js').Gemma4Output | null)} newReader a reader per choice
   * @param {{n?: number, includeUsage?: boolean}} options n choices; stream_options.include_usage
   * @example const answer = new Answer(shapes, () => chatOutputReader(request, gemma4), request);
   */
  constructor(shapes, newReader, { n = 1, includeUsage = false } = {}) {
    this.shapes = shapes;
    this.includeUsage = includeUsage;
    this.choices = Array.from({ length: n }, (_, index) => new Choice(index, newReader()));
  }

  #chunk(choice, fields) {
    return this.shapes.chunk({ index: choice.index, ...fields }, this.includeUsage);
  }

  // The chunks of a reader's deltas, the waiting tokens' logprobs on the first.
  #chunks(choice, deltas) {
    return deltas.flatMap(streamDeltas).map((delta) => this.#chunk(choice, { delta, tokens: choice.take() }));
  }

  /** The stream's first chunks, one per choice. */
  first() {
    return this.choices.map((choice) => this.#chunk(choice, { first: true }));
  }

  /** The chunks one generation event gives (maybe none). */
  next({ index, text, token, finishReason }) {
    const choice = this.choices[index];
    if (finishReason) {
      const out = this.#end(choice, finishReason);
      if (index === this.choices.length - 1) this.#finish = out.pop();
      return out;
    }
    choice.hold(token);
    if (!choice.reader) return text === '' ? [] : [this.#chunk(choice, { text, tokens: choice.take() })];
    return this.#chunks(choice, choice.reader.push(text));
  }

  // A choice's last chunks: what its reader still held, the logprobs still waiting, its finish.
  #end(choice, finishReason) {
    const out = choice.reader ? this.#chunks(choice, choice.reader.end()) : [];
    if (choice.tokens.length) out.push(this.#chunk(choice, { tokens: choice.take() }));
    out.push(this.#chunk(choice, { finishReason: finishReasonOf(finishReason, choice.reader?.message) }));
    return out;
  }

  /** The stream's last chunks once the generation returned {usage, timings}. */
  last({ usage: u, timings: t }) {
    const out = [this.#finish, ...(this.includeUsage ? [this.shapes.usageChunk(usage(u))] : [])];
    return [...out.slice(0, -1), { ...out.at(-1), timings: timings(t) }];
  }

  /** Takes one generation event of a whole answer. */
  add({ index, text, token, finishReason }) {
    const choice = this.choices[index];
    if (finishReason) {
      choice.reader?.end();
      choice.finishReason = finishReasonOf(finishReason, choice.reader?.message);
      return;
    }
    choice.hold(token);
    choice.text += text;
    choice.reader?.push(text);
  }

  /** The whole answer once the generation returned {usage, timings}. */
  complete({ usage: u, timings: t }) {
    const choices = this.choices.map((c) => ({ text: c.text, message: c.reader?.message ?? null, tokens: c.take(), finishReason: c.finishReason }));
    return { ...this.shapes.complete({ choices, usage: usage(u) }), timings: timings(t) };
  }
}
