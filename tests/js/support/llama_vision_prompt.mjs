// llama.cpp with an image in the prompt (llama_programs/llama_vision_prompt.cpp: libmtmd from the
// oracle's source against its libllama and libggml): mtmd's chunks of the prompt, the
// next-token logits after it and greedy tokens.
import path from "node:path";

import {llamaBins, llamaMtmdProgram} from "./llama_source.mjs";
import {runChecked} from "./run_async.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_vision_prompt.cpp");

/**
 * The prompt (its media marker <__media__> standing for the raw RGB image) through llama.cpp, its
 * KV cache in cacheTypeK / cacheTypeV:
 * {chunks: [{type: "text", tokens} | {type: "image", n_tokens, non_causal}], logits, greedy}.
 * @example const ref = await llamaVisionPrompt(model, mmproj, image, 37, 23, "Look: <__media__> What?");
 */
export async function llamaVisionPrompt(modelFile, mmproj, image, width, height, prompt,
  {threads = 2, maxTokens = -1, greedy = 16, cacheTypeK = "f16", cacheTypeV = "f16"} = {}) {
  const args = [modelFile, mmproj, image, String(width), String(height), prompt, llamaBins, String(threads), String(maxTokens), String(greedy), cacheTypeK, cacheTypeV];
  return JSON.parse(await runChecked(await llamaMtmdProgram(source, {withLlama: true}), args));
}
