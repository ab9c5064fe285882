// make-model's MTP drafters (gemma4-assistant): the *-shape presets' drafters with the shapes of
// Google's drafters for those targets, and --assistant-for TARGET.gguf, whose drafter's shapes and
// vocabulary come from the target's header. Each drafter loads beside its target in llama.cpp
// and in the engine; beside a target of another width or vocabulary the engine refuses it by
// name. Run: node --test tests/js/make_model/assistant.test.mjs
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, describe, test} from "node:test";

import {withCopies} from "../../../js-glue/src/wasm/wasm_copies.js";
import {loadSingleThreadModule} from "../../../js-glue/src/wasm/load_node.js";
import {llamaMtpDraft} from "../support/llama_mtp_draft.mjs";
import {model, modelWithDrafter, root} from "../support/models.mjs";

const makeModel = path.join(root, "scripts", "make-model");
const lfRun = path.join(root, "build", "native", "lf_run");
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-assistant-"));
after(() => fs.rmSync(tmpDir, {recursive: true, force: true}));

// Google's drafters as their config.json files give them (google/gemma-4-*-it-assistant's
// text_config and backbone_hidden_size): four layers, three sliding then one global, each
// reading the target's last sliding or global layer's cache with that layer's head dim and KV
// heads, which the target presets have.
const GOOGLE = {
  "31b-shape": {n_embd: 1024, n_ff: 8192, n_head: 32, n_head_kv: [16, 16, 16, 4], backbone: 5376},
  "26b-a4b-shape": {n_embd: 1024, n_ff: 8192, n_head: 16, n_head_kv: [8, 8, 8, 2], backbone: 2816},
  "e2b-shape": {n_embd: 256, n_ff: 2048, n_head: 4, n_head_kv: [1, 1, 1, 1], backbone: 1536},
};
const SWA = [true, true, true, false];
const PROMPT = [2, 10, 47, 84, 121, 158];

function run(args) {
  return spawnSync(makeModel, args, {encoding: "utf8", maxBuffer: 64 << 20});
}

// The file's keys and tensor table as the engine's GGUF reader gives them.
async function header(file) {
  const lf = await loadSingleThreadModule();
  try {
    const bytes = fs.readFileSync(file);
    const gguf = withCopies(lf, [bytes], ([ptr]) => lf.fn.lf_gguf_parse(ptr, bytes.length, bytes.length));
    if (!gguf) throw lf.lastError();
    const json = lf.json(lf.fn.lf_gguf_json(gguf, 0));
    lf.fn.lf_gguf_free(gguf);
    return json;
  } finally {
    lf.close();
  }
}

// The drafter's steps in the engine (lf_run) and in llama.cpp after PROMPT: both load the pair.
async function loadsInBoth(target, drafter) {
  const ours = spawnSync(lfRun, ["--model", target, "--tokens", PROMPT.join(","), "--drafter", drafter, "--draft-tokens", "5,17"],
    {encoding: "utf8", maxBuffer: 1 << 28});
  assert.equal(ours.status, 0, ours.stderr);
  const theirs = await llamaMtpDraft(target, drafter, PROMPT, [5, 17]);
  for (const steps of [JSON.parse(ours.stdout).draft, theirs.steps]) {
    assert.equal(steps.length, 2);
    for (const s of steps) assert.ok(s.logits.every(Number.isFinite) && s.h_next.every(Number.isFinite));
  }
}

describe("the *-shape presets' drafters", () => {
  for (const [preset, want] of Object.entries(GOOGLE)) {
    test(`${preset}: Google's drafter's shape, loaded beside its target by llama.cpp and the engine`, {timeout: 600_000}, async () => {
      const {target, drafter} = modelWithDrafter(`assistant-${preset}`, preset, ["--type", "Q4_0"]);
      const m = (await header(drafter)).metadata;
      const a = "gemma4-assistant.";
      assert.equal(m["general.architecture"], "gemma4-assistant");
      assert.equal(m[`${a}embedding_length`], want.n_embd);
      assert.equal(m[`${a}embedding_length_out`], want.backbone);
      assert.equal(m[`${a}feed_forward_length`], want.n_ff);
      assert.equal(m[`${a}attention.head_count`], want.n_head);
      assert.deepEqual(m[`${a}attention.head_count_kv`], want.n_head_kv);
      assert.deepEqual(m[`${a}attention.sliding_window_pattern`], SWA);
      assert.equal(m[`${a}block_count`], 4);
      assert.equal(m[`${a}nextn_predict_layers`], 4);
      await loadsInBoth(target, drafter);
    });
  }
});

