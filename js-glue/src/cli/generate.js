// layerfold generate: stream a continuation through the pipeline, greedy or sampled, optionally
// with the model's own chat template (tokenizer.chat_template, rendered by @huggingface/jinja).
// Several prompts (--prompt repeated, --prompt-file) generate concurrently, each a session of its
// own with its own sampler, so the pipeline keeps them all in flight and each continuation is
// the one its prompt gives alone; they are printed in prompt order. Every prompt's timings are
// llama.cpp's server's (generation/timings.js), so they read as the gateway's do.
import fs from 'node:fs';

import { APPROX_CLI_OPTIONS, approxFromFlags } from './approx.js';
import { defaultModel } from './default_model.js';
import { IMAGE_OPTIONS, imagePrompt, openImages } from './images.js';
import { openPipeline } from './open_pipeline.js';
import { MODEL, PIPELINE_OPTIONS, SAMPLING_OPTIONS, samplingOf } from './options/shared.js';
import { noteSynthetic } from './synthetic_note.js';
import { timingsReport } from './timings_report.js';
// The prompt when none is given: validate's, whose continuation a real Gemma model knows.
import { DEFAULT_PROMPT } from './validate.js';
import { stepWithMedia } from '../generation/media.js';
import { timings } from '../generation/timings.js';
import { chatTokens, stopIds } from '../tokens/chat.js';
import { encodePrompt, textPrompt } from '../tokens/prompt_input.js';
import { Sampler } from '../tokens/sampler.js';

export const GENERATE_OPTIONS = {
  model: MODEL,
  // No default here: the default prompt is only for a run given neither option.
  prompt: { kind: 'list', value: 'TEXT', help: 'a prompt, repeatable: several generate concurrently',
    shown: `${JSON.stringify(DEFAULT_PROMPT)} without --prompt-file` },
  'prompt-file': { kind: 'string', value: 'FILE', help: 'prompts, one a line (blank lines skipped)' },
  chat: { kind: 'boolean', help: 'render each prompt with the model\'s chat template' },
  'max-tokens': { kind: 'integer', min: 1, value: 'N', help: 'tokens to generate per prompt', default: 32 },
  ...SAMPLING_OPTIONS,
  ...PIPELINE_OPTIONS,
  ...APPROX_CLI_OPTIONS,
  ...IMAGE_OPTIONS,
};

// --prompt as often as given, then --prompt-file's lines (blank ones skipped), else the default.
function promptsOf(options) {
  const given = [...(options.prompt ?? [])];
  const file = options['prompt-file'];
  if (file !== undefined) {
    let text;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      throw new Error(`--prompt-file ${file}: ${error.code === 'ENOENT' ? 'no such file' : error.message}`);
    }
    const lines = text.split(/\r?\n/).filter((line) => line.trim() !== '');
    if (lines.length === 0) throw new Error(`--prompt-file ${file} holds no prompt (one per line)`);
    given.push(...lines);
  }
  return given.length > 0 ? given : [DEFAULT_PROMPT];
}

// A prompt's ids and, with --image, the images its placeholders stand for.
async function promptOf(pipeline, prompt, chat, images) {
  const { tokenizer } = pipeline;
  if (images) return imagePrompt(pipeline, images, prompt);
  if (!chat) return { ids: encodePrompt(tokenizer, textPrompt(prompt)), items: new Map() };
  try {
    return { ids: chatTokens(pipeline.header, tokenizer, [{ role: 'user', content: prompt }]), items: new Map() };
  } catch (error) {
    throw new Error(`--chat: ${error.message}`);
  }
}

