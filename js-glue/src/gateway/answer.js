// One request's answer built from its generation's events ({text, token}: generation.js): the
// text as it comes, or, through a reader (chat_output.js), the content, reasoning_content and
// tool_calls it reads; as one response object or as stream chunks. Logprobs of tokens whose
// text gives no chunk yet travel with the next chunk.
import { finishReasonOf } from './chat_output.js';
import { streamDeltas, usage } from './responses.js';

export class Answer {
  #tokens = [];
  #text = '';

  /**
   * @param {import('./responses.js').ResponseShapes} shapes
   * @param {import('../chat/gemma4_output.js').Gemma4Output | null} reader
   * @param {boolean} includeUsage stream_options.include_usage
   * @example const answer = new Answer(shapes, chatOutputReader(request, gemma4), request.includeUsage);
   */
  constructor(shapes, reader, includeUsage = false) {
    this.shapes = shapes;
    this.reader = reader;
    this.includeUsage = includeUsage;
  }

  #hold(token) {
    if (token?.logprob !== undefined) this.#tokens.push(token);
  }

  #take() {
    const tokens = this.#tokens;
    this.#tokens = [];
    return tokens;
  }

  // The chunks of a reader's deltas, the waiting tokens' logprobs on the first.
  #chunks(deltas) {
    return deltas.flatMap(streamDeltas).map((delta) => this.shapes.chunk({ delta, tokens: this.#take() }, this.includeUsage));
  }

  /** The stream's first chunk. */
  first() {
    return this.shapes.chunk({ first: true }, this.includeUsage);
  }

  /** The chunks one generation event gives (maybe none). */
  next({ text, token }) {
    this.#hold(token);
    if (!this.reader) return text === '' ? [] : [this.shapes.chunk({ text, tokens: this.#take() }, this.includeUsage)];
    return this.#chunks(this.reader.push(text));
  }

  /** The stream's last chunks once the generation returned {finishReason, usage}. */
  last({ finishReason, usage: u }) {
    const out = this.reader ? this.#chunks(this.reader.end()) : [];
    if (this.#tokens.length) out.push(this.shapes.chunk({ tokens: this.#take() }, this.includeUsage));
    out.push(this.shapes.chunk({ finishReason: finishReasonOf(finishReason, this.reader?.message) }, this.includeUsage));
    if (this.includeUsage) out.push(this.shapes.usageChunk(usage(u)));
    return out;
  }

  /** Takes one generation event of a whole answer. */
  add({ text, token }) {
    this.#hold(token);
    this.#text += text;
    this.reader?.push(text);
  }

  /** The whole answer once the generation returned {finishReason, usage}. */
  complete({ finishReason, usage: u }) {
    this.reader?.end();
    const message = this.reader?.message ?? null;
    return this.shapes.complete({ text: this.#text, message, tokens: this.#take(), finishReason: finishReasonOf(finishReason, message), usage: usage(u) });
  }
}
