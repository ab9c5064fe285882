// A target and its MTP drafter run through the C ABI (lf_model_*, lf_drafter_*) in a loaded
// module (threaded or single-thread): the target's prompt, then the drafter's steps. What the
// drafter tests run in the modules, against the native engine and against llama.cpp.
import fs from "node:fs";

import {cString, withCopies} from "../../../js-glue/src/wasm/wasm_copies.js";

// A file's header parsed in the module, and every tensor of it placed in module memory with
// place(namePtr, dataPtr); the allocations are freed by the returned close().
function placeFile(lf, file, place) {
  const bytes = fs.readFileSync(file);
  const gguf = withCopies(lf, [bytes], ([ptr]) => lf.fn.lf_gguf_parse(ptr, bytes.length, bytes.length));
  if (!gguf) throw lf.lastError();
  const buffers = [];
  for (const t of lf.json(lf.fn.lf_gguf_json(gguf, 0)).tensors) {
    const ptr = lf.alloc(t.n_bytes);
    buffers.push(ptr);
    lf.bytes().set(bytes.subarray(t.offset, t.offset + t.n_bytes), ptr);
    const name = cString(lf, t.name);
    place(name, ptr);
    lf.free(name);
  }
  return {gguf, close: () => { lf.fn.lf_gguf_free(gguf); for (const ptr of buffers) lf.free(ptr); }};
}

const floats = (lf, ptr, n) => Array.from(new Float32Array(lf.bytes().buffer.slice(ptr, ptr + 4 * n)));

/**
 * The target of targetFile as one node (every layer, embedding and head) and the drafter of
 * drafterFile beside it, each on `threads` workers; run(fn) prefills `prompt` and calls
 * fn({lf, target, drafter, session, nEmbd, nVocab}), then frees everything.
 * @example const steps = withModulePair(lf, files, [2, 10, 47], 2, (pair) => draftSteps(pair, h, [5, 17]));
 */
export function withModulePair(lf, {target: targetFile, drafter: drafterFile}, prompt, threads, fn) {
  const target = lf.fn.lf_model_create();
  const targetFiles = placeFile(lf, targetFile, (name, ptr) => lf.fn.lf_model_place_tensor(target, name, ptr));
  const drafter = lf.fn.lf_drafter_create();
  const drafterFiles = placeFile(lf, drafterFile, (name, ptr) => lf.fn.lf_drafter_place_tensor(drafter, name, ptr));
  let session = 0;
  try {
    const info = lf.json(lf.fn.lf_model_info_json(targetFiles.gguf));
    if (!lf.fn.lf_model_set_threads(target, threads) || !lf.fn.lf_drafter_set_threads(drafter, threads)) throw lf.lastError();
    if (!lf.fn.lf_model_load(target, targetFiles.gguf, 0, info.n_layer, 1, 1)) throw lf.lastError();
    const nEmbd = lf.fn.lf_model_n_embd(target), nVocab = lf.fn.lf_model_n_vocab(target);
    session = lf.fn.lf_session_create(target, 256);
    if (!session) throw lf.lastError();
    const pair = {lf, target, drafter, session, nEmbd, nVocab, info};
    forwardTokens(pair, prompt, true);
    if (!lf.fn.lf_drafter_load(drafter, drafterFiles.gguf, target)) throw lf.lastError();
    return fn(pair);
  } finally {
    if (session) lf.fn.lf_session_free(session);
    lf.fn.lf_drafter_free(drafter);
    lf.fn.lf_model_free(target);
    drafterFiles.close();
    targetFiles.close();
  }
}

/**
 * tokens through the pair's target at its session's n_past (with the per-layer inputs of an
 * E-model): the last row's hidden state (lastOnly) or every row's, as a pointer the caller frees.
 * @example const last = forwardTokens(pair, [5], true); pair.lf.free(last);
 */
export function forwardTokens({lf, target, session, nEmbd, info}, tokens, lastOnly) {
  const n = tokens.length;
  const x = lf.alloc(4 * nEmbd * n), out = lf.alloc(4 * nEmbd * (lastOnly ? 1 : n));
  try {
    withCopies(lf, [Int32Array.from(tokens)], ([ids]) => {
      if (!lf.fn.lf_embed(target, ids, n, x)) throw lf.lastError();
      if (info.n_embd_per_layer > 0) {
        const nFloats = info.n_layer * n * info.n_embd_per_layer, perLayer = lf.alloc(4 * nFloats);
        const set = lf.fn.lf_per_layer_inputs(target, ids, n, x, perLayer) &&
          lf.fn.lf_session_set_per_layer_inputs(session, perLayer, nFloats);
        lf.free(perLayer);
        if (!set) throw lf.lastError();
      }
    });
    if (!lf.fn.lf_forward(target, session, lf.fn.lf_session_n_past(session), x, n, out, lastOnly ? 1 : 0)) throw lf.lastError();
  } catch (e) {
    lf.free(out);
    throw e;
  } finally {
    lf.free(x);
  }
  return out;
}

/**
 * The drafter's steps from h (the target's output-normed state, an array): the first token the
 * one after the prompt, the others drafted tokens fed back, each from the previous step's
 * h_next: [{logits, h_next}], or the error of the first refused step.
 * @example const [{logits, h_next}] = draftSteps(pair, want.h, [5]);
 */
export function draftSteps({lf, drafter, session, nEmbd, nVocab}, h, tokens) {
  const hPtr = lf.alloc(4 * nEmbd), logits = lf.alloc(4 * nVocab), hNext = lf.alloc(4 * nEmbd);
  try {
    lf.bytes().set(new Uint8Array(Float32Array.from(h).buffer), hPtr);
    const steps = [];
    for (const token of tokens) {
      if (!lf.fn.lf_drafter_step(drafter, session, token, hPtr, logits, hNext)) throw lf.lastError();
      steps.push({logits: floats(lf, logits, nVocab), h_next: floats(lf, hNext, nEmbd)});
      lf.bytes().copyWithin(hPtr, hNext, hNext + 4 * nEmbd);
    }
    return steps;
  } finally {
    for (const ptr of [hPtr, logits, hNext]) lf.free(ptr);
  }
}
