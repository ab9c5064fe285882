// llama.cpp as a reference, through node-llama-cpp 3.21.1 (a devDependency: the tests use it as
// their oracle, `layerfold validate` reports its agreement with it when it is installed).
//
// Settings that change numbers are llama.cpp's own defaults, passed explicitly so they stay put:
//   - KV cache F16 for K and V (K/V are rounded to f16 when stored: docs/gemma-architecture.md,
//     "F16 KV cache"), unless the handle asks for q8_0 or q4_0 (docs/attention.md, "Quantized
//     cache");
//   - flash attention "auto" (resolves to on for the CPU backend: docs/gemma-architecture.md,
//     "Flash attention");
//   - SWA layers keep only their window (swaFullCache false), as llama.cpp does by default;
//   - CPU only, prebuilt binaries only: npm did not run the postinstall step, and nothing may be
//     downloaded or compiled at test time.
// Sampling is greedy (temperature 0) with no repeat penalty or other sampler in the chain, so
// the probabilities node-llama-cpp reports are softmax(logits) of the raw logits llama.cpp
// returns, i.e. after Gemma's final soft-cap (it is part of the model graph).
//
// Example:
//   const h = await loadLlama("build/models/tiny.gguf", {threads: 2, contextSize: 256});
//   const ids = await tokenize(h, "The capital of France is", {addBos: true});
//   const lp = await nextTokenLogProbs(h, ids);  // Float64Array [n_vocab]
//   const next = await greedy(h, ids, 4);         // 4 token ids
//   await close(h);

import {readFile} from "node:fs/promises";

let llamaPromise = null;

// One llama.cpp binding per process: loading the native addon again is slow and pointless.
async function sharedLlama() {
  if (llamaPromise === null) {
    llamaPromise = (async () => {
      const {getLlama, LlamaLogLevel} = await import("node-llama-cpp");
      return getLlama({
        gpu: false,
        build: "never",
        usePrebuiltBinaries: true,
        skipDownload: true,
        progressLogs: false,
        logLevel: LlamaLogLevel.error,
      });
    })();
  }
  return llamaPromise;
}

/**
 * The CPU backend variant ggml chose for this machine when llama.cpp loaded (its kernels, and so
 * its roundings, depend on it), by ggml's name for it: "sapphirerapids", "zen4", "skylakex",
 * "haswell", ...; read from the shared libraries the process has mapped, "unknown" where that
 * cannot be read (not Linux).
 * @example await cpuBackend() // "zen4"
 */
export async function cpuBackend() {
  await sharedLlama();
  let maps = "";
  try {
    maps = await readFile("/proc/self/maps", "utf8");
  } catch {
    return "unknown";
  }
  return /libggml-cpu-(\w+)\.so/.exec(maps)?.[1] ?? "unknown";
}

/**
 * Loads a GGUF model. Each evaluation later gets a fresh context of `contextSize` tokens, its KV
 * cache in cacheTypeK / cacheTypeV (our names: 'f16', 'q8_0', 'q4_0').
 * @param {string} modelPath
 * @param {{threads?: number, contextSize?: number, cacheTypeK?: string, cacheTypeV?: string}} [options]
 * @returns {Promise<{model: object, nVocab: number, threads: number, contextSize: number, cacheTypeK: string, cacheTypeV: string}>}
 * @example const h = await loadLlama("tiny.gguf", {threads: 2, contextSize: 256, cacheTypeK: "q8_0", cacheTypeV: "q8_0"});
 */
export async function loadLlama(modelPath, {threads = 2, contextSize = 512, cacheTypeK = "f16", cacheTypeV = "f16"} = {}) {
  const llama = await sharedLlama();
  const model = await llama.loadModel({modelPath, gpuLayers: 0});
  // The binding has no vocabulary-size getter; the GGUF's token list is authoritative anyway.
  const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
  return {model, nVocab, threads, contextSize, cacheTypeK, cacheTypeV};
}

/**
 * Text -> token ids as llama.cpp tokenizes it.
 * @param {{model: object}} handle
 * @param {string} text
 * @param {{addBos?: boolean, special?: boolean}} [options] addBos prepends the model's BOS id,
 *   as llama.cpp does; special parses control-token text such as "<|turn>" into its id
 * @returns {Promise<number[]>}
 * @example await tokenize(h, "The capital of France is", {addBos: true}) // [2, 818, ...]
 */
export async function tokenize(handle, text, {addBos = true, special = false} = {}) {
  const ids = Array.from(handle.model.tokenize(text, special));
  return addBos ? [handle.model.tokens.bos, ...ids] : ids;
}

/**
 * Token ids -> text (special tokens rendered as their text when `special` is true).
 * @example await detokenize(h, [818, 5279]) // "The capital"
 */
export async function detokenize(handle, tokenIds, {special = false} = {}) {
  return handle.model.detokenize(tokenIds, special);
}

async function withFreshSequence(handle, fn) {
  const context = await handle.model.createContext({
    contextSize: handle.contextSize,
    threads: handle.threads,
    flashAttention: "auto",
    // node-llama-cpp spells ggml's type names in capitals.
    experimentalKvCacheKeyType: handle.cacheTypeK.toUpperCase(),
    experimentalKvCacheValueType: handle.cacheTypeV.toUpperCase(),
    swaFullCache: false,
  });
  try {
    return await fn(context.getSequence());
  } finally {
    await context.dispose();
  }
}

/**
 * Log-probabilities of every vocabulary entry as the token after `tokenIds` (a fresh context
 * evaluates the whole prompt). Index = token id.
 * @returns {Promise<Float64Array>} [n_vocab]; -Infinity for a token whose probability underflowed
 * @example const lp = await nextTokenLogProbs(h, [2, 818]); lp[5279]
 */
export async function nextTokenLogProbs(handle, tokenIds) {
  if (tokenIds.length === 0) throw new Error("nextTokenLogProbs needs at least one token");
  return withFreshSequence(handle, async (sequence) => {
    const last = tokenIds.length - 1;
    const input = tokenIds.map((id, i) =>
      i === last ? [id, {generateNext: {probabilities: true, options: {temperature: 0}}}] : id);
    const results = await sequence.controlledEvaluate(input);
    const probabilities = results[last]?.next?.probabilities;
    if (probabilities == null) throw new Error("llama.cpp returned no probabilities for the last token");
    const logProbs = new Float64Array(handle.nVocab).fill(-Infinity);
    for (const [id, p] of probabilities) logProbs[id] = Math.log(p);
    return logProbs;
  });
}

/**
 * Greedy continuation: `nSteps` token ids, each the argmax after the prompt and the ids so far.
 * @example await greedy(h, [2, 818, 5279], 4) // e.g. [529, 7001, 563, 9079]
 */
export async function greedy(handle, tokenIds, nSteps) {
  return withFreshSequence(handle, async (sequence) => {
    const generated = [];
    if (nSteps <= 0) return generated;
    for await (const id of sequence.evaluate(tokenIds, {temperature: 0})) {
      generated.push(id);
      if (generated.length >= nSteps) break;
    }
    return generated;
  });
}

/** Frees the model. The handle is unusable afterwards. */
export async function close(handle) {
  await handle.model.dispose();
}
