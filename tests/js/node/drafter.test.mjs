// The MTP drafter beside a tail LayerNode (node/drafter.js): the drafts after a step equal the
// native engine's greedy chain (lf_run --drafter, each step's argmax fed to the next), on both
// builds, after a plain step and after a step whose drafted rows were rejected; a split whose
// tail lacks a layer the drafter reads, a drafter of another target, a drafter on a node without
// the head and a threaded module loaded without the drafter's threads are refused by name; a
// drafter whose state turns non-finite stops drafting for that session only; its bytes count in
// the node's budget and info.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

import {greedyContinuation} from "../../../js-glue/src/node/drafter.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {modelWithDrafter, root} from "../support/models.mjs";

const lfRun = path.join(root, "build", "native", "lf_run");
// gemma4, layers SSG: the drafter's sliding layers read layer 1's cache, its global ones layer 2's.
const pair = () => modelWithDrafter("mtp-node", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0"], ["--assistant-layers", "SGS"]);
const prompt = [2, ...Array.from({length: 10}, (_, i) => 10 + ((i * 37) % 500))];
const argmax = (xs) => xs.reduce((best, x, i) => (x > xs[best] ? i : best), 0);

// The native engine's greedy drafts after `tokens`: the target's argmax, then k drafter steps,
// each fed the argmax of the one before.
function nativeDrafts(target, drafter, tokens, k) {
  const run = (draftTokens) => JSON.parse(execFileSync(lfRun, ["--model", target, "--tokens", tokens.join(","), "--drafter", drafter,
    "--draft-tokens", draftTokens.join(","), "--threads", "1"], {maxBuffer: 1 << 28}).toString());
  const token = run([0]).top[0].id;
  const chain = [token];
  for (let i = 0; i < k; i++) chain.push(argmax(run(chain).draft.at(-1).logits));
  return {token, ids: chain.slice(1)};
}

describe("greedy continuation of a step", () => {
  test("drafted rows kept while each is the argmax of the row before, then that row's argmax", () => {
    const nVocab = 4;
    const logits = Float32Array.from([0, 3, 1, 0, /* row 1 */ 0, 0, 0, 2, /* row 2 */ 5, 0, 0, 0]);
    assert.deepEqual(greedyContinuation([9, 1, 3], logits, nVocab), {after: 2, token: 0});
    assert.deepEqual(greedyContinuation([9, 1, 2], logits, nVocab), {after: 1, token: 3});
    assert.deepEqual(greedyContinuation([9, 2, 3], logits, nVocab), {after: 0, token: 1});
    assert.deepEqual(greedyContinuation([9], logits.subarray(0, 4), nVocab), {after: 0, token: 1});
    // Equal logits: the lowest id.
    assert.deepEqual(greedyContinuation([9], Float32Array.from([1, 2, 2, 0]), nVocab), {after: 0, token: 1});
  });
});

describe("a tail node drafts as the native engine", () => {
  for (const build of ["single", "threaded"]) {
    test(build, async (t) => {
      const {target, drafter} = pair();
      const want = nativeDrafts(target, drafter, prompt, 3);
      const node = await LayerNode.open({model: target, layers: [1, 3], draftModel: drafter, build, threads: build === "threaded" ? 2 : undefined});
      t.after(() => node.close());
      const first = await LayerNode.open({model: target, layers: [0, 1], build: "single"});
      t.after(() => first.close());
      const hiddenOf = (tokens, startPos) => first.forward({session: "s", startPos, hidden: first.embed(tokens)});
      assert.equal(node.drafts, true);

      // After the prompt (its last row only): the drafts after the target's argmax.
      const out = await node.forward({session: "s", startPos: 0, hidden: await hiddenOf(prompt, 0), lastOnly: true});
      const {logits, draft} = await node.logitsAndDraft(out, {session: "s", tokens: prompt.slice(-1), k: 3});
      assert.equal(argmax(logits), want.token);
      assert.deepEqual(draft, {after: 0, token: want.token, ids: want.ids});

      // A step feeding the sampled token and two drafted ones the target disagrees with: the
      // drafts come from its first row, at the position after the prompt, whatever the rows after it hold.
      const wrong = [(want.ids[0] + 1) % node.nVocab, 7];
      const fed = [want.token, ...wrong];
      const rows = await node.forward({session: "s", startPos: prompt.length, hidden: await hiddenOf(fed, prompt.length)});
      const again = await node.logitsAndDraft(rows, {session: "s", tokens: fed, k: 2});
      const nextWant = nativeDrafts(target, drafter, [...prompt, want.token], 2);
      assert.deepEqual(again.draft, {after: 0, token: nextWant.token, ids: nextWant.ids});

      assert.equal(node.info().drafter.bytesLoaded, tensorTable(drafter).reduce((sum, tensor) => sum + tensor.n_bytes, 0));
      assert.equal(node.draftStats().drafts, 2);
      assert.equal(node.draftAfter("s", {tokens: fed, hidden: rows, logits: again.logits, k: 0}).ids.length, 0);
    });
  }
});

describe("refusals by name", () => {
  test("a tail without a layer the drafter reads, a node without the head, another target's drafter", async () => {
    const {target, drafter} = pair();
    await assert.rejects(LayerNode.open({model: target, layers: [2, 3], draftModel: drafter, build: "single"}),
      /draft model .*drafter layer 0 \(sliding.*\) reads target layer 1, whose cache \(layer 1\) this node does not hold/);
    await assert.rejects(LayerNode.open({model: target, layers: [0, 2], draftModel: drafter, build: "single"}),
      /a draft model goes on the node holding the head \(layer 2\); this node serves layers 0-1/);
    const other = modelWithDrafter("mtp-node-wide", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0", "--n-embd", "128"]);
    await assert.rejects(LayerNode.open({model: target, draftModel: other.drafter, build: "single"}),
      /draft model .*the drafter is for a target of width 128 \(embedding_length_out\), the target's is 64/);
    await assert.rejects(LayerNode.open({model: target, draftModel: path.join(root, "build", "models", "no-such-drafter.gguf"), build: "single"}),
      /no-such-drafter/);
    // A threaded module without the drafter's pthreads: its pool would wait for them for ever.
    await assert.rejects(LayerNode.open({model: target, draftModel: drafter, lf: await loadThreadedModule({threads: 1})}),
      /a draft model runs on threads of its own: load the module with loadThreadedModule\(\{ withDrafter: true \}\)/);
  });

  test("the drafter counts in the memory budget", async (t) => {
    const {target, drafter} = pair();
    const plain = await LayerNode.open({model: target, build: "single", memoryBudgetBytes: 64 * 2 ** 20, maxTokens: 64});
    t.after(() => plain.close());
    const with_ = await LayerNode.open({model: target, build: "single", memoryBudgetBytes: 64 * 2 ** 20, maxTokens: 64, draftModel: drafter});
    t.after(() => with_.close());
    assert.ok(with_.memory.drafter >= with_.info().drafter.bytesLoaded);
    assert.equal(with_.memory.neededBytes - plain.memory.neededBytes, with_.memory.drafter);
    const tight = plain.memory.neededBytes + 1000;
    await assert.rejects(LayerNode.open({model: target, build: "single", memoryBudgetBytes: tight, maxTokens: 64, draftModel: drafter}),
      (error) => error.code === "over_budget" && /draft model .* MiB/.test(error.message) && /no draft model/.test(error.message));
  });
});

describe("a drafter whose state turns non-finite", () => {
  test("(a finite norm so large the projections overflow) stops drafting for that session, answers its logits, forgets the stop with the session", async (t) => {
    const {target, drafter} = pair();
    const poisoned = path.join(root, "build", "models", "mtp-node-overflowing-drafter.gguf");
    fs.writeFileSync(poisoned, withValue(drafter, "output_norm.weight", 3e38));
    const node = await LayerNode.open({model: target, draftModel: poisoned, build: "single"});
    t.after(() => node.close());
    const out = await node.forward({session: "a", startPos: 0, hidden: node.embed(prompt), lastOnly: true});
    const {logits, draft} = await node.logitsAndDraft(out, {session: "a", tokens: prompt.slice(-1), k: 3});
    assert.equal(logits.length, node.nVocab);
    assert.deepEqual(draft.ids, []);
    assert.match(draft.stopped, /non-finite|the drafter's/);
    const next = await node.forward({session: "a", startPos: prompt.length, hidden: node.embed([draft.token]), lastOnly: true});
    const later = node.draftAfter("a", {tokens: [draft.token], hidden: next, logits: node.logits(next), k: 3});
    assert.deepEqual(later.ids, []);
    assert.equal(node.draftStats().stopped, 1, "one stop: the session drafts no more, the drafter is not asked again");
    node.dropSession("a");
    assert.equal(node.draftStats().stoppedSessions, 0, "the session's stop goes with it");
  });
});

// A GGUF file's tensor table as the engine's own parser reads it (in a process of its own).
function tensorTable(file) {
  return JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", `
    import {loadSingleThreadModule} from ${JSON.stringify(path.join(root, "js-glue", "src", "wasm", "load_node.js"))};
    import {openSource} from ${JSON.stringify(path.join(root, "js-glue", "src", "sources", "open_source.js"))};
    import {openGgufHeader} from ${JSON.stringify(path.join(root, "js-glue", "src", "gguf", "header.js"))};
    const lf = await loadSingleThreadModule();
    const {header} = await openGgufHeader(lf, await openSource(${JSON.stringify(file)}));
    console.log(JSON.stringify(header.tensors));`]).toString());
}

// A copy of the GGUF file with every value of the F32 tensor `name` set to `value`.
function withValue(file, name, value) {
  const bytes = fs.readFileSync(file);
  const tensor = tensorTable(file).find((t) => t.name === name);
  assert.equal(tensor.type, "F32");
  for (let at = tensor.offset; at < tensor.offset + tensor.n_bytes; at += 4) bytes.writeFloatLE(value, at);
  return bytes;
}