describe("--assistant-for TARGET.gguf", () => {
  test("the drafter of a target file: its shapes and vocabulary from the header, the same bytes as the preset's", {timeout: 600_000},
    async () => {
      const {target, drafter} = modelWithDrafter("assistant-26b-a4b-shape", "26b-a4b-shape", ["--type", "Q4_0"]);
      const out = path.join(tmpDir, "26b-drafter.gguf");
      const r = run(["--assistant-for", target, "--type", "Q4_0", "--out", out]);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stderr, /4 layers SSSG, width 1024, FFN 8192, 16 heads, for a 2-layer target of width 2816/);
      // The preset's drafter is written from the command line's configuration, this one from the
      // file's header: the engine reads the header back as the configuration it was written from.
      assert.ok(fs.readFileSync(out).equals(fs.readFileSync(drafter)), "the two drafters' bytes differ");
    });

  test("a target of no preset's shape: the small drafter shaped by its last layers, in both engines", {timeout: 300_000}, async () => {
    const target = model("assistant-for-odd", "small", ["--n-embd", "320", "--n-head", "5", "--n-head-kv-swa", "5",
      "--n-head-kv-global", "1", "--n-vocab", "1536", "--type", "Q8_0"]);
    const drafter = path.join(tmpDir, "odd-drafter.gguf");
    const r = run(["--assistant-for", target, "--assistant-layers", "GSSG", "--assistant-n-embd", "64", "--out", drafter]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /4 layers GSSG, width 64, FFN 64, 5 heads, for a 6-layer target of width 320/);
    await loadsInBoth(target, drafter);
  });

  test("beside a target of another width or vocabulary the engine refuses the drafter by name", {timeout: 300_000}, () => {
    const target = model("assistant-for-tiny3", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG"]);
    const drafter = path.join(tmpDir, "tiny3-drafter.gguf");
    assert.equal(run(["--assistant-for", target, "--out", drafter]).status, 0);
    const cases = [
      [model("assistant-for-wide", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--n-embd", "96"]),
       /the drafter is for a target of width 64 \(embedding_length_out\), the target's is 96/],
      [model("assistant-for-vocab", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--n-vocab", "1056"]),
       /the drafter's vocabulary has 1024 tokens, the target's 1056/],
    ];
    for (const [other, message] of cases) {
      const r = spawnSync(lfRun, ["--model", other, "--tokens", PROMPT.join(","), "--drafter", drafter, "--draft-tokens", "5"],
        {encoding: "utf8"});
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, message);
    }
  });

  test("what it cannot make a drafter of is refused by name", () => {
    const out = path.join(tmpDir, "refused.gguf");
    const drafter = modelWithDrafter("assistant-31b-shape", "31b-shape", ["--type", "Q4_0"]).drafter;
    const cases = [
      [["--assistant-for", path.join(tmpDir, "absent.gguf"), "--out", out], /cannot read GGUF/],
      [["--assistant-for", model("tiny-gemma3", "tiny-gemma3"), "--out", out], /a drafter needs a gemma4 target/],
      [["--assistant-for", drafter, "--out", out], /is a drafter \(MTP assistant\)/],
      [["--assistant-for", drafter, "--preset", "tiny", "--out", out], /--preset describes a target; --assistant-for reads/],
      [["--assistant-for", drafter, "--n-embd", "64", "--out", out], /--n-embd describes a target; --assistant-for reads/],
      [["--preset", "tiny", "--assistant", "--assistant-n-head", "3", "--out", out],
       /the drafter's 3 query heads are not a multiple of the target's layer 0's 2 KV heads/],
      [["--preset", "tiny", "--assistant", "--assistant-n-ff", "0", "--out", out], /--assistant-n-ff must be positive, got '0'/],
    ];
    for (const [args, message] of cases) {
      const r = run(args);
      assert.equal(r.status === 0, false, `${args.join(" ")} succeeded`);
      assert.match(r.stderr, message, args.join(" "));
      assert.equal(fs.existsSync(out), false);
    }
  });
});
