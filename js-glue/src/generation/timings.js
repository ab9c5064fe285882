// llama.cpp's server `timings` object, with its field names and meanings, so tools written for
// llama-server read a layerfold answer unchanged. The prompt's time runs from the start of the
// generation to its first sampled token; the predicted time from that token to the last one, so
// it spans predicted_n − 1 tokens (the first comes from the prompt's logits) and the per-token
// figures divide by those. A rate whose divisor is not known yet is 0, as llama.cpp sends it.

/**
 * {cache_n, prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms,
 * predicted_per_token_ms, predicted_per_second} and, when tokens were drafted, draft_n and
 * draft_n_accepted. cachedTokens: the prompt's tokens a kept session held; promptTokens: those
 * processed; predictedTokens: those sampled (an end-of-turn one included, as usage counts them).
 * @example timings({ cachedTokens: 0, promptTokens: 12, promptMs: 40, predictedTokens: 9, predictedMs: 80 })
 */
export function timings({ cachedTokens, promptTokens, promptMs, predictedTokens, predictedMs, drafted = 0, accepted = 0 }) {
  const steps = Math.max(predictedTokens - 1, 0);
  return {
    cache_n: cachedTokens,
    prompt_n: promptTokens,
    prompt_ms: promptMs,
    prompt_per_token_ms: promptTokens > 0 ? promptMs / promptTokens : 0,
    prompt_per_second: promptMs > 0 ? (1000 * promptTokens) / promptMs : 0,
    predicted_n: predictedTokens,
    predicted_ms: predictedMs,
    predicted_per_token_ms: steps > 0 ? predictedMs / steps : 0,
    predicted_per_second: predictedMs > 0 ? (1000 * steps) / predictedMs : 0,
    ...(drafted > 0 && { draft_n: drafted, draft_n_accepted: accepted }),
  };
}
