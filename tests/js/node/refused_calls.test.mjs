// A call the node refuses changes no session: for every kind of refusal, of a new session at the
// node's session limit and of a held one, through LayerNode and through the HTTP app, the node's
// sessions afterwards are the ones before: the same ids in the same least-recently-used order,
// each at the same position, each KV cache with the same bytes (kvDigest). A new session's
// admission is decided, and its forward answered, before any session is evicted for it.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {LayerNode as CoreLayerNode} from "../../../js-glue/src/node/layer_node_core.js";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {model} from "../support/models.mjs";

const OCTETS = {"content-type": "application/octet-stream"};
const MAX_CONTEXT = 16;
const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);

async function withNode(fn) {
  const node = await LayerNode.open({model: tiny(), build: "single", maxSessions: 2, maxContext: MAX_CONTEXT});
  try {
    return await fn(node);
  } finally {
    node.close();
  }
}

// Everything a refusal must leave as it was, least recently used first.
const state = (node) => node.sessions().map((id) => ({id, nPast: node.sessionLength(id), kv: node.kvDigest(id)}));

// Sessions "a" (3 positions, the least recently used) and "b" (2): the node is at its limit, so a
// new session would evict "a", and a forward of "a" would make it the most recently used.
async function held(node) {
  await node.forward({session: "a", startPos: 0, hidden: node.embed([2, 3, 4])});
  await node.forward({session: "b", startPos: 0, hidden: node.embed([5, 6])});
  const before = state(node);
  assert.deepEqual(before.map(({id, nPast}) => [id, nPast]), [["a", 3], ["b", 2]]);
  assert.ok(before.every(({kv}) => Number.isInteger(kv) && kv > 0), JSON.stringify(before));
  assert.notEqual(before[0].kv, before[1].kv);
  return before;
}

// One row of the embedding with `value` in its first column.
function rowWith(node, value) {
  const row = node.embed([7]);
  row[0] = value;
  return row;
}

// After the refusals "a" is still the least recently used and intact: a new session evicts it,
// and "b" continues where it was.
async function stillInOrder(node, before) {
  await node.forward({session: "n", startPos: 0, hidden: node.embed([9])});
  assert.deepEqual(node.sessions(), ["b", "n"]);
  assert.equal(node.kvDigest("b"), before[1].kv);
  await node.forward({session: "b", startPos: 2, hidden: node.embed([8])});
  assert.equal(node.sessionLength("b"), 3);
}

// [title, (node) => [the call of a new session "c", the call of the held "a"], what the refusal says]
const exitWindowPlus1 = {exit_layer: -1, recent_updates: new Array(17).fill(0.1)};
const refusals = [
  ["a NaN row", (node) => [{startPos: 0, hidden: rowWith(node, NaN)}, {startPos: 3, hidden: rowWith(node, NaN)}], /non-finite|finite/],
  ["a row of 3.4e38 (its squares overflow float32)", (node) => [{startPos: 0, hidden: rowWith(node, 3.4e38)}, {startPos: 3, hidden: rowWith(node, 3.4e38)}],
    /finite|overflow|too large/],
  ["a stale start_pos", (node) => [{startPos: 2, hidden: node.embed([7])}, {startPos: 1, hidden: node.embed([7])}], /start_pos \d+ does not match/],
  ["a start_pos ahead of the session", (node) => [{startPos: 5, hidden: node.embed([7])}, {startPos: 9, hidden: node.embed([7])}], /start_pos \d+ does not match/],
  ["a body that is not whole rows", (node) => [{startPos: 0, hidden: node.embed([7]).subarray(1)}, {startPos: 3, hidden: node.embed([7]).subarray(1)}],
    /not a positive multiple of n_embd/],
  ["positions beyond the session's max context", (node) => [{startPos: 0, hidden: node.embed(new Array(MAX_CONTEXT + 1).fill(7))},
    {startPos: 3, hidden: node.embed(new Array(MAX_CONTEXT - 2).fill(7))}], /exceed max_ctx 16/],
  ["an unknown approximate mode", (node) => [{startPos: 0, hidden: node.embed([7]), approx: {bogusMode: true}},
    {startPos: 3, hidden: node.embed([7]), approx: {bogusMode: true}}], /bogus_mode/],
  ["an approximate mode out of range", (node) => [{startPos: 0, hidden: node.embed([7]), approx: {ffnTopK: -3}},
    {startPos: 3, hidden: node.embed([7]), approx: {ffnTopK: -3}}], /ffn_top_k/],
  ["an early-exit state beyond the exit window", (node) => [{startPos: 0, hidden: node.embed([7]), approx: {earlyExit: true}, exitState: exitWindowPlus1},
    {startPos: 3, hidden: node.embed([7]), approx: {earlyExit: true}, exitState: exitWindowPlus1}], /recent_updates|window/],
];

