// layerfold validate: tokenize a prompt, run it through the pipeline, print the next-token
// top-k with per-node and per-layer timings; compare with llama.cpp when it is installed.
import { APPROX_CLI_OPTIONS, approxFromFlags, approxSummaries, describeApprox } from './approx.js';
import { defaultModel } from './default_model.js';
import { MODEL, PIPELINE_OPTIONS } from './options/shared.js';
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
};

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

export async function validate(options) {
  const approx = approxFromFlags(options);
  const model = options.model ?? await defaultModel();
  const k = options['top-k'];
  const pipeline = await openPipeline(model, options, approx);
  const synthetic = isSynthetic(pipeline.header);
  try {
    const tokens = encodePrompt(pipeline.tokenizer, textPrompt(options.prompt));
    const t0 = performance.now();
    const { logits, timings, embedMs, headMs } = await pipeline.step('validate', tokens);
    const totalMs = performance.now() - t0;
    const logProbs = logSoftmax(logits);
    const piece = (id) => pipeline.tokenizer.decode([id]);
    const top = topK(logProbs, k).map((id) => ({ id, piece: piece(id), probability: Math.exp(logProbs[id]) }));
    // llama.cpp reads local files only.
    const local = typeof model === 'string' && !/^[a-z0-9]+:\/\//.test(model);
    const reference = local ? await llamaAgreement(model, tokens, logProbs, k) : null;
    const memory = { rssBytes: process.memoryUsage().rss, wasmBytes: pipeline.nodes.reduce((s, n) => s + n.info().wasmMemoryBytes, 0) };
    const result = {
      model: redactUrl(model), synthetic, prompt: options.prompt, tokens, top,
      timings: { embedMs, headMs, totalMs, nodes: timings }, memory, llamaCpp: reference,
      approx: approxSummaries(timings, pipeline.approx, pipeline.nodes.at(-1).layers[1]),
      build: pipeline.nodes[0].info().build, threads: pipeline.nodes[0].info().threads,
    };
    if (options.json) console.log(JSON.stringify(result));
    else report(result, options, piece);
    if (synthetic) return reference === null || reference.sameTop1 ? 0 : 1;
    return top[0].piece === options.expect ? 0 : 1;
  } finally {
    await pipeline.close();
  }
}

function report(r, options, piece) {
  const ms = (x) => `${x.toFixed(1)} ms`;
  console.log(`model   ${r.model}${r.synthetic ? '  (SYNTHETIC weights: random, so the answer is not " Paris")' : ''}`);
  console.log(`prompt  ${JSON.stringify(r.prompt)} -> ${r.tokens.length} tokens [${r.tokens.join(', ')}]`);
  console.log(`build   ${r.build}, ${r.threads} thread(s)`);
  console.log('\nnext token');
  for (const [i, t] of r.top.entries()) {
    console.log(`  ${String(i + 1).padStart(2)}. ${JSON.stringify(t.piece).padEnd(20)} id ${String(t.id).padStart(6)}  p = ${t.probability.toPrecision(3)}`);
  }
  console.log('\ntimings');
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
    console.log('\nno llama.cpp comparison (node-llama-cpp not installed, or the model is not a local file)');
  }
  if (!r.synthetic) console.log(`\nexpected ${JSON.stringify(options.expect)}: ${r.top[0].piece === options.expect ? 'yes' : 'NO'}`);
}
