// The MTP drafter through the C ABI (lf_drafter_*) in the threaded and the single-thread
// modules: the same draft steps, byte for byte, as the native engine's (lf_run --drafter) on a
// synthetic target and its drafter, and its refusals as the module's errors.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

import {cString, withCopies} from "../../../js-glue/src/node/wasm_copies.js";
import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {modelWithDrafter, root} from "../support/models.mjs";

const files = () => modelWithDrafter("mtp-capi", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0"],
  ["--assistant-layers", "SGS"]);
const targetFile = () => files().target;
const drafterFile = () => files().drafter;
const PROMPT = [2, 10, 47, 84, 121, 158, 195, 232, 269];
const DRAFT_TOKENS = [5, 17, 300];

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

// The target's prompt through the module, then the drafter's steps from the native run's h:
// [{logits, h_next}], or the error of the first refused call.
function draftInModule(lf, h, tokens = DRAFT_TOKENS) {
  const target = lf.fn.lf_model_create();
  const targetFiles = placeFile(lf, targetFile(), (name, ptr) => lf.fn.lf_model_place_tensor(target, name, ptr));
  const drafter = lf.fn.lf_drafter_create();
  const drafterFiles = placeFile(lf, drafterFile(), (name, ptr) => lf.fn.lf_drafter_place_tensor(drafter, name, ptr));
  try {
    if (!lf.fn.lf_model_load(target, targetFiles.gguf, 0, 3, 1, 1)) throw lf.lastError();
    const nEmbd = lf.fn.lf_model_n_embd(target), nVocab = lf.fn.lf_model_n_vocab(target);
    const session = lf.fn.lf_session_create(target, 64);
    const x = lf.alloc(4 * nEmbd * PROMPT.length), last = lf.alloc(4 * nEmbd);
    withCopies(lf, [Int32Array.from(PROMPT)], ([ids]) => {
      if (!lf.fn.lf_embed(target, ids, PROMPT.length, x)) throw lf.lastError();
    });
    if (!lf.fn.lf_forward(target, session, 0, x, PROMPT.length, last, 1)) throw lf.lastError();
    if (!lf.fn.lf_drafter_load(drafter, drafterFiles.gguf, target)) throw lf.lastError();
    const hPtr = lf.alloc(4 * nEmbd), logits = lf.alloc(4 * nVocab), hNext = lf.alloc(4 * nEmbd);
    lf.bytes().set(new Uint8Array(Float32Array.from(h).buffer), hPtr);
    const steps = [];
    for (const token of tokens) {
      if (!lf.fn.lf_drafter_step(drafter, session, token, hPtr, logits, hNext)) throw lf.lastError();
      steps.push({logits: floats(lf, logits, nVocab), h_next: floats(lf, hNext, nEmbd)});
      lf.bytes().copyWithin(hPtr, hNext, hNext + 4 * nEmbd);
    }
    for (const ptr of [x, last, hPtr, logits, hNext]) lf.free(ptr);
    lf.fn.lf_session_free(session);
    return steps;
  } finally {
    lf.fn.lf_drafter_free(drafter);
    lf.fn.lf_model_free(target);
    drafterFiles.close();
    targetFiles.close();
  }
}

describe("the drafter through the C ABI", () => {
  const native = () => JSON.parse(execFileSync(path.join(root, "build", "native", "lf_run"), ["--model", targetFile(),
    "--tokens", PROMPT.join(","), "--drafter", drafterFile(), "--draft-tokens", DRAFT_TOKENS.join(",")]).toString());

  for (const [name, load] of [["threaded", () => loadThreadedModule({threads: 2})], ["single-thread", () => loadSingleThreadModule()]]) {
    test(`${name} module: the native engine's bytes`, {timeout: 120_000}, async () => {
      const want = native();
      const lf = await load();
      let got;
      try {
        got = draftInModule(lf, want.h);
      } finally {
        lf.close();
      }
      assert.equal(got.length, DRAFT_TOKENS.length);
      got.forEach((step, k) => {
        assert.deepEqual(step.logits, want.draft[k].logits, `step ${k}: logits`);
        assert.deepEqual(step.h_next, want.draft[k].h_next, `step ${k}: h_next`);
      });
    });
  }

  test("a bad token is the module's error, naming it", async () => {
    const lf = await loadSingleThreadModule();
    assert.throws(() => draftInModule(lf, native().h, [5000]), {code: "invalid_argument", message: /draft token id 5000 is outside/});
  });
});
