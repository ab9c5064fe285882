// Untrusted text inside a rendered chat template: each piece of client text (a message's content,
// a tool's description, a call's argument, a tool's result, an earlier thought) is rendered
// between two Unicode noncharacters, placed inside its leading and trailing whitespace so that the
// template's `trim` trims the same; afterwards they are cut out and the byte spans they enclosed
// are tokenized with no control or marker token matched inside them (docs/tokenizer.md,
// "Untrusted spans").

const OPEN = '\uFDD0';
const CLOSE = '\uFDD1';
// Their UTF-8 encodings: EF B7 90 and EF B7 91.
const OPEN_LAST = 0x90;
const CLOSE_LAST = 0x91;

/** Client text the chat format cannot carry: `param` names the request field. */
export class ChatContentError extends Error {
  constructor(param, message) {
    super(message);
    this.name = 'ChatContentError';
    this.param = param;
  }
}

/**
 * text with its non-whitespace part (as String.prototype.trim sees whitespace) between the
 * markers; the empty string stays empty, so that a template's test of it (`if message.content`)
 * answers the same. Throws ChatContentError naming `param` when text holds a marker itself.
 * @example marked(' hi ', 'messages[0].content') // ' \uFDD0hi\uFDD1 '
 */
export function marked(text, param) {
  if (text.includes(OPEN) || text.includes(CLOSE)) {
    throw new ChatContentError(param, `${param} holds the noncharacter U+FDD0 or U+FDD1, which this gateway reserves for marking client text`);
  }
  if (text === '') return text;
  const start = text.length - text.trimStart().length;
  const end = Math.max(start, text.trimEnd().length);
  return `${text.slice(0, start)}${OPEN}${text.slice(start, end)}${CLOSE}${text.slice(end)}`;
}

// The last byte of the marker at bytes[i], or 0 when none starts there.
function markAt(bytes, i) {
  const last = bytes[i + 2];
  return bytes[i] === 0xEF && bytes[i + 1] === 0xB7 && (last === OPEN_LAST || last === CLOSE_LAST) ? last : 0;
}

/**
 * The rendered text's UTF-8 bytes with the markers cut out, and the spans they enclosed
 * [begin0, end0, ...]. A marker without its pair means the template cut a piece of text (Gemma 4's
 * strip_thinking drops what follows an unclosed "<|channel>" in an assistant message): then where
 * it ends is unknown, and a guess could put the template's markers, or the client's, on the wrong
 * side: a ChatContentError.
 * @example unmarked('<|turn>user\n\uFDD0Hi\uFDD1<turn|>') // { bytes: <the text without markers>, untrusted: [12, 14] }
 */
export function unmarked(rendered) {
  const bytes = new TextEncoder().encode(rendered);
  const out = new Uint8Array(bytes.length);
  const untrusted = [];
  let n = 0;
  let copied = 0;
  let open = -1;
  const cut = () => new ChatContentError('messages', 'the chat template cut a message\'s text short (an assistant message with "<|channel>" and no "<channel|>" after it?), so where it ends is unknown');
  for (let i = bytes.indexOf(0xEF); i >= 0; i = bytes.indexOf(0xEF, i + 1)) {
    const mark = markAt(bytes, i);
    if (!mark) continue;
    if ((mark === OPEN_LAST) === (open >= 0)) throw cut();
    out.set(bytes.subarray(copied, i), n);
    n += i - copied;
    copied = i + 3;
    if (mark === OPEN_LAST) {
      open = n;
    } else {
      untrusted.push(open, n);
      open = -1;
    }
  }
  if (open >= 0) throw cut();
  out.set(bytes.subarray(copied), n);
  n += bytes.length - copied;
  return { bytes: out.subarray(0, n), untrusted };
}
