// The model's own chat format: its tokenizer.chat_template rendered over the messages (by
// @huggingface/jinja, as llama.cpp's server renders it with minja), and the tokens that end a
// turn. Shared by `generate --chat` and the gateway.
import { Template } from '@huggingface/jinja';

/**
 * End-of-generation ids: EOS plus the end-of-turn control tokens the vocabulary has.
 * @example stopIds(pipeline.tokenizer).has(id)
 */
export function stopIds(tokenizer) {
  const ids = new Set([tokenizer.eos]);
  for (const text of ['<turn|>', '<end_of_turn>']) {
    const encoded = tokenizer.encode(text, { addBos: false, parseSpecial: true });
    if (encoded.length === 1 && tokenizer.piece(encoded[0]) === text) ids.add(encoded[0]);
  }
  return ids;
}

/**
 * Chat messages [{role, content}] -> the prompt's token ids, ending with the generation prompt
 * (the model's turn opened). Throws when the model has no chat template.
 * @example chatTokens(pipeline.header, pipeline.tokenizer, [{ role: 'user', content: 'Hi' }])
 */
export function chatTokens(header, tokenizer, messages) {
  const source = header.metadata['tokenizer.chat_template'];
  if (typeof source !== 'string') throw new Error('the model has no tokenizer.chat_template');
  const bos = tokenizer.piece(tokenizer.bos);
  const text = new Template(source).render({
    messages,
    add_generation_prompt: true,
    bos_token: bos,
    eos_token: tokenizer.piece(tokenizer.eos),
  });
  // The template writes its own BOS and turn markers: parse them as special tokens.
  return tokenizer.encode(text, { addBos: !text.startsWith(bos), parseSpecial: true });
}
