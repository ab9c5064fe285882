// The MTP drafter through the C ABI (lf_drafter_*) in the threaded and the single-thread
// modules: the same draft steps, byte for byte, as the native engine's (lf_run --drafter) on a
// synthetic target and its drafter, and its refusals as the module's errors.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {modelWithDrafter, root} from "../support/models.mjs";
import {draftSteps, withModulePair} from "../support/module_drafter.mjs";

const files = () => modelWithDrafter("mtp-capi", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0"],
  ["--assistant-layers", "SGS"]);
const targetFile = () => files().target;
const drafterFile = () => files().drafter;
const PROMPT = [2, 10, 47, 84, 121, 158, 195, 232, 269];
const DRAFT_TOKENS = [5, 17, 300];

// The target's prompt through the module, then the drafter's steps from the native run's h.
function draftInModule(lf, threads, h, tokens = DRAFT_TOKENS) {
  return withModulePair(lf, files(), PROMPT, threads, (pair) => draftSteps(pair, h, tokens));
}

describe("the drafter through the C ABI", () => {
  const native = () => JSON.parse(execFileSync(path.join(root, "build", "native", "lf_run"), ["--model", targetFile(),
    "--tokens", PROMPT.join(","), "--drafter", drafterFile(), "--draft-tokens", DRAFT_TOKENS.join(",")]).toString());

  for (const [name, threads, load] of [["threaded", 2, () => loadThreadedModule({threads: 2, withDrafter: true})],
    ["single-thread", 1, () => loadSingleThreadModule()]]) {
    test(`${name} module: the native engine's bytes`, {timeout: 120_000}, async () => {
      const want = native();
      const lf = await load();
      let got;
      try {
        got = draftInModule(lf, threads, want.h);
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
    assert.throws(() => draftInModule(lf, 1, native().h, [5000]), {code: "invalid_argument", message: /draft token id 5000 is outside/});
  });
});
