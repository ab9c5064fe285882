// llama.cpp with an image in the prompt (llama_programs/llama_vision_prompt.cpp: libmtmd from the
// oracle's source against its libllama and libggml): mtmd's chunks of the prompt, the
// next-token logits after it and greedy tokens.
import path from "node:path";

import {F64Reference} from "./f64_reference.mjs";
import {GEMMA4_TEMPLATE, GEMMA4_VOCAB, gemma4} from "./gateway_fixture.mjs";
import {llamaChat} from "./llama_chat.mjs";
import {llamaBins, llamaMtmdProgram} from "./llama_source.mjs";
import {llamaKernels, mirrors, modelTraits} from "./oracle_judge.mjs";
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

/**
 * llama.cpp's answer to one user message of a model with Gemma 4's vocabulary and template (`file`,
 * the gateway fixture gemma4() unless given): `content` its parts, an image as {type:
 * "media_marker", text: "<__media__>"}, rendered by llama.cpp's own chat layer (llama_chat.mjs)
 * and evaluated with the raw RGB `image` there (width and height 0: a clip of 16 kHz f32 samples),
 * its KV cache in `cache` (q8_0 unless given; llamaVisionPrompt's answer); null where llama.cpp's
 * kernels on this host are not the engine's for that model and cache (oracle_judge.mjs), which a
 * test skips.
 * @example const ref = await mirroredImageChat(projector, image, 37, 23, [{type: "media_marker", text: "<__media__>"}], {greedy: 6});
 */
export async function mirroredImageChat(mmproj, image, width, height, content, {maxTokens = 128, greedy = 8, file = gemma4(), cache = "q8_0"} = {}) {
  const reference = F64Reference.open(file);
  const mirrored = mirrors(await llamaKernels(), {...modelTraits(reference, 2), cacheTypeK: cache, cacheTypeV: cache});
  reference.close();
  if (!mirrored) return null;
  const [rendered] = await llamaChat(GEMMA4_VOCAB(), GEMMA4_TEMPLATE(), [{messages: [{role: "user", content}]}]);
  return llamaVisionPrompt(file, mmproj, image, width, height, rendered.prompt, {maxTokens, greedy, cacheTypeK: cache, cacheTypeV: cache});
}