// One prompt's continuation as session `session` (pipeline.close() drops it), with a sampler of
// its own (seeded as every other prompt's): write(delta) gets the new text after every token.
// -> {tokens, text, tokenMs: each step's wall time (the first: the prompt and its token),
// timings: llama.cpp's, the end-of-turn token counted among the predicted as it counts it}.
async function continuation(pipeline, session, { ids: prompt, items }, { sampling, maxTokens, write = () => {}, signal = null }) {
  const sampler = new Sampler(sampling);
  const stops = stopIds(pipeline.tokenizer);
  const tokens = [];
  const tokenMs = [];
  const startedAt = performance.now();
  const sampledAt = [];
  let text = '';
  let input = prompt;
  for (let i = 0; i < maxTokens; i++) {
    signal?.throwIfAborted();
    const t0 = performance.now();
    const { logits } = await stepWithMedia(pipeline, session, input, items);
    tokenMs.push(performance.now() - t0);
    const id = sampler.sample(logits);
    sampledAt.push(performance.now());
    if (stops.has(id)) break;
    tokens.push(id);
    // Decode the whole continuation each time: a multi-byte character may span tokens.
    const decoded = pipeline.tokenizer.decode(tokens);
    write(decoded.slice(text.length));
    text = decoded;
    input = [id];
  }
  const [first, last] = [sampledAt[0] ?? startedAt, sampledAt.at(-1) ?? startedAt];
  return {
    tokens, text, tokenMs,
    timings: timings({ cachedTokens: 0, promptTokens: prompt.length, promptMs: first - startedAt, predictedTokens: sampledAt.length, predictedMs: last - first }),
  };
}

// A finished prompt's block of the text report: its number and prompt, the continuation, its timings.
function promptReport(i, n, prompt, { text, timings: t }) {
  return `[${i + 1}/${n}] ${prompt}\n${text}\n${timingsReport(t)}`;
}

// A prompt's line of --json.
const promptJson = (prompt, { tokens, text, tokenMs, timings: t }, synthetic) => JSON.stringify({ prompt, tokens, text, tokenMs, timings: t, synthetic });

export async function generate(options, _positionals, { write = (s) => process.stdout.write(s) } = {}) {
  const prompts = promptsOf(options);
  const approx = approxFromFlags(options);
  const model = options.model ?? await defaultModel();
  const images = await openImages(options);
  // Local nodes take the images' spans.
  const pipeline = await openPipeline(model, images ? { ...options, 'max-span': Math.max(options['max-span'] ?? 0, images.media.maxTokens) } : options, approx)
    .catch((error) => {
      images?.close();
      throw error;
    });
  try {
    const synthetic = noteSynthetic(pipeline.header);
    const settings = {
      sampling: samplingOf(options),
      maxTokens: options['max-tokens'],
    };
    if (prompts.length === 1) {
      const result = await continuation(pipeline, 'generate', await promptOf(pipeline, prompts[0], options.chat, images), { ...settings, write });
      write('\n');
      if (options.json) console.log(promptJson(prompts[0], result, synthetic));
      else write(timingsReport(result.timings));
      return 0;
    }
    return await generateMany(pipeline, prompts, options, settings, write, synthetic, images);
  } finally {
    await pipeline.close();
    images?.close();
  }
}

// Every prompt's generation under way at once; each printed once it and those before it ended.
// The first that fails stops the others at their next step.
async function generateMany(pipeline, prompts, options, settings, write, synthetic, images) {
  const stop = new AbortController();
  const t0 = performance.now();
  const runs = prompts.map(async (prompt, i) => {
    try {
      return await continuation(pipeline, `generate-${i}`, await promptOf(pipeline, prompt, options.chat, images), { ...settings, signal: stop.signal });
    } catch (error) {
      // Not when it is the reason another prompt's failure stopped this one with.
      if (!stop.signal.aborted) {
        error.message = `prompt ${i + 1}: ${error.message}`;
        stop.abort(error);
      }
      throw error;
    }
  });
  const outcomes = Promise.allSettled(runs);
  let tokens = 0;
  try {
    for (const [i, run] of runs.entries()) {
      const result = await run;
      tokens += result.tokens.length;
      if (options.json) console.log(promptJson(prompts[i], result, synthetic));
      else write(promptReport(i, prompts.length, prompts[i], result));
    }
  } catch (error) {
    await outcomes;
    throw stop.signal.reason ?? error;
  }
  const seconds = (performance.now() - t0) / 1000;
  const total = { prompts: prompts.length, tokens, seconds, tokensPerSecond: tokens / seconds };
  if (options.json) console.log(JSON.stringify(total));
  else write(`${total.prompts} prompts, ${tokens} tokens in ${seconds.toFixed(2)} s: ${total.tokensPerSecond.toFixed(1)} tokens/s\n`);
  return 0;
}
