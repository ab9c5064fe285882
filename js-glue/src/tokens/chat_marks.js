// Untrusted text inside a rendered chat template: each piece of client text (a message's content,
// a tool's description, a call's argument, a tool's result, an earlier thought) is rendered
// between two Unicode noncharacters, placed inside its leading and trailing whitespace so that the
// template's `trim` trims the same; afterwards they are cut out and the byte spans they enclosed
// are tokenized with no control or marker token matched inside them (docs/tokenizer.md,
// "Untrusted spans").

const OPEN = '\uFDD0';
const CLOSE = '\uFDD1';
// Where the template renders a media item (an image or audio part) of its messages: a third
// noncharacter, then the item's index as a private-use character.
const MEDIA = '\uFDD2';
const MEDIA_INDEX0 = 0xE000;
/** Media items one chat may hold. */
export const MAX_MEDIA_ITEMS = 0xF8FF - MEDIA_INDEX0 + 1;
// Their UTF-8 encodings: EF B7 90, EF B7 91 and EF B7 92.
const OPEN_LAST = 0x90;
const CLOSE_LAST = 0x91;
const MEDIA_LAST = 0x92;

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

/**
 * Media item `index` as the template is given it (unmarked() finds it where the template put it).
 * @example mediaMark(0) // '\uFDD2\uE000'
 */
export function mediaMark(index) {
  return MEDIA + String.fromCharCode(MEDIA_INDEX0 + index);
}

// The last byte of the marker at bytes[i], or 0 when none starts there.
function markAt(bytes, i) {
  const last = bytes[i + 2];
  return bytes[i] === 0xEF && bytes[i + 1] === 0xB7 && (last === OPEN_LAST || last === CLOSE_LAST || last === MEDIA_LAST) ? last : 0;
}

// The index a media mark's private-use character at bytes[i] (3 bytes of UTF-8) holds.
const mediaIndexAt = (bytes, i) => (((bytes[i] & 0x0F) << 12) | ((bytes[i + 1] & 0x3F) << 6) | (bytes[i + 2] & 0x3F)) - MEDIA_INDEX0;

/**
 * The rendered text's UTF-8 bytes with the markers cut out, the spans they enclosed [begin0, end0,
 * ...], and where media items were rendered [{at, index}] (at: their byte offset in `bytes`; a
 * media mark inside client text is that text's own). A marker without its pair means the template cut a piece of text (Gemma 4's
 * strip_thinking drops what follows an unclosed "<|channel>" in an assistant message): then where
 * it ends is unknown, and a guess could put the template's markers, or the client's, on the wrong
 * side: a ChatContentError.
 * @example unmarked('<|turn>user\n\uFDD0Hi\uFDD1<turn|>') // { bytes: <the text without markers>, untrusted: [12, 14], media: [] }
 */
export function unmarked(rendered) {
  const bytes = new TextEncoder().encode(rendered);
  const out = new Uint8Array(bytes.length);
  const untrusted = [];
  const media = [];
  let n = 0;
  let copied = 0;
  let open = -1;
  const cut = () => new ChatContentError('messages', 'the chat template cut a message\'s text short (an assistant message with "<|channel>" and no "<channel|>" after it?), so where it ends is unknown');
  for (let i = bytes.indexOf(0xEF); i >= 0; i = bytes.indexOf(0xEF, i + 1)) {
    const mark = markAt(bytes, i);
    if (!mark || (mark === MEDIA_LAST && open >= 0)) continue;
    if (mark === MEDIA_LAST) {
      out.set(bytes.subarray(copied, i), n);
      n += i - copied;
      media.push({ at: n, index: mediaIndexAt(bytes, i + 3) });
      copied = i + 6;
      i += 5;
      continue;
    }
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
  return { bytes: out.subarray(0, n), untrusted, media };
}
