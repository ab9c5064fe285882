// layerfold validate: tokenize a prompt, run it through the pipeline, print the next-token
// top-k with per-node and per-layer timings; compare with llama.cpp when it is installed. With
// --image or --audio the prompt is one user message of the model's chat template, the media
// before its text, as generate --chat places them (and llama.cpp's mtmd tools prompt).
import { APPROX_CLI_OPTIONS, approxFromFlags, approxSummaries, describeApprox } from './approx.js';
import { defaultModel } from './default_model.js';
import { IMAGE_OPTIONS, imagePrompt, openImages } from './images.js';
import { MODEL, PIPELINE_OPTIONS } from './options/shared.js';
import { stepWithMedia } from '../generation/media.js';
import { isSynthetic } from '../gguf/header.js';
import { logSoftmax, topK } from '../tokens/logits.js';
import { encodePrompt, textPrompt } from '../tokens/prompt_input.js';
import { openPipeline } from './open_pipeline.js';
import { redactUrl } from '../log/redact.js';

/** The prompt whose next token a real Gemma model knows: " Paris". */
export const DEFAULT_PROMPT = 'The capital of France is';

export const VALIDATE_OPTIONS = {
  model: MODEL,
  prompt: { kind: 'string', value: 'TEXT', help: 'the prompt', default: DEFAULT_PROMPT },
  expect: { kind: 'string', value: 'TEXT', help: 'the next token a real model should rank first', default: ' Paris' },
  'top-k': { kind: 'integer', min: 1, value: 'N', help: 'the most likely next tokens to list (all, if N exceeds the vocabulary)', default: 5 },
  ...PIPELINE_OPTIONS,
  ...APPROX_CLI_OPTIONS,
  ...IMAGE_OPTIONS,
  image: { ...IMAGE_OPTIONS.image, help: 'a JPEG, PNG or WebP before the prompt in a chat message, repeatable (with --mmproj)' },
  audio: { ...IMAGE_OPTIONS.audio, help: 'a WAV, MP3 or FLAC before the prompt in a chat message, repeatable (with an E2B or E4B --mmproj)' },
};

