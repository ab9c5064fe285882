// The threaded module and the single-thread (wasm32-wasi) module each come in two variants,
// SIMD128 and relaxed SIMD (Node 22+), chosen by capability: the choice must match the engine,
// and all four modules must give the same bytes, on the models and prompts of the llama.cpp
// oracle too (which judges the threaded SIMD128 module, tests/js/oracle/oracle.test.mjs).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {describeDotForm} from "../../../js-glue/src/wasm/dot_form.js";
import {kernelChoiceReason, maddIsFused, relaxedSimdChoice, relaxedSimdDecision, relaxedSimdSupported} from "../../../js-glue/src/wasm/features.js";
import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {SINGLE_THREAD_FILES} from "../../../js-glue/src/wasm/wasi.js";
import {model, modelWithDrafter, root} from "../support/models.mjs";
import {nodeGreedy} from "../support/node_greedy.mjs";
import {CONFIGS, GREEDY_STEPS, prompt} from "../support/oracle_configs.mjs";

const nodeMajor = Number(process.versions.node.split(".")[0]);
const file = () => model("small-q4", "small", ["--type", "Q4_0"]);
const noRelaxed = !relaxedSimdSupported() && "this Node has no relaxed SIMD: scripts/test runs this file under Node 22 and 24 too";

// A prompt and a decode step, exact and with the top-K FFN (whose ffn_up runs cut the row strips
// of the relaxed modules' layout anywhere), and the read probe's checksum of the weights as laid
// out in memory (row strips in the relaxed modules), on an already loaded module `lf`.
async function run(lf) {
  const node = await LayerNode.open({model: file(), lf});
  try {
    const outputs = [];
    for (const approx of [{}, {ffnTopK: 0.3, ffnTopKThreshold: 1}]) {
      const session = `s${outputs.length}`;
      outputs.push(await node.forward({session, startPos: 0, hidden: node.embed([2, 100, 101, 102, 103, 104, 105, 106, 107]), approx}));
      outputs.push(await node.forward({session, startPos: 9, hidden: node.embed([108]), approx}));
    }
    const {checksum} = await node.readProbe();
    const {build, kernels, dotForm} = node.info();
    return {build, kernels, dotForm: dotForm.form, checksum, bytes: Buffer.concat(outputs.map((o) => Buffer.from(o.buffer)))};
  } finally {
    node.close();
  }
}

// What every variant must reproduce: the threaded SIMD128 module at 2 threads, run once.
let plainRun;
const plain = async () => {
  plainRun ??= await run(await loadThreadedModule({threads: 2, relaxedSimd: false}));
  assert.deepEqual([plainRun.build, plainRun.kernels], ["threaded", "wasm-simd128"]);
  return plainRun;
};

function assertSameAsPlain(got, expected, what) {
  assert.ok(got.bytes.equals(expected.bytes), `${what}: the outputs differ from the threaded SIMD128 module's`);
  assert.equal(got.checksum, expected.checksum, `${what}: the weights as laid out hold other halfwords than the file's`);
}