describe("LayerNode: a refused forward changes no session", () => {
  for (const [title, calls, why] of refusals) {
    test(`${title}: for a new session at the limit and for the least recently used one`, async () => {
      await withNode(async (node) => {
        const before = await held(node);
        const [fresh, old] = calls(node);
        await assert.rejects(node.forward({session: "c", ...fresh}), (e) => why.test(e.message) || assert.fail(e.message));
        assert.deepEqual(state(node), before, "a new session's refusal evicted or changed a session");
        await assert.rejects(node.forward({session: "a", ...old}), (e) => why.test(e.message) || assert.fail(e.message));
        assert.deepEqual(state(node), before, "a held session's refusal moved or changed it");
        await stillInOrder(node, before);
      });
    });
  }

  test("a refused entry among good ones in one engine step: the good ones run, the refused ones change nothing", async () => {
    await withNode(async (node) => {
      const before = await held(node);
      const steps = [];
      node.observeBatches(({entries}) => steps.push(entries));
      // "a" continues and the new "c" is refused: "c" would have evicted "b", the only session
      // outside the step.
      const [good, badNew] = await Promise.allSettled([
        node.forward({session: "a", startPos: 3, hidden: node.embed([7])}),
        node.forward({session: "c", startPos: 0, hidden: rowWith(node, NaN)}),
      ]);
      assert.equal(good.status, "fulfilled", good.reason?.message);
      assert.equal(badNew.status, "rejected");
      assert.deepEqual(node.sessions(), ["b", "a"]);
      assert.equal(node.sessionLength("a"), 4);
      assert.notEqual(node.kvDigest("a"), before[0].kv);
      assert.deepEqual(state(node)[0], before[1]);
      // "b" is refused after a good "a" in one step: "b" stays the least recently used, as it was.
      const middle = state(node);
      const [again, badHeld] = await Promise.allSettled([
        node.forward({session: "a", startPos: 4, hidden: node.embed([7])}),
        node.forward({session: "b", startPos: 2, hidden: rowWith(node, NaN)}),
      ]);
      assert.equal(badHeld.status, "rejected");
      assert.equal(again.status, "fulfilled", again.reason?.message);
      assert.deepEqual(steps, [2, 2], "each pair ran as one step");
      assert.deepEqual(node.sessions(), ["b", "a"]);
      assert.deepEqual(state(node)[0], middle[0]);
      assert.equal(node.sessionLength("a"), 5);
    });
  });

  test("a new session beyond the limit while every held one is in the step waits a step, and its refusal then evicts none", async () => {
    await withNode(async (node) => {
      const before = await held(node);
      const steps = [];
      node.observeBatches(({entries}) => steps.push(entries));
      const [a, b, c] = await Promise.allSettled([
        node.forward({session: "a", startPos: 3, hidden: node.embed([7])}),
        node.forward({session: "b", startPos: 2, hidden: node.embed([7])}),
        node.forward({session: "c", startPos: 0, hidden: rowWith(node, NaN)}),
      ]);
      assert.deepEqual(steps, [2, 1], "the new session waited for the next step");
      assert.deepEqual([a.status, b.status, c.status], ["fulfilled", "fulfilled", "rejected"]);
      assert.deepEqual(state(node).map(({id, nPast}) => [id, nPast]), [["a", 4], ["b", 3]]);
      assert.notEqual(node.kvDigest("a"), before[0].kv);
    });
  });

  test("a refused truncate (an unknown session, a cut beyond the length) changes no session", async () => {
    await withNode(async (node) => {
      const before = await held(node);
      await assert.rejects(node.truncate("zz", 0), (e) => e.code === "unknown_session");
      await assert.rejects(node.truncate("a", 4), (e) => e.code === "invalid_argument" || e.code === "failed_precondition");
      await assert.rejects(node.truncate("a", -1), (e) => e.code === "invalid_argument");
      assert.deepEqual(state(node), before);
      await stillInOrder(node, before);
    });
  });

  test("the limits are checked when the node opens: maxSessions below 1 or not a number is refused by name", async () => {
    for (const maxSessions of [0, -1, 1.5, NaN, "2"]) {
      await assert.rejects(LayerNode.open({model: tiny(), build: "single", maxSessions}),
        (e) => e.code === "invalid_argument" && /maxSessions must be a whole number of sessions >= 1/.test(e.message));
    }
    await assert.rejects(LayerNode.open({model: tiny(), build: "single", maxKvBytes: NaN}),
      (e) => e.code === "invalid_argument" && /maxKvBytes must be a whole number of bytes/.test(e.message));
  });

  test("a node refused for its options closes the module and the source handed to it, reading neither", async () => {
    for (const options of [{maxSessions: 0}, {maxKvBytes: -1}, {perLayerTable: "all"}, {perLayerRowCacheBytes: 0.5}, {maxBatchRows: 0}]) {
      const closed = [];
      const lf = {close: () => closed.push("module")};
      const source = {name: "m.gguf", size: 1, read: () => assert.fail("read"), readInto: () => assert.fail("read"), close: async () => closed.push("source")};
      await assert.rejects(CoreLayerNode.open({lf, source, ...options}), (e) => e.code === "invalid_argument" || e instanceof RangeError);
      assert.deepEqual(closed.sort(), ["module", "source"], JSON.stringify(options));
    }
  });
});