// Why llama.cpp was not asked, or null when it may be.
function noReference(model, images) {
  if (images) return 'node-llama-cpp runs no mtmd, so it cannot read the prompt\'s images or audio';
  // llama.cpp reads local files only.
  if (typeof model !== 'string' || /^[a-z0-9]+:\/\//.test(model)) return 'the model is not a local file';
  return null;
}

// llama.cpp's view of the same file, or null when node-llama-cpp is not installed.
async function llamaAgreement(model, tokens, ours, k) {
  let llama;
  try {
    llama = await import('./llama_reference.js');
    const handle = await llama.loadLlama(model, { threads: 2, contextSize: Math.max(256, tokens.length + 1) });
    try {
      const theirs = await llama.nextTokenLogProbs(handle, tokens);
      const theirTop = topK(theirs, k);
      const ourTop = new Set(topK(ours, k));
      let maxDiff = 0;
      for (const id of topK(theirs, 50)) maxDiff = Math.max(maxDiff, Math.abs(theirs[id] - ours[id]));
      return { top: theirTop, sameTop1: theirTop[0] === topK(ours, 1)[0], overlap: theirTop.filter((id) => ourTop.has(id)).length, maxLogProbDiff: maxDiff };
    } finally {
      await llama.close(handle);
    }
  } catch (error) {
    if (error.code === 'ERR_MODULE_NOT_FOUND') return null;
    throw error;
  }
}

// The prompt as ids and media items (items empty without media), and what reading and encoding
// the media took: {ids, items, media: [{kind, tokens}], mediaMs}.
async function promptOf(pipeline, text, images) {
  if (!images) return { ids: encodePrompt(pipeline.tokenizer, textPrompt(text)), items: new Map(), media: [], mediaMs: 0 };
  const t0 = performance.now();
  const { ids, items } = await imagePrompt(pipeline, images, text);
  return { ids, items, media: [...items.values()].map((item) => ({ kind: item.kind, tokens: item.tokens })), mediaMs: performance.now() - t0 };
}

// A synthetic model's answer is only worth something against a reference. Without llama.cpp's
// (media), the one left is the prompt without its media: the items must move the distribution.
async function mediaMovesAnswer(pipeline, images, text, logits) {
  const bare = await imagePrompt(pipeline, { ...images, parts: [] }, text);
  const { logits: without } = await pipeline.step('validate-without-media', bare.ids);
  return without.some((x, i) => !Object.is(x, logits[i]));
}

/**
 * Runs the command: -> 0 when the answer is right, 1 when not (options.expect ranked first on a
 * real model; on a synthetic one llama.cpp's top-1 agreeing, or with media, the media moving the
 * next-token distribution).
 * @example process.exit(await validate({ prompt: 'The capital of France is', 'top-k': 5, expect: ' Paris' }));
 */
export async function validate(options) {
  const approx = approxFromFlags(options);
  const model = options.model ?? await defaultModel();
  const k = options['top-k'];
  // Media go in a chat message, as generate --chat places them.
  const images = await openImages({ ...options, chat: true });
  let pipeline;
  try {
    // Local nodes take the images' spans.
    pipeline = await openPipeline(model, images ? { ...options, 'max-span': Math.max(options['max-span'] ?? 0, images.media.maxTokens) } : options, approx);
  } catch (error) {
    images?.close();
    throw error;
  }
  const synthetic = isSynthetic(pipeline.header);
  try {
    const prompt = await promptOf(pipeline, options.prompt, images);
    const t0 = performance.now();
    const { logits, timings, embedMs, headMs } = await stepWithMedia(pipeline, 'validate', prompt.ids, prompt.items);
    const totalMs = performance.now() - t0;
    const logProbs = logSoftmax(logits);
    const piece = (id) => pipeline.tokenizer.decode([id]);
    const top = topK(logProbs, k).map((id) => ({ id, piece: piece(id), probability: Math.exp(logProbs[id]) }));
    const why = noReference(model, images);
    const reference = why ? null : await llamaAgreement(model, prompt.ids, logProbs, k);
    const memory = { rssBytes: process.memoryUsage().rss, wasmBytes: pipeline.nodes.reduce((s, n) => s + n.info().wasmMemoryBytes, 0) };
    const result = {
      model: redactUrl(model), synthetic, prompt: options.prompt, tokens: prompt.ids, media: prompt.media, top,
      timings: { mediaMs: prompt.mediaMs, embedMs, headMs, totalMs, nodes: timings }, memory,
      llamaCpp: reference, llamaCppSkipped: reference ? null : why ?? 'node-llama-cpp is not installed',
      approx: approxSummaries(timings, pipeline.approx, pipeline.nodes.at(-1).layers[1]),
      build: pipeline.nodes[0].info().build, threads: pipeline.nodes[0].info().threads,
    };
    if (synthetic && images) result.mediaMovesAnswer = await mediaMovesAnswer(pipeline, images, options.prompt, logits);
    if (options.json) console.log(JSON.stringify(result));
    else report(result, options, piece);
    if (synthetic) return (images ? result.mediaMovesAnswer : reference === null || reference.sameTop1) ? 0 : 1;
    return top[0].piece === options.expect ? 0 : 1;
  } finally {
    await pipeline.close();
    images?.close();
  }
}

function report(r, options, piece) {
  const ms = (x) => `${x.toFixed(1)} ms`;
  console.log(`model   ${r.model}${r.synthetic ? '  (SYNTHETIC weights: random, so the answer is not " Paris")' : ''}`);
  if (r.media.length === 0) console.log(`prompt  ${JSON.stringify(r.prompt)} -> ${r.tokens.length} tokens [${r.tokens.join(', ')}]`);
  else console.log(`prompt  ${r.media.map((m) => `${m.kind} (${m.tokens} soft tokens)`).join(', ')} then ${JSON.stringify(r.prompt)} in a chat message -> ${r.tokens.length} tokens`);
  console.log(`build   ${r.build}, ${r.threads} thread(s)`);
  console.log('\nnext token');
  for (const [i, t] of r.top.entries()) {
    console.log(`  ${String(i + 1).padStart(2)}. ${JSON.stringify(t.piece).padEnd(20)} id ${String(t.id).padStart(6)}  p = ${t.probability.toPrecision(3)}`);
  }
  console.log('\ntimings');
  if (r.media.length > 0) console.log(`  media ${ms(r.timings.mediaMs)} (read, decoded and encoded)`);
  console.log(`  embed ${ms(r.timings.embedMs)}`);
  for (const n of r.timings.nodes) {
    console.log(`  node layers ${n.layers[0]}-${n.layers[1] - 1}${n.url ? ` at ${n.url}` : ''}: ${ms(n.ms)}`);
    n.layerMs.forEach((t, i) => console.log(`    layer ${String(n.layers[0] + i).padStart(2)}  ${ms(t)}`));
  }
  console.log(`  head ${ms(r.timings.headMs)}\n  total ${ms(r.timings.totalMs)}`);
  for (const a of r.approx) console.log(`approximate: ${describeApprox(a)}`);
  console.log(`memory  RSS ${(r.memory.rssBytes / 2 ** 20).toFixed(0)} MiB, WASM ${(r.memory.wasmBytes / 2 ** 20).toFixed(0)} MiB`);
  if (r.llamaCpp) {
    const l = r.llamaCpp;
    console.log(`\nllama.cpp on the same file: top-1 ${l.sameTop1 ? 'agrees' : 'DIFFERS'} (${JSON.stringify(piece(l.top[0]))}), ` +
      `${l.overlap}/${l.top.length} of its top-${l.top.length} in ours, max |Δ ln p| over its top 50 = ${l.maxLogProbDiff.toExponential(2)}`);
  } else {
    console.log(`\nno llama.cpp comparison: ${r.llamaCppSkipped}`);
  }
  if (r.mediaMovesAnswer !== undefined) {
    console.log(`without the media the next-token distribution is ${r.mediaMovesAnswer ? 'another' : 'THE SAME (the media did not reach the answer)'}`);
  }
  if (!r.synthetic) console.log(`\nexpected ${JSON.stringify(options.expect)}: ${r.top[0].piece === options.expect ? 'yes' : 'NO'}`);
}
