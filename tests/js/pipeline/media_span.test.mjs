// A media item's rows through a pipeline (PipelineCore.stepMedia): the same logits whatever the
// split, local or over HTTP (the span travels as span=1); a node that lost the session rebuilt
// from a history holding the item; a cut inside the item refused by name, a cut before it and the
// item sent again giving the bytes of the first time; an E-model's item through a remote first
// node (its rows' per-layer inputs computed there: POST /v1/per-layer-inputs) giving the bytes of
// a local one; a span longer than a node takes refused, naming both lengths, and a group refusing
// spans and an E-model's media rows.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {GroupNode} from "../../../js-glue/src/pipeline/group_node.js";
import {model} from "../support/models.mjs";
import {startServer, waitReady} from "../support/server_process.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const eModel = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);  // n_embd 64, n_embd_per_layer 32
const N_EMBD = 64;
const IMAGE_ROWS = 12;  // past the window of 4
const BEFORE = [2, 40, 41, 42], AFTER = [43, 44, 45];

// Rows an encoder might give: finite, varied, not token embeddings.
function imageRows(n = IMAGE_ROWS) {
  return Float32Array.from({length: n * N_EMBD}, (_, i) => Math.sin(i * 0.731) * 0.8);
}

const bits = (floats) => Array.from(new Uint32Array(Float32Array.from(floats).buffer));

async function logitsThrough(pipeline, session = `media-${Math.random()}`, rows = imageRows()) {
  await pipeline.step(session, BEFORE, {logits: false});
  await pipeline.stepMedia(session, {rows, span: true}, {logits: false});
  return (await pipeline.step(session, AFTER)).logits;
}

describe("a media span through a pipeline", () => {
  test("the same logits on one node, two nodes and a remote node; other logits without the span", async (t) => {
    const file = tiny();
    const one = await Pipeline.open({model: file, maxSpan: 16});
    t.after(() => one.close());
    const expect = await logitsThrough(one);
    const two = await Pipeline.open({model: file, nodes: "local:0-0,local:1-1", maxSpan: 16, threads: 2});
    t.after(() => two.close());
    assert.deepEqual(bits(await logitsThrough(two)), bits(expect));

    const server = await startServer(t, {args: ["--model", file, "--layers", "1-1", "--max-span", "16"]});
    await waitReady(server.url);
    const remote = await Pipeline.open({model: file, nodes: `local:0-0,${server.url}`, maxSpan: 16});
    t.after(() => remote.close());
    assert.equal(remote.nodes[1].maxSpan, 16, "the node's info says its max span");
    assert.deepEqual(bits(await logitsThrough(remote)), bits(expect));

    const session = "causal";
    await one.step(session, BEFORE, {logits: false});
    await one.stepMedia(session, {rows: imageRows(), span: false}, {logits: false});
    const causal = (await one.step(session, AFTER)).logits;
    assert.notDeepEqual(bits(causal), bits(expect), "the span changes what the sliding layer computes");
  });

  test("a node that lost the session is rebuilt from a history holding the item", async (t) => {
    // One session per node: every step of another session evicts this one on both nodes.
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", maxSpan: 16, maxSessions: 1});
    t.after(() => pipeline.close());
    const expect = await logitsThrough(pipeline, "first");
    const session = "lost";
    await pipeline.step(session, BEFORE, {logits: false});
    await pipeline.stepMedia(session, {rows: imageRows(), span: true}, {logits: false});
    await pipeline.step("other", [5, 6], {logits: false});
    const replays = pipeline.replays;
    assert.deepEqual(bits((await pipeline.step(session, AFTER)).logits), bits(expect));
    assert.ok(pipeline.replays > replays, "the nodes were rebuilt by replay");
  });

  test("a cut inside the item is refused; a cut before it and the item again give the first bytes", async (t) => {
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", maxSpan: 16});
    t.after(() => pipeline.close());
    const session = "cut";
    const expect = await logitsThrough(pipeline, session);
    const imageAt = BEFORE.length;
    await assert.rejects(pipeline.truncate(session, imageAt + 5),
      new RegExp(`position ${imageAt + 5} of session "cut" is inside a media item's rows \\[${imageAt}, ${imageAt + IMAGE_ROWS}\\)`));
    await pipeline.truncate(session, imageAt);
    await pipeline.stepMedia(session, {rows: imageRows(), span: true}, {logits: false});
    assert.deepEqual(bits((await pipeline.step(session, AFTER)).logits), bits(expect));
  });

  test("a span longer than a node takes is refused naming both lengths; a group takes none", async (t) => {
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", maxSpan: 16});
    t.after(() => pipeline.close());
    await assert.rejects(pipeline.stepMedia("long", {rows: imageRows(70), span: true}),
      /node 0 \(local, layers 0-0\): a media span of 70 rows is longer than the 64 this node's sessions hold at once/);
    await assert.rejects(pipeline.stepMedia("odd", {rows: new Float32Array(N_EMBD + 1), span: true}), /not a positive multiple of n_embd 64/);
    const group = new GroupNode({layers: [0, 1], nEmbd: N_EMBD, nLayer: 2, nVocab: 1024}, "tp(test)");
    await assert.rejects(group.forward({session: "g", startPos: 0, hidden: imageRows(), span: true}), /takes no media span/);
    await assert.rejects(group.perLayerInputs(new Array(IMAGE_ROWS).fill(0), imageRows()),
      (error) => error.code === "unsupported" && /computes per-layer inputs only of the tokens it embeds, not of a media item's rows/.test(error.message));
  });

  test("an E-model's item through a remote first node gives the bytes of a local one; another item, other logits", async (t) => {
    const file = eModel();
    const local = await Pipeline.open({model: file, nodes: "local:0-1,local:2-4", build: "single"});
    t.after(() => local.close());
    const server = await startServer(t, {args: ["--model", file, "--layers", "0-1"]});
    await waitReady(server.url);
    const remote = await Pipeline.open({model: file, nodes: `${server.url},local:2-4`, build: "single"});
    t.after(() => remote.close());
    const through = async (pipeline, rows) => {
      const session = `e-${Math.random()}`;
      await pipeline.step(session, BEFORE, {logits: false});
      await pipeline.stepMedia(session, {rows, span: false}, {logits: false});
      return (await pipeline.step(session, AFTER)).logits;
    };
    const expect = await through(local, imageRows());
    assert.deepEqual(bits(await through(remote, imageRows())), bits(expect));
    const other = imageRows().map((x) => -x);
    assert.notDeepEqual(bits(await through(remote, other)), bits(expect), "another item, other logits");
    assert.deepEqual(bits(await through(remote, other)), bits(await through(local, other)));
  });
});
