// The model's own chat format: its tokenizer.chat_template rendered over the messages (by
// @huggingface/jinja, as llama.cpp's server renders it with minja), and the tokens that end a
// turn. Shared by `generate --chat` and the gateway.
//
// Only the template's own markers may become control tokens: a message that types "<turn|>" or
// "<end_of_turn>" must not close its turn. Each message's text is rendered between two Unicode
// noncharacters, placed inside its leading and trailing whitespace so that the template's `trim`
// trims the same; afterwards they are cut out and the byte spans they enclosed are tokenized
// with no control or marker token matched inside them (docs/tokenizer.md, "Untrusted spans").
// Everything outside the spans is tokenized as llama.cpp tokenizes the whole rendered text, so a
// benign chat gets llama.cpp's exact tokens.
import { Template } from '@huggingface/jinja';

import { encodePrompt } from './prompt_input.js';

const OPEN = '\uFDD0';
const CLOSE = '\uFDD1';
// Their UTF-8 encodings: EF B7 90 and EF B7 91.
const OPEN_LAST = 0x90;
const CLOSE_LAST = 0x91;

/** A message whose content the chat format cannot carry: `param` names it. */
export class ChatContentError extends Error {
  constructor(param, message) {
    super(message);
    this.name = 'ChatContentError';
    this.param = param;
  }
}

/**
 * End-of-generation ids: EOS plus the end-of-turn control tokens the vocabulary has; Gemma 4's
 * <|tool_response> among them, as in llama.cpp: after its calls the model stops to wait for
 * their results.
 * @example stopIds(pipeline.tokenizer).has(id)
 */
export function stopIds(tokenizer) {
  const ids = new Set([tokenizer.eos]);
  for (const text of ['<turn|>', '<end_of_turn>', '<|tool_response>']) {
    const encoded = tokenizer.encode(text, { addBos: false, parseSpecial: true });
    if (encoded.length === 1 && tokenizer.piece(encoded[0]) === text) ids.add(encoded[0]);
  }
  return ids;
}

// content with its non-whitespace part (as String.prototype.trim, which the template's `trim`
// runs, sees whitespace) between the markers; the empty string stays empty, so that a template's
// test of it (`if message.content`) answers the same.
function marked(content, param) {
  if (content.includes(OPEN) || content.includes(CLOSE)) {
    throw new ChatContentError(param, `${param} holds the noncharacter U+FDD0 or U+FDD1, which this gateway reserves for marking message text`);
  }
  if (content === '') return content;
  const start = content.length - content.trimStart().length;
  const end = Math.max(start, content.trimEnd().length);
  return `${content.slice(0, start)}${OPEN}${content.slice(start, end)}${CLOSE}${content.slice(end)}`;
}

// The last byte of the marker at bytes[i], or 0 when none starts there.
function markAt(bytes, i) {
  const last = bytes[i + 2];
  return bytes[i] === 0xEF && bytes[i + 1] === 0xB7 && (last === OPEN_LAST || last === CLOSE_LAST) ? last : 0;
}

// The rendered text's UTF-8 bytes with the markers cut out, and the spans they enclosed.
// A marker without its pair means the template cut a message's text (Gemma 4's strip_thinking
// drops what follows an unclosed "<|channel>" in an assistant message): then where the message
// ends is unknown, and a guess could put the template's markers, or the message's, on the wrong
// side.
function unmarked(rendered) {
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

/**
 * Chat messages [{role, content}] -> what their prompt's tokens are made of (tokens/prompt_input.js):
 * the rendered text as UTF-8 bytes (ending with the generation prompt, the model's turn opened),
 * whether BOS is still to be added, and the byte spans of the messages' text [begin0, end0, ...],
 * which Tokenizer.encode keeps from becoming control tokens. Throws when the model has no chat
 * template, ChatContentError for content the format cannot carry.
 * @example const { bytes, addBos, untrusted } = renderChat(pipeline.header, pipeline.tokenizer, [{ role: 'user', content: 'Hi' }]);
 */
export function renderChat(header, tokenizer, messages) {
  const source = header.metadata['tokenizer.chat_template'];
  if (typeof source !== 'string') throw new Error('the model has no tokenizer.chat_template');
  const bos = tokenizer.piece(tokenizer.bos);
  const rendered = new Template(source).render({
    messages: messages.map((m, i) => ({ ...m, content: marked(m.content, `messages[${i}].content`) })),
    add_generation_prompt: true,
    bos_token: bos,
    eos_token: tokenizer.piece(tokenizer.eos),
  });
  // The template writes its own BOS and turn markers: those are parsed as special tokens.
  return { ...unmarked(rendered), addBos: !rendered.startsWith(bos), parseSpecial: true };
}

/**
 * Chat messages [{role, content}] -> the prompt's token ids, ending with the generation prompt
 * (the model's turn opened); no message's text becomes a control token. Throws as renderChat.
 * @example chatTokens(pipeline.header, pipeline.tokenizer, [{ role: 'user', content: 'Hi' }])
 */
export function chatTokens(header, tokenizer, messages) {
  return encodePrompt(tokenizer, renderChat(header, tokenizer, messages));
}