describe("module variants: detection", () => {
  test("relaxed SIMD is detected exactly where the engine enables it by default (Node 22+), which fuses its madd on this x86-64 host", () => {
    assert.equal(relaxedSimdSupported(), nodeMajor >= 22);
    assert.equal(relaxedSimdChoice().reason, nodeMajor >= 22
      ? "relaxed SIMD validates and f32x4.relaxed_madd is fused" : "this engine does not validate relaxed SIMD");
  });

  test("the madd probe tells a fused a·b + c from one that rounds the product first", () => {
    const f32 = Math.fround;
    assert.equal(maddIsFused((a, b, c) => f32(a * b + c)), true);  // a·b of two f32s is exact in a double
    assert.equal(maddIsFused((a, b, c) => f32(f32(a * b) + c)), false);
    assert.equal(maddIsFused(() => NaN), false);
  });

  test("the decision: relaxed only where it validates and its madd is fused or left to the module's own check", () => {
    const decide = (validates, maddFused) => relaxedSimdDecision({validates, maddFused});
    assert.deepEqual(decide(false, null), {relaxed: false, reason: "this engine does not validate relaxed SIMD"});
    assert.equal(decide(false, true).relaxed, false);
    assert.deepEqual(decide(true, false), {relaxed: false,
      reason: "this engine does not fuse f32x4.relaxed_madd: the relaxed kernels would round each block step twice"});
    assert.deepEqual(decide(true, true), {relaxed: true, reason: "relaxed SIMD validates and f32x4.relaxed_madd is fused"});
    assert.equal(decide(true, null).relaxed, true);
    assert.match(decide(true, null).reason, /the relaxed module checks relaxed_madd is fused itself/);
  });

  test("the reason reported with the kernels: the caller's choice, or a relaxed module's own finding", () => {
    assert.match(kernelChoiceReason({relaxed: false, forced: true, kernels: "wasm-simd128"}), /SIMD128 variant, as the caller chose/);
    assert.match(kernelChoiceReason({relaxed: true, forced: true, kernels: "wasm-relaxed-simd"}), /relaxed-SIMD variant, as the caller chose/);
    assert.match(kernelChoiceReason({relaxed: true, forced: false, kernels: "wasm-simd128"}), /found f32x4.relaxed_madd unfused/);
    assert.equal(kernelChoiceReason({relaxed: false, forced: false, kernels: "wasm-simd128"}), relaxedSimdChoice().reason);
  });

  test("each relaxed module validates exactly where the probe says relaxed SIMD is there, each SIMD128 one everywhere", () => {
    const dist = (name) => fs.readFileSync(path.join(root, "js-glue", "dist", name));
    for (const name of ["layerfold_mt_relaxed.wasm", SINGLE_THREAD_FILES.relaxed]) {
      assert.equal(WebAssembly.validate(dist(name)), relaxedSimdSupported(), name);
    }
    for (const name of ["layerfold_mt.wasm", SINGLE_THREAD_FILES.simd128]) assert.ok(WebAssembly.validate(dist(name)), name);
  });

  test("the relaxed kernels' dot form: timed at load, the pairs form only where 5% faster; a bad or misplaced choice refused by name", {skip: noRelaxed}, async () => {
    for (const lf of [await loadThreadedModule({threads: 1}), await loadSingleThreadModule()]) {
      try {
        const {form, dotAddMs, pairsMs, reason} = lf.dotForm;
        assert.ok(dotAddMs > 0 && pairsMs > 0, `${lf.kind}: both forms timed (${dotAddMs}, ${pairsMs})`);
        assert.equal(form, pairsMs < 0.95 * dotAddMs ? "pairs" : "dot-add", lf.kind);
        assert.match(reason, new RegExp(`^the ${form} form: [0-9.]+ ms for pairs against [0-9.]+ ms for dot-add`));
      } finally {
        lf.close();
      }
    }
    await assert.rejects(loadThreadedModule({threads: 1, dotForm: "vnni"}), /dotForm: expected dot-add or pairs, got "vnni"/);
    await assert.rejects(loadSingleThreadModule({relaxedSimd: false, dotForm: "pairs"}),
      (e) => e.code === "failed_precondition" && /the dot form "pairs" names a relaxed kernel; this module runs wasm-simd128/.test(e.message));
  });

  test("the dot form's reason: the caller's, a SIMD128 module's, a clock that does not advance", () => {
    assert.deepEqual(describeDotForm({form: "pairs"}, true), {form: "pairs", reason: "the pairs form, as the caller chose (dotForm option)"});
    assert.equal(describeDotForm({form: null}, false).form, null);
    assert.match(describeDotForm({form: "dot-add", dot_add_ms: 0, pairs_ms: 0}, false).reason, /the clock did not advance .* so the default/);
    assert.match(describeDotForm({form: "dot-add", dot_add_ms: 1, pairs_ms: 0.99}, false).reason, /pairs must be 5% faster/);
  });

  for (const build of ["threaded", "single"]) {
    test(`the default ${build} load picks the variant the engine supports`, async () => {
      const node = await LayerNode.open({model: file(), build, threads: 1});
      try {
        assert.deepEqual([node.info().build, node.info().kernels], [build, relaxedSimdSupported() ? "wasm-relaxed-simd" : "wasm-simd128"]);
        assert.equal(node.info().kernelChoice, relaxedSimdChoice().reason);
      } finally {
        node.close();
      }
    });
  }
});

describe("threaded module variants", () => {
  test("relaxed SIMD gives the same bytes as SIMD128 in both dot forms, prompt and decode, exact and top-K, 2 and 3 threads", {skip: noRelaxed}, async () => {
    const expected = await plain();
    for (const threads of [2, 3]) {
      for (const dotForm of ["dot-add", "pairs"]) {
        const relaxed = await run(await loadThreadedModule({threads, relaxedSimd: true, dotForm}));
        assert.deepEqual([relaxed.kernels, relaxed.dotForm], ["wasm-relaxed-simd", dotForm]);
        assertSameAsPlain(relaxed, expected, `relaxed, ${dotForm}, ${threads} threads`);
      }
    }
  });
});

