// A refused request changes nothing: every check runs before a session is touched, so after a
// 400 the node holds the same sessions (count, ids, n_past, least-recently-used order). And an
// Idempotency-Key answers only the request it was first sent with: another request under the
// same key is 422 idempotency_mismatch, not the first request's output.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {model} from "../support/models.mjs";

const OCTETS = {"content-type": "application/octet-stream"};
const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);

function post(app, path, body, headers = {}) {
  return app.fetch(new Request(`http://node${path}`, {method: "POST", headers: {...OCTETS, ...headers}, body}));
}

async function withTiny(options, fn) {
  const node = await LayerNode.open({model: tiny(), threads: 1, ...options});
  try {
    return await fn(node, createLayerNodeApp({node}));
  } finally {
    node.close();
  }
}

// What the node holds: {id: n_past} for the ids asked about, and the session count.
function held(node, ids) {
  return {sessions: node.info().sessions, nPast: Object.fromEntries(ids.map((id) => [id, node.sessionLength(id)]))};
}

describe("a refused request leaves every session as it was", () => {
  const badExitStates = [
    ["exit_layer not an integer", {exit_layer: "x", recent_updates: []}],
    ["exit_layer below -1", {exit_layer: -2, recent_updates: []}],
    ["recent_updates not numbers", {exit_layer: -1, recent_updates: ["a"]}],
    ["a negative update", {exit_layer: -1, recent_updates: [-1]}],
    // Well-formed to the HTTP checks, refused by the engine (more updates than its exit window).
    ["17 recent updates", {exit_layer: -1, recent_updates: new Array(17).fill(0.1)}],
  ];
  for (const [name, exitState] of badExitStates) {
    test(`x-layerfold-exit-state with ${name}: 400, no session created, none evicted, none reordered`, async () => {
      await withTiny({maxSessions: 2}, async (node, app) => {
        const prompt = node.embed([2, 3, 4]);
        assert.equal((await post(app, "/v1/sessions/a/forward?start_pos=0", prompt)).status, 200);
        assert.equal((await post(app, "/v1/sessions/b/forward?start_pos=0", node.embed([5, 6]))).status, 200);
        const before = held(node, ["a", "b", "c"]);
        assert.deepEqual(before, {sessions: 2, nPast: {a: 3, b: 2, c: null}});
        const header = {"x-layerfold-exit-state": JSON.stringify(exitState)};
        // A new session at the node's session limit, and a continuation of the oldest.
        const refusedNew = await post(app, "/v1/sessions/c/forward?start_pos=0&early_exit=1", prompt, header);
        assert.equal(refusedNew.status, 400);
        assert.equal((await refusedNew.json()).error.code, "bad_parameter");
        const refusedOld = await post(app, "/v1/sessions/a/forward?start_pos=3&early_exit=1", node.embed([7]), header);
        assert.equal(refusedOld.status, 400);
        assert.deepEqual(held(node, ["a", "b", "c"]), before);
        // "a" is still the least recently used: a new session evicts it, not "b".
        assert.equal((await post(app, "/v1/sessions/d/forward?start_pos=0", prompt)).status, 200);
        assert.deepEqual(held(node, ["a", "b", "d"]), {sessions: 2, nPast: {a: null, b: 2, d: 3}});
      });
    });
  }

  test("a malformed approximate mode for a new session at the session limit: 400, the held session stays", async () => {
    await withTiny({maxSessions: 1}, async (node, app) => {
      assert.equal((await post(app, "/v1/sessions/a/forward?start_pos=0", node.embed([2, 3]))).status, 200);
      const before = held(node, ["a", "z"]);
      const refused = await post(app, "/v1/sessions/z/forward?start_pos=0&ffn_top_k_layers=0:abc", node.embed([2]));
      assert.equal(refused.status, 400);
      assert.deepEqual(held(node, ["a", "z"]), before);
    });
  });
});

describe("Idempotency-Key: the stored answer is for the request it came with only", () => {
  test("same key, same request: replayed; same key with other values, rows, last_only or approximate modes: 422, nothing run", async () => {
    await withTiny({}, async (node, app) => {
      const hidden = node.embed([2, 3, 4]);
      const key = {"idempotency-key": "k1"};
      const first = await post(app, "/v1/sessions/s/forward?start_pos=0", hidden, key);
      assert.equal(first.status, 200);
      const firstBytes = Buffer.from(await first.arrayBuffer());
      const again = await post(app, "/v1/sessions/s/forward?start_pos=0&last_only=0", hidden, key);
      assert.equal(again.status, 200);
      assert.equal(again.headers.get("x-layerfold-replayed"), "1");
      assert.ok(Buffer.from(await again.arrayBuffer()).equals(firstBytes));

      const others = {
        "other values": [hidden.map((x) => x + 1), ""],
        "another row count": [node.embed([2, 3]), ""],
        "last_only": [hidden, "&last_only=1"],
        "truncated attention": [hidden, "&truncated_attention=1"],
        "top-K FFN": [hidden, "&ffn_top_k=0.5"],
      };
      for (const [what, [body, query]] of Object.entries(others)) {
        const r = await post(app, `/v1/sessions/s/forward?start_pos=0${query}`, body, key);
        assert.equal(r.status, 422, what);
        const {error} = await r.json();
        assert.equal(error.code, "idempotency_mismatch", what);
        assert.match(error.message, /Idempotency-Key "k1" was sent with another request to session "s"/);
        assert.equal(r.headers.get("x-layerfold-replayed"), null);
      }
      assert.equal(node.sessionLength("s"), 3, "a mismatched request ran");
      // The next forward, with a new key, is a new request.
      const next = await post(app, "/v1/sessions/s/forward?start_pos=3", node.embed([5]), {"idempotency-key": "k2"});
      assert.equal(next.status, 200);
      assert.equal(node.sessionLength("s"), 4);
    });
  });

  test("the exit state is part of the request: the same key with another x-layerfold-exit-state is 422", async () => {
    await withTiny({}, async (node, app) => {
      const hidden = node.embed([2, 3]);
      const headers = (state) => ({"idempotency-key": "e1", "x-layerfold-exit-state": JSON.stringify(state)});
      const query = "/v1/sessions/e/forward?start_pos=0&early_exit=1&exit_threshold=0.01";
      assert.equal((await post(app, query, hidden, headers({exit_layer: -1, recent_updates: [0.5]}))).status, 200);
      assert.equal((await post(app, query, hidden, headers({exit_layer: -1, recent_updates: [0.5]}))).headers.get("x-layerfold-replayed"), "1");
      assert.equal((await post(app, query, hidden, headers({exit_layer: -1, recent_updates: [0.25]}))).status, 422);
    });
  });

  test("a malformed key is 400 bad_parameter", async () => {
    await withTiny({}, async (node, app) => {
      const r = await post(app, "/v1/sessions/m/forward?start_pos=0", node.embed([2]), {"idempotency-key": "x".repeat(129)});
      assert.equal(r.status, 400);
      assert.equal((await r.json()).error.code, "bad_parameter");
      assert.equal(node.sessionLength("m"), null);
    });
  });
});
