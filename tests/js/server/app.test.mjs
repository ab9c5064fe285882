// The layer-node app in process: the bounded queue's 429, idempotent replays, evicted sessions,
// readiness while loading; and serve()'s metrics and logs.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {serve} from "../../../js-glue/src/server/node_host.js";
import {NodeState} from "../../../js-glue/src/server/node_state.js";
import {model} from "../support/models.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const OCTETS = {"content-type": "application/octet-stream"};

function post(app, path, body, headers = {}) {
  return app.fetch(new Request(`http://node${path}`, {method: "POST", headers: {...OCTETS, ...headers}, body}));
}

// A node whose forwards finish only when the test releases them.
function heldNode() {
  const lengths = new Map();
  const releases = [];
  return {
    nEmbd: 4, nVocab: 8, nLayer: 1, layers: [0, 1], withEmbedding: false, withHead: false, maxSessions: 8, maxContext: 16, metadata: {},
    forward({session, startPos, hidden}) {
      return new Promise((resolve) => releases.push(() => {
        lengths.set(session, startPos + hidden.length / 4);
        resolve(hidden);
      }));
    },
    sessionLength: (id) => lengths.get(id) ?? null,
    sessionBytes: () => 0,
    layerTimings: () => [1],
    releaseAll: async () => {
      while (releases.length) {
        releases.shift()();
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
    get waiting() { return releases.length; },
  };
}

async function withTiny(options, fn) {
  const node = await LayerNode.open({model: tiny(), threads: 1, ...options});
  try {
    return await fn(node);
  } finally {
    node.close();
  }
}

describe("layer-node app", () => {
  test("beyond one running and maxQueue waiting forwards: 429 queue_full with Retry-After, nothing created", async () => {
    const node = heldNode();
    const app = createLayerNodeApp({node, maxQueue: 2});
    const row = new Float32Array([1, 2, 3, 4]);
    const accepted = ["a", "b", "c"].map((id) => post(app, `/v1/sessions/${id}/forward?start_pos=0`, row));
    for (let i = 0; i < 100 && node.waiting === 0; i++) await new Promise((resolve) => setImmediate(resolve));
    const refused = await post(app, "/v1/sessions/d/forward?start_pos=0", row);
    assert.equal(refused.status, 429);
    assert.equal((await refused.json()).error.code, "queue_full");
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    assert.equal(node.sessionLength("d"), null);
    await node.releaseAll();
    for (const response of await Promise.all(accepted)) {
      assert.equal(response.status, 200);
      assert.deepEqual(new Float32Array(await response.arrayBuffer()), row);
    }
  });

  test("a repeated forward with the same Idempotency-Key is answered from memory, not run twice", async () => {
    await withTiny({}, async (node) => {
      const app = createLayerNodeApp({node});
      const hidden = node.embed([2, 3, 4]);
      const first = await post(app, "/v1/sessions/s/forward?start_pos=0", hidden, {"idempotency-key": "k1"});
      assert.equal(first.status, 200);
      const again = await post(app, "/v1/sessions/s/forward?start_pos=0", hidden, {"idempotency-key": "k1"});
      assert.equal(again.status, 200);
      assert.equal(again.headers.get("x-layerfold-replayed"), "1");
      assert.equal(again.headers.get("x-layerfold-n-past"), "3");
      assert.deepEqual(Buffer.from(await again.arrayBuffer()), Buffer.from(await first.arrayBuffer()));
      assert.equal(node.sessionLength("s"), 3);
      const otherKey = await post(app, "/v1/sessions/s/forward?start_pos=0", hidden, {"idempotency-key": "k2"});
      assert.equal(otherKey.status, 409);
      assert.equal((await otherKey.json()).error.n_past, 3);
    });
  });

  test("a session evicted by the LRU limit: 404 unknown_session saying it was evicted", async () => {
    await withTiny({maxSessions: 1}, async (node) => {
      const app = createLayerNodeApp({node});
      const hidden = node.embed([2, 3]);
      assert.equal((await post(app, "/v1/sessions/a/forward?start_pos=0", hidden)).status, 200);
      assert.equal((await post(app, "/v1/sessions/b/forward?start_pos=0", hidden)).status, 200);
      const gone = await post(app, "/v1/sessions/a/forward?start_pos=2", node.embed([5]));
      assert.equal(gone.status, 404);
      const {error} = await gone.json();
      assert.equal(error.code, "unknown_session");
      assert.equal(error.reason, "evicted");
      assert.match(error.message, /session "a" was evicted/);
    });
  });

  test("while loading: /readyz 503 with progress and /v1 503 not_ready; once loaded, 200", async () => {
    const state = new NodeState();
    const app = createLayerNodeApp({state});
    state.onProgress({bytes: 100, totalBytes: 400});
    const loading = await app.fetch(new Request("http://node/readyz"));
    assert.equal(loading.status, 503);
    assert.deepEqual(await loading.json(), {ready: false, progress: {bytes: 100, total_bytes: 400}});
    const info = await app.fetch(new Request("http://node/v1/info"));
    assert.equal(info.status, 503);
    assert.equal((await info.json()).error.code, "not_ready");
    await withTiny({}, async (node) => {
      state.loaded(node);
      assert.equal((await app.fetch(new Request("http://node/readyz"))).status, 200);
      const ready = await (await app.fetch(new Request("http://node/v1/info"))).json();
      assert.deepEqual([ready.layers, ready.n_embd, ready.has_embed, ready.has_head], [[0, 2], node.nEmbd, true, true]);
    });
  });

  test("serve(): Prometheus metrics, request logs by route template, no secret in any log line", async () => {
    const lines = [];
    const token = "metrics-secret-token";
    const served = await serve({model: tiny(), threads: 1, port: 0, host: "127.0.0.1", authToken: token,
      log: (severity, message, fields) => lines.push(JSON.stringify({severity, message, ...fields}))});
    try {
      const node = await served.loaded;
      const auth = {authorization: `Bearer ${token}`};
      const hidden = node.embed([2, 3, 4]);
      const ok = await fetch(`${served.url}/v1/sessions/chat-42/forward?start_pos=0`, {method: "POST", headers: {...OCTETS, ...auth}, body: hidden});
      assert.equal(ok.status, 200);
      assert.equal((await fetch(`${served.url}/v1/info`)).status, 401);
      const text = await (await fetch(`${served.url}/metrics`, {headers: auth})).text();
      assert.match(text, /^layerfold_tokens_processed_total 3$/m);
      assert.match(text, /^layerfold_layer_duration_seconds_count\{layer="0"\} 1$/m);
      assert.match(text, /^layerfold_layer_duration_seconds_count\{layer="1"\} 1$/m);
      assert.match(text, /^layerfold_sessions 1$/m);
      assert.match(text, new RegExp(`^layerfold_kv_cache_bytes ${node.sessionBytes("chat-42")}$`, "m"));
      assert.match(text, /^layerfold_errors_total\{code="unauthorized"\} 1$/m);
      assert.match(text, /^layerfold_ready 1$/m);
      assert.match(text, /^layerfold_http_request_duration_seconds_count\{method="POST",route="\/v1\/sessions\/:id\/forward",status="200"\} 1$/m);
      const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.message === "request");
      assert.ok(requests.some((l) => l.route === "/v1/sessions/:id/forward" && l.status === 200));
      assert.equal(lines.some((l) => l.includes("chat-42")), false, "a raw session id reached the log");
    } finally {
      assert.equal(await served.shutdown(), 0);
    }
    assert.equal(lines.some((l) => l.includes(token)), false, "the token reached a log line");
    assert.ok(lines.some((l) => l.includes("\"authToken\":\"[redacted]\"")));
  });
});
