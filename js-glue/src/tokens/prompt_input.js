// What a prompt's tokens are made of, as plain data that a worker thread can take: the text's
// UTF-8 bytes, whether to add BOS, whether the text's control-token texts are parsed, and the
// byte spans of untrusted text (a chat's messages: tokens/chat.js). One rule for a prompt given
// as text, wherever it comes from (the gateway's /v1/completions, `generate` and `validate`
// without --chat): llama.cpp's server tokenizes a completion's text prompt with add_special and
// parse_special on, so "<start_of_turn>" typed there is the control token: that prompt is the
// client's own raw format.

/**
 * A prompt given as text: BOS added, control-token texts parsed (llama.cpp's rule).
 * @example encodePrompt(tokenizer, textPrompt('The capital of France is')) // [2, 818, 5279, 529, 7001, 563]
 */
export function textPrompt(text) {
  return { bytes: new TextEncoder().encode(text), addBos: true, parseSpecial: true, untrusted: null };
}

/**
 * The prompt's token ids, tokenized here (the caller's thread).
 * @example encodePrompt(pipeline.tokenizer, renderChat(pipeline.header, pipeline.tokenizer, messages))
 */
export function encodePrompt(tokenizer, { bytes, addBos, parseSpecial, untrusted }) {
  return tokenizer.encode(bytes, { addBos, parseSpecial, untrusted });
}

/**
 * The fewest tokens a prompt of `byteLength` bytes can be (a token stands for at most
 * tokenizer.maxTokenBytes bytes), known without tokenizing it; 0 when the vocabulary gives no
 * bound.
 * @example fewestTokens(tokenizer, 4 << 20) > nCtx // cannot fit: refuse before tokenizing
 */
export function fewestTokens(tokenizer, byteLength) {
  return tokenizer.maxTokenBytes > 0 ? Math.ceil(byteLength / tokenizer.maxTokenBytes) : 0;
}

/**
 * A prompt with media items at byte offsets `cuts` (ascending) -> the prompts of the text between
 * them, each with its untrusted spans and bytes of its own (a tokenizer thread takes them over);
 * BOS, if asked, before the first only.
 * @example textBetween(renderChat(header, tokenizer, messages), [17]) // [<bytes 0-17>, <bytes 17-end>]
 */
export function textBetween({ bytes, addBos, parseSpecial, untrusted }, cuts) {
  const bounds = [0, ...cuts, bytes.length];
  return bounds.slice(1).map((end, k) => {
    const begin = bounds[k];
    const spans = [];
    for (let i = 0; i < (untrusted?.length ?? 0); i += 2) {
      const [b, e] = [Math.max(untrusted[i], begin), Math.min(untrusted[i + 1], end)];
      if (b < e) spans.push(b - begin, e - begin);
    }
    return { bytes: bytes.slice(begin, end), addBos: addBos && k === 0, parseSpecial, untrusted: untrusted ? spans : null };
  });
}
