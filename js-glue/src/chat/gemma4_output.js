// What a Gemma 4 model writes in its turn, read into an OpenAI message: the thought channel
// `<|channel>thought … <channel|>` as reasoning_content, tool calls
// `<|tool_call>call:NAME{key:value,…}<tool_call|>` as tool_calls (arguments as JSON text, by
// gemma4_values.js), the rest as content. It reads as llama.cpp's Gemma 4 parser does
// (common/chat.cpp, common_chat_params_init_gemma4) with one difference by design: llama.cpp stops
// at the first thing its grammar refuses and drops the rest, where this reader keeps everything
// the model wrote: a call that does not parse (malformed, to a function the request did not
// declare, past the one call parallel_tool_calls: false allows, or cut off by the end of the
// output) is content, text after or between calls is content, and a lone `<channel|>` (which
// Gemma 4 may write at the end of its answer) or a `<|channel>` that opens no thought is dropped
// while the text after it stays (docs/gateway.md, "Tools and thinking").
//
// The same reader serves a whole answer and a stream: text is fed in pieces split anywhere, and
// each piece gives the deltas it settles. Text that may still turn out to be a marker is held
// back; a call is given out only once its closing marker has been read, since until then it may
// still turn out to be content. So the deltas of any split add up to the message of the whole.
import { dict, MORE, startsWith } from './gemma4_values.js';

const CHANNEL_OPEN = '<|channel>';
const CHANNEL_CLOSE = '<channel|>';
const THOUGHT = 'thought';
const CALL_OPEN = '<|tool_call>';
const CALL_CLOSE = '<tool_call|>';
const CALL_PREFIX = 'call:';
const SPACE = /^[ \t\n\v\f\r]*/;