describe("single-thread module variants", () => {
  test("the SIMD128 single-thread module gives the threaded module's bytes, prompt and decode, exact and top-K", async () => {
    const single = await run(await loadSingleThreadModule({relaxedSimd: false}));
    assert.deepEqual([single.build, single.kernels], ["single", "wasm-simd128"]);
    assertSameAsPlain(single, await plain(), "single-thread SIMD128");
  });

  test("the relaxed-SIMD single-thread module gives the threaded module's bytes in both dot forms, prompt and decode, exact and top-K", {skip: noRelaxed}, async () => {
    for (const dotForm of ["dot-add", "pairs"]) {
      const single = await run(await loadSingleThreadModule({relaxedSimd: true, dotForm}));
      assert.deepEqual([single.build, single.kernels, single.dotForm], ["single", "wasm-relaxed-simd", dotForm]);
      assertSameAsPlain(single, await plain(), `single-thread relaxed SIMD, ${dotForm}`);
    }
  });
});

describe("the MTP drafter in every module", () => {
  // gemma4 SSG, Q4_0, its drafter's matrices laid out in row strips in the relaxed modules.
  const pair = () => modelWithDrafter("mtp-node", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0"], ["--assistant-layers", "SGS"]);
  const tokens = [2, ...Array.from({length: 10}, (_, i) => 10 + ((i * 37) % 500))];

  // The target's logits after the prompt and the 6 greedy drafts after them, then after one more token.
  async function drafts(lf) {
    const {target, drafter} = pair();
    const node = await LayerNode.open({model: target, draftModel: drafter, lf});
    try {
      const out = await node.forward({session: "s", startPos: 0, hidden: node.embed(tokens), lastOnly: true});
      const first = await node.logitsAndDraft(out, {session: "s", tokens: tokens.slice(-1), k: 6});
      const next = await node.forward({session: "s", startPos: tokens.length, hidden: node.embed([first.draft.token]), lastOnly: true});
      const second = await node.logitsAndDraft(next, {session: "s", tokens: [first.draft.token], k: 6});
      return {kernels: node.info().kernels, logits: Buffer.concat([first.logits, second.logits].map((l) => Buffer.from(l.buffer))), ids: [first.draft, second.draft]};
    } finally {
      node.close();
    }
  }

  test("every variant drafts the threaded SIMD128 module's tokens", {skip: noRelaxed}, async () => {
    const expected = await drafts(await loadThreadedModule({threads: 2, relaxedSimd: false, withDrafter: true}));
    for (const [what, load] of [["threaded relaxed", () => loadThreadedModule({threads: 2, relaxedSimd: true, withDrafter: true})],
      ["single-thread SIMD128", () => loadSingleThreadModule({relaxedSimd: false})], ["single-thread relaxed", () => loadSingleThreadModule({relaxedSimd: true})]]) {
      const got = await drafts(await load());
      assert.ok(got.logits.equals(expected.logits), `${what} (${got.kernels}): the target's logits`);
      assert.deepEqual(got.ids, expected.ids, `${what} (${got.kernels}): the drafts`);
    }
  });
});

// The oracle's next-token distribution and greedy tokens, on its prompt, from a loaded module.
async function oracleRun(lf, config) {
  const node = await LayerNode.open({lf, model: model(config.name, config.preset, ["--type", config.type, ...(config.extra ?? [])])});
  try {
    const {logProbs, greedy} = await nodeGreedy(node, prompt(config.n, config.seed), GREEDY_STEPS);
    return {kernels: node.info().kernels, bytes: Buffer.from(logProbs.buffer), greedy};
  } finally {
    node.close();
  }
}

describe("module variants on the oracle's models", () => {
  const variants = [
    {what: "single-thread SIMD128", load: () => loadSingleThreadModule({relaxedSimd: false})},
    ...(relaxedSimdSupported() ? [
      ...["dot-add", "pairs"].map((dotForm) => ({what: `threaded relaxed SIMD (${dotForm})`, load: () => loadThreadedModule({threads: 2, relaxedSimd: true, dotForm})})),
      {what: "single-thread relaxed SIMD", load: () => loadSingleThreadModule({relaxedSimd: true})},
    ] : []),
  ];
  for (const config of CONFIGS) {
    test(`${config.name}: the threaded SIMD128 module's distribution and greedy tokens from the ${variants.map((v) => v.what).join(", ")} module`, async () => {
      const expected = await oracleRun(await loadThreadedModule({threads: 2, relaxedSimd: false}), config);
      assert.equal(expected.kernels, "wasm-simd128");
      for (const {what, load} of variants) {
        const got = await oracleRun(await load(), config);
        assert.ok(got.bytes.equals(expected.bytes), `${config.name}, ${what}: the next-token distribution differs`);
        assert.deepEqual(got.greedy, expected.greedy, `${config.name}, ${what}: greedy tokens differ`);
      }
    });
  }
});
