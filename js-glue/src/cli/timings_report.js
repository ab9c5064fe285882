// A generation's timings (generation/timings.js, llama.cpp's server's) as the lines of a text
// report, in the words of llama.cpp's: the prompt's tokens a kept session already held (when
// some did), those processed, those predicted.

/**
 * @example write(timingsReport(timings({ cachedTokens: 0, promptTokens: 12, promptMs: 40, predictedTokens: 9, predictedMs: 80 })))
 */
export function timingsReport(t) {
  const line = (what, n, ms, perToken, perSecond) =>
    `  ${what} ${n} tokens in ${ms.toFixed(1)} ms (${perToken.toFixed(2)} ms per token, ${perSecond.toFixed(1)} tokens per second)\n`;
  const cached = t.cache_n > 0 ? `  cached    ${t.cache_n} tokens\n` : '';
  return cached + line('prompt   ', t.prompt_n, t.prompt_ms, t.prompt_per_token_ms, t.prompt_per_second)
    + line('predicted', t.predicted_n, t.predicted_ms, t.predicted_per_token_ms, t.predicted_per_second);
}