/** A tool call id as OpenAI writes them: call_ and 24 letters and digits. */
export function toolCallId() {
  return `call_${crypto.randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

// The length of the longest end of `text` that begins one of `markers` without completing it,
// and one more for a trailing high surrogate, whose pair is still to come.
function heldLength(text, markers) {
  let held = 0;
  for (const marker of markers) {
    for (let n = Math.min(marker.length - 1, text.length); n > held; n--) {
      if (marker.startsWith(text.slice(text.length - n))) {
        held = n;
        break;
      }
    }
  }
  const last = text.charCodeAt(text.length - held - 1);
  return held + (last >= 0xD800 && last <= 0xDBFF ? 1 : 0);
}

/**
 * Reads one Gemma 4 turn. tools: the names of the functions the request declared (none: calls
 * stay content, as with tool_choice "none"); parallelToolCalls: false reads one call at most;
 * newId(): each call's id.
 * @example
 * const out = new Gemma4Output({ tools: ['get_weather'] });
 * for (const piece of pieces) for (const delta of out.push(piece)) send(delta);
 * for (const delta of out.end()) send(delta);
 * out.message // {content, reasoning_content, tool_calls}
 */
export class Gemma4Output {
  #buf = '';
  #mode = 'content';  // content | channel (after <|channel>) | reasoning | call
  #skipSpace = false;  // at a thought's start, where whitespace is not reasoning
  #deltas = [];

  constructor({ tools = [], parallelToolCalls = true, newId = toolCallId } = {}) {
    this.tools = tools;
    this.maxCalls = tools.length === 0 ? 0 : parallelToolCalls ? Infinity : 1;
    this.newId = newId;
    this.content = '';
    this.reasoning = '';
    this.calls = [];
  }

  /**
   * Feeds the next piece of output; answers the deltas it settles, in order:
   * {content} | {reasoning_content} | {tool_call: {index, id, name, arguments}}.
   */
  push(text) {
    this.#buf += text;
    this.#read(false);
    return this.#take();
  }

  /** The output is over: what was held back is settled. */
  end() {
    this.#read(true);
    return this.#take();
  }

  /** The message so far: {content, reasoning_content, tool_calls: [{id, type, function: {name, arguments}}]}. */
  get message() {
    return {
      content: this.content,
      reasoning_content: this.reasoning,
      tool_calls: this.calls.map(({ id, name, arguments: args }) => ({ id, type: 'function', function: { name, arguments: args } })),
    };
  }

  #take() {
    const out = this.#deltas;
    this.#deltas = [];
    return out;
  }

  #text(kind, text) {
    if (text === '') return;
    if (kind === 'content') this.content += text;
    else this.reasoning += text;
    const key = kind === 'content' ? 'content' : 'reasoning_content';
    const last = this.#deltas.at(-1);
    if (last && key in last) last[key] += text;
    else this.#deltas.push({ [key]: text });
  }

  #consume(n) {
    this.#buf = this.#buf.slice(n);
  }

  // Reads the buffer while it settles something; final: nothing more will come.
  #read(final) {
    for (;;) {
      const step = this.#mode === 'content' ? this.#readContent(final)
        : this.#mode === 'channel' ? this.#readChannel(final)
          : this.#mode === 'reasoning' ? this.#readReasoning(final)
            : this.#readCall(final);
      if (!step) return;
    }
  }

  #readContent(final) {
    const markers = this.calls.length < this.maxCalls ? [CHANNEL_OPEN, CHANNEL_CLOSE, CALL_OPEN] : [CHANNEL_OPEN, CHANNEL_CLOSE];
    let at = -1;
    let marker = null;
    for (const m of markers) {
      const i = this.#buf.indexOf(m);
      if (i >= 0 && (at < 0 || i < at)) [at, marker] = [i, m];
    }
    if (at < 0) {
      const keep = final ? 0 : heldLength(this.#buf, markers);
      this.#text('content', this.#buf.slice(0, this.#buf.length - keep));
      this.#consume(this.#buf.length - keep);
      return false;
    }
    this.#text('content', this.#buf.slice(0, at));
    if (marker === CALL_OPEN) {
      this.#consume(at);
      this.#mode = 'call';
    } else {
      this.#consume(at + marker.length);
      if (marker === CHANNEL_OPEN) this.#mode = 'channel';
    }
    return true;
  }

  // After <|channel>: more of them, then `thought` opens the thought; anything else opens nothing.
  #readChannel(final) {
    for (const [word, next] of [[CHANNEL_OPEN, 'channel'], [THOUGHT, 'reasoning']]) {
      const at = startsWith(this.#buf, 0, word);
      if (at === true) {
        this.#consume(word.length);
        this.#mode = next;
        this.#skipSpace = next === 'reasoning';
        return true;
      }
      if (at === MORE && !final) return false;
    }
    this.#mode = 'content';
    return true;
  }

  #readReasoning(final) {
    if (this.#skipSpace) {
      this.#consume(SPACE.exec(this.#buf)[0].length);
      if (this.#buf === '' && !final) return false;
      this.#skipSpace = false;
    }
    const at = this.#buf.indexOf(CHANNEL_CLOSE);
    if (at < 0) {
      const keep = final ? 0 : heldLength(this.#buf, [CHANNEL_CLOSE]);
      this.#text('reasoning', this.#buf.slice(0, this.#buf.length - keep));
      this.#consume(this.#buf.length - keep);
      return false;
    }
    this.#text('reasoning', this.#buf.slice(0, at));
    this.#consume(at + CHANNEL_CLOSE.length);
    this.#mode = 'content';
    return true;
  }

  // The buffer starts with <|tool_call>. A call that parses is given out whole; one that cannot
  // leaves its opening marker as content and the rest is read again.
  #readCall(final) {
    const call = this.#parseCall(this.#buf);
    if (call === MORE && !final) return false;
    if (call && call !== MORE) {
      const index = this.calls.length;
      const made = { id: this.newId(), name: call.name, arguments: call.arguments };
      this.calls.push(made);
      this.#deltas.push({ tool_call: { index, ...made } });
      this.#consume(call.end);
    } else {
      this.#text('content', CALL_OPEN);
      this.#consume(CALL_OPEN.length);
    }
    this.#mode = 'content';
    return true;
  }

  // <|tool_call>call:NAME{…}<tool_call|> at s[0] -> {name, arguments, end}, MORE or null. NAME is
  // the first declared name followed by `{`, as llama.cpp tries the tools in order.
  #parseCall(s) {
    let i = CALL_OPEN.length;
    const prefix = startsWith(s, i, CALL_PREFIX);
    if (prefix !== true) return prefix === MORE ? MORE : null;
    i += CALL_PREFIX.length;
    let name = null;
    for (const tool of this.tools) {
      const at = startsWith(s, i, `${tool}{`);
      if (at === MORE) return MORE;
      if (at) {
        name = tool;
        break;
      }
    }
    if (name === null) return null;
    i += name.length;
    // The arguments are read again only once a closing marker has come: until then they wait.
    if (!s.includes(CALL_CLOSE, i)) return MORE;
    const args = dict(s, i);
    if (args === null || args === MORE) return args;
    const close = startsWith(s, args.end, CALL_CLOSE);
    if (close !== true) return close === MORE ? MORE : null;
    return { name, arguments: args.json, end: args.end + CALL_CLOSE.length };
  }
}

/**
 * A whole Gemma 4 turn as a message (Gemma4Output's options).
 * @example parseGemma4Output('<|channel>thought\nHm<channel|>Hi', {}) // {content: 'Hi', reasoning_content: 'Hm', tool_calls: []}
 */
export function parseGemma4Output(text, options) {
  const out = new Gemma4Output(options);
  out.push(text);
  out.end();
  return out.message;
}
