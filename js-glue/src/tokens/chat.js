// The model's own chat format: its tokenizer.chat_template rendered over the messages, tools and
// thinking switch (by @huggingface/jinja, given what llama.cpp's common chat layer gives its own
// Jinja engine: chat_inputs.js, gemma4_tool_responses.js), and the tokens that end a turn. Shared by `generate --chat` and
// the gateway.
//
// Only the template's own markers may become control tokens: a message that types "<turn|>" or
// "<end_of_turn>" must not close its turn, nor a tool result, a call's argument or a tool's
// description. Every piece of client text is marked as an untrusted span (chat_marks.js);
// everything outside the spans is tokenized as llama.cpp tokenizes the whole rendered text, so a
// benign chat gets llama.cpp's exact tokens.
import { Template } from '@huggingface/jinja';

import { unmarked } from './chat_marks.js';
import { templateMessages, templateTools } from './chat_inputs.js';
import { foldToolResponses, isGemma4, wantsToolResponses } from './gemma4_tool_responses.js';
import { encodePrompt } from './prompt_input.js';

export { ChatContentError } from './chat_marks.js';

// llama.cpp's Jinja engine sorts `dictsort`'s keys case-sensitively whatever it is asked (Jinja's
// own default is not), and the order of a tool's parameters and a call's arguments is part of the
// prompt: the argument-less filter is asked for that order.
const llamaDictsort = (source) => source.replace(/\|\s*dictsort\b(?!\s*\()/g, '| dictsort(true)');

/**
 * End-of-generation ids: EOS plus the end-of-turn control tokens the vocabulary has; Gemma 4's
 * <|tool_response> among them, as in llama.cpp: after its calls the model stops to wait for
 * their results.
 * @example stopIds(pipeline.tokenizer).has(id)
 */
export function stopIds(tokenizer) {
  return new Set([tokenizer.eos, ...controlIds(tokenizer, ['<turn|>', '<end_of_turn>', '<|tool_response>'])]);
}

/**
 * The ids that open a turn in the Gemma chat formats the vocabulary has (<|turn> of Gemma 4,
 * <start_of_turn> of Gemma 3): a rendered chat's last one opens the model's turn.
 * @example const opens = turnStartIds(tokenizer); prompt.findLastIndex((id) => opens.has(id))
 */
export function turnStartIds(tokenizer) {
  return new Set(controlIds(tokenizer, ['<|turn>', '<start_of_turn>']));
}

// The ids of those texts that are one token of the vocabulary.
function controlIds(tokenizer, texts) {
  const ids = [];
  for (const text of texts) {
    const encoded = tokenizer.encode(text, { addBos: false, parseSpecial: true });
    if (encoded.length === 1 && tokenizer.piece(encoded[0]) === text) ids.push(encoded[0]);
  }
  return ids;
}

/**
 * Chat messages [{role, content, reasoning_content?, tool_calls?, tool_call_id?, name?}] (OpenAI's
 * shapes, checked), with OpenAI tools and the thinking switch -> what their prompt's tokens are
 * made of (tokens/prompt_input.js): the rendered text as UTF-8 bytes (ending with the generation
 * prompt, the model's turn opened), whether BOS is still to be added, and the byte spans of the
 * client's text [begin0, end0, ...], which Tokenizer.encode keeps from becoming control tokens;
 * and where the messages' image and audio parts were rendered, media [{at, part}] (at: a byte offset of
 * `bytes`), in the order of the text.
 * Throws when the model has no chat template, ChatContentError for client text the format cannot
 * carry.
 * @example const { bytes, addBos, untrusted } = renderChat(pipeline.header, pipeline.tokenizer, [{ role: 'user', content: 'Hi' }], { enableThinking: true });
 */
export function renderChat(header, tokenizer, messages, { tools, enableThinking = false } = {}) {
  const source = header.metadata['tokenizer.chat_template'];
  if (typeof source !== 'string') throw new Error('the model has no tokenizer.chat_template');
  const bos = tokenizer.piece(tokenizer.bos);
  const parts = [];
  const context = {
    messages: templateMessages(wantsToolResponses(source) ? foldToolResponses(messages) : messages, parts),
    add_generation_prompt: true,
    bos_token: bos,
    eos_token: tokenizer.piece(tokenizer.eos),
    enable_thinking: enableThinking,
  };
  const declared = templateTools(tools);
  if (declared) context.tools = declared;
  let rendered = new Template(llamaDictsort(source)).render(context);
  // llama.cpp opens the model's turn after a Gemma 4 prompt the template left at a closed turn (a
  // tool round answered with content), where the template itself writes no generation prompt.
  if (isGemma4(source) && rendered.endsWith('<turn|>\n')) rendered += '<|turn>model\n';
  // The template writes its own BOS and turn markers: those are parsed as special tokens.
  const { bytes, untrusted, media } = unmarked(rendered);
  if (media.length !== parts.length || media.some((m, k) => m.index !== k)) {
    throw new ChatContentError('messages', `the chat template rendered ${media.length} of the messages' ${parts.length} media items, or out of order`);
  }
  return { bytes, untrusted, media: media.map(({ at }, k) => ({ at, part: parts[k] })), addBos: !rendered.startsWith(bos), parseSpecial: true };
}

/**
 * Chat messages of text -> the prompt's token ids, ending with the generation prompt (the model's
 * turn opened); no piece of client text becomes a control token. Takes and throws as renderChat.
 * @example chatTokens(pipeline.header, pipeline.tokenizer, [{ role: 'user', content: 'Hi' }])
 */
export function chatTokens(header, tokenizer, messages, options = {}) {
  return encodePrompt(tokenizer, renderChat(header, tokenizer, messages, options));
}
