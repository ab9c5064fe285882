// One request's generation: the prompt prefilled (past what its reused session already holds),
// then a token per step, sampled, checked against the end-of-turn ids and the stop strings,
// decoded and handed out as text deltas. The loop looks at the request's signal before every
// step, so a client that went away (or a deadline) stops it at the next step.
import { Sampler } from '../tokens/sampler.js';
import { tokenLogprobs } from './logprobs.js';
import { StopText } from './stop_text.js';

/**
 * Generates for one request. Yields {text, token} per step (text: the new visible text, maybe
 * empty; token: {id, logprob, top} when logprobs are asked for, else {id}; null for the text held
 * back to the end), and returns
 * {finishReason: 'stop'|'length', completionTokens (sampled tokens, an end-of-turn one included),
 * history: every token the session's cache now holds}.
 * @param {{step: (tokens: number[]) => Promise<Float32Array>, tokenizer, prompt: number[], reused: number,
 *          endIds: Set<number>, request: object, maxTokens: number, signal?: AbortSignal}} job
 * @example for await (const { text } of generate(job)) write(text);
 */
export async function* generate({ step, tokenizer, prompt, reused, endIds, request, maxTokens, signal }) {
  const sampler = new Sampler(request.sampling);
  const stop = new StopText(request.stop);
  const history = prompt.slice(0, reused);
  const generated = [];
  let shown = 0;
  let input = prompt.slice(reused);
  let finishReason = 'length';
  let full = '';
  let sampled = 0;  // the end-of-turn token counts, as llama.cpp's server counts it
  while (generated.length < maxTokens) {
    signal?.throwIfAborted();
    const logits = await step(input);
    history.push(...input);
    const id = sampler.sample(logits);
    sampled++;
    if (endIds.has(id)) {
      finishReason = 'stop';
      break;
    }
    const token = request.logprobs ? tokenLogprobs(logits, id, request.topLogprobs) : { id };
    generated.push(id);
    // The whole continuation is decoded each time: a character's bytes may span tokens.
    full = tokenizer.decode(generated);
    const visible = stop.update(full);
    yield { text: visible.text.slice(shown), token };
    shown = Math.max(shown, visible.text.length);
    if (visible.stopped) {
      finishReason = 'stop';
      full = visible.text;
      break;
    }
    input = [id];
  }
  // What was held back as a possible start of a stop sequence is text after all.
  if (full.length > shown) yield { text: full.slice(shown), token: null };
  return { finishReason, completionTokens: sampled, history };
}
