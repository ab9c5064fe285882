// The MTP drafter (gemma4-assistant) against llama.cpp's: for a synthetic target and its
// drafter, the same prompt and drafted tokens, every draft step's distribution and next hidden
// state from every build against llama.cpp's draft-mtp steps (support/llama_mtp_draft.mjs): the
// native one (lf_run --drafter) and the threaded module at 1 to 3 threads, the single-thread
// (wasm32-wasi) module at its one. The modules' steps start from llama.cpp's h, over their own
// prefill of the target's cache (support/module_drafter.mjs). A configuration runs where the engine mirrors the
// kernels llama.cpp loads on this host (support/oracle_judge.mjs; docs/forward-pass.md,
// "Agreement"), so the bound is the engine's: 1.5e-6 in ln p (measured at most 2.4e-7 on zen4);
// elsewhere it is skipped, saying why.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import path from "node:path";
import {before, describe, test} from "node:test";

import {logSoftmax} from "../../../js-glue/src/tokens/logits.js";
import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {llamaMtpDraft} from "../support/llama_mtp_draft.mjs";
import {modelWithDrafter, root} from "../support/models.mjs";
import {draftSteps, withModulePair} from "../support/module_drafter.mjs";
import {llamaKernels, mirrors} from "../support/oracle_judge.mjs";

const lfRun = path.join(root, "build", "native", "lf_run");
const LN_P_BOUND = 1.5e-6;
const H_BOUND = 1e-6;  // the largest difference in h_next over the largest |value|

const prompt = (n) => [2, ...Array.from({length: n - 1}, (_, i) => 10 + ((i * 37) % 500))];

// Prompts past the sliding windows (but E2B's 512 and 31B's 1024); drafters with sliding and
// global layers in several orders; the *-shape presets' drafters with Google's drafters' shapes
// (make-model's default for them), 26B-A4B's a dense FFN beside a MoE target. target:
// make-model's options after the preset; type: the ggml type of every matrix; maxHeadDim: the
// target's largest.
const Q4_0 = 2, Q8_0 = 8;
const CONFIGS = [
  {name: "tiny-ssg", preset: "tiny", target: ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0"],
   drafter: [], n: 9, type: Q4_0, maxHeadDim: 64},
  {name: "tiny-q8-sgs", preset: "tiny", target: ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q8_0"],
   drafter: ["--assistant-layers", "SGS", "--assistant-n-embd", "96", "--assistant-n-ff", "128"], n: 11, type: Q8_0,
   maxHeadDim: 64},
  {name: "small", preset: "small", target: ["--type", "Q4_0"],
   drafter: ["--assistant-layers", "SSSG", "--assistant-n-embd", "128", "--assistant-n-ff", "256"], n: 20, type: Q4_0,
   maxHeadDim: 128},
  // Shared-KV targets: the drafter reads the caches of the layers their last layers share.
  {name: "shared-kv2-gsg", preset: "tiny-shared-kv2", target: ["--type", "Q4_0"], drafter: ["--assistant-layers", "GSG"],
   n: 13, type: Q4_0, maxHeadDim: 64},
  {name: "e2b-shape", preset: "e2b-shape", target: ["--type", "Q4_0"], drafter: [], n: 9, type: Q4_0, maxHeadDim: 512},
  {name: "31b-shape", preset: "31b-shape", target: ["--type", "Q4_0"], drafter: [], n: 6, type: Q4_0, maxHeadDim: 512},
  {name: "26b-a4b-shape", preset: "26b-a4b-shape", target: ["--type", "Q4_0"], drafter: [], n: 6, type: Q4_0,
   maxHeadDim: 512},
];
const BUILDS = [
  {name: "threaded module", load: () => loadThreadedModule({threads: 3, withDrafter: true}), threads: [1, 2, 3]},
  {name: "single-thread module", load: () => loadSingleThreadModule(), threads: [1]},
];
const DRAFT_TOKENS = [5, 17, 300];

function maxAbsDiff(a, b) {
  let worst = 0;
  for (let i = 0; i < a.length; ++i) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

function relDiff(got, want) {
  return maxAbsDiff(got, want) / Math.max(...want.map(Math.abs));
}

describe("the MTP drafter agrees with llama.cpp's", () => {
  let kernels;
  before(async () => {
    kernels = await llamaKernels();
    console.log(kernels.line);
  });
  for (const c of CONFIGS) {
    test(c.name, {timeout: 1_200_000}, async (t) => {
      if (!mirrors(kernels, {types: new Set([c.type]), maxHeadDim: c.maxHeadDim, n: c.n})) {
        t.skip(`llama.cpp's ${kernels.variant} kernels do not compute what ours do for this configuration`);
        return;
      }
      const {target, drafter} = modelWithDrafter(`mtp-${c.name}`, c.preset, c.target, c.drafter);
      const tokens = prompt(c.n);
      const want = await llamaMtpDraft(target, drafter, tokens, DRAFT_TOKENS);
      assert.equal(want.steps.length, DRAFT_TOKENS.length);
      const agrees = (where, steps) => {
        assert.equal(steps.length, DRAFT_TOKENS.length, where);
        steps.forEach((step, k) => {
          const lnP = maxAbsDiff(logSoftmax(step.logits), logSoftmax(want.steps[k].logits));
          const h = relDiff(step.h_next, want.steps[k].h_next);
          assert.ok(lnP <= LN_P_BOUND, `${where}, step ${k}: ln p differs by ${lnP}`);
          assert.ok(h <= H_BOUND, `${where}, step ${k}: h_next differs by ${h}`);
        });
      };
      for (const threads of [1, 2, 3]) {
        const got = JSON.parse(execFileSync(lfRun, ["--model", target, "--tokens", tokens.join(","), "--drafter", drafter,
          "--draft-tokens", DRAFT_TOKENS.join(","), "--threads", String(threads)], {maxBuffer: 1 << 28}).toString());
        assert.ok(relDiff(got.h, want.h) <= H_BOUND, `${threads} threads: the target's state differs by ${relDiff(got.h, want.h)}`);
        agrees(`native, ${threads} threads`, got.draft);
      }
      for (const build of BUILDS) {
        const lf = await build.load();
        try {
          for (const threads of build.threads) {
            agrees(`${build.name}, ${threads} threads`,
              withModulePair(lf, {target, drafter}, tokens, threads, (pair) => draftSteps(pair, want.h, DRAFT_TOKENS)));
          }
        } finally {
          lf.close();
        }
      }
    });
  }
});