function post(app, path, body, headers = {}) {
  return app.fetch(new Request(`http://node${path}`, {method: "POST", headers: {...OCTETS, ...headers}, body}));
}

const bytesOf = (floats) => new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);

describe("HTTP: a refused request changes no session", () => {
  const MAX_TOKENS = 32;
  // [title, (node) => [[path, body, status, code] of the new "c", the same of the held "a"]]
  const requests = [
    ["a NaN row", (node) => [["/v1/sessions/c/forward?start_pos=0", rowWith(node, NaN), 400, "not_finite"],
      ["/v1/sessions/a/forward?start_pos=3", rowWith(node, NaN), 400, "not_finite"]]],
    ["a row of 3.4e38", (node) => [["/v1/sessions/c/forward?start_pos=0", rowWith(node, 3.4e38), 400, "bad_parameter"],
      ["/v1/sessions/a/forward?start_pos=3", rowWith(node, 3.4e38), 400, "bad_parameter"]]],
    ["a stale start_pos", (node) => [["/v1/sessions/c/forward?start_pos=2", node.embed([7]), 404, "unknown_session"],
      ["/v1/sessions/a/forward?start_pos=1", node.embed([7]), 409, "position_mismatch"]]],
    ["a body that is not whole rows", (node) => [["/v1/sessions/c/forward?start_pos=0", bytesOf(node.embed([7])).subarray(4), 400, "bad_length"],
      ["/v1/sessions/a/forward?start_pos=3", bytesOf(node.embed([7])).subarray(4), 400, "bad_length"]]],
    ["positions beyond the max context", (node) => [["/v1/sessions/c/forward?start_pos=0", node.embed(new Array(MAX_CONTEXT + 1).fill(7)), 400, "context_full"],
      ["/v1/sessions/a/forward?start_pos=3", node.embed(new Array(MAX_CONTEXT - 2).fill(7)), 400, "context_full"]]],
    ["a body over the request limit (max_tokens)", (node) => [["/v1/sessions/c/forward?start_pos=0", node.embed(new Array(MAX_TOKENS + 1).fill(7)), 413, "too_large"],
      ["/v1/sessions/a/forward?start_pos=3", node.embed(new Array(MAX_TOKENS + 1).fill(7)), 413, "too_large"]]],
    ["an approximate mode out of range", (node) => [["/v1/sessions/c/forward?start_pos=0&ffn_top_k=-3", node.embed([7]), 400, "bad_parameter"],
      ["/v1/sessions/a/forward?start_pos=3&ffn_top_k=-3", node.embed([7]), 400, "bad_parameter"]]],
    ["a truncate of an unknown session or beyond the length", (node) => [["/v1/sessions/c/truncate?n_past=0", null, 404, "unknown_session"],
      ["/v1/sessions/a/truncate?n_past=4", null, 400, "bad_parameter"]]],
  ];
  for (const [title, calls] of requests) {
    test(`${title}: for a new session at the limit and for the least recently used one`, async () => {
      await withNode(async (node) => {
        const app = createLayerNodeApp({node, maxTokens: MAX_TOKENS});
        const before = await held(node);
        for (const [path, body, status, code] of calls(node)) {
          const response = await post(app, path, body);
          const {error} = await response.json();
          assert.deepEqual([response.status, error.code], [status, code], `${path}: ${error.message}`);
          assert.deepEqual(state(node), before, `${path}: ${error.message}`);
        }
        await stillInOrder(node, before);
      });
    });
  }

  test("a refused request beside a good one: the good one runs, the refused one changes nothing", async () => {
    await withNode(async (node) => {
      const app = createLayerNodeApp({node});
      const before = await held(node);
      const [good, bad] = await Promise.all([
        post(app, "/v1/sessions/a/forward?start_pos=3", node.embed([7])),
        post(app, "/v1/sessions/c/forward?start_pos=0", rowWith(node, 3.4e38)),
      ]);
      assert.equal(good.status, 200);
      await good.arrayBuffer();
      assert.equal(bad.status, 400, (await bad.clone().text()));
      await bad.arrayBuffer();
      assert.deepEqual(node.sessions(), ["b", "a"]);
      assert.deepEqual(state(node)[0], before[1]);
    });
  });
});
