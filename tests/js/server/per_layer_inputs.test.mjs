// POST /v1/per-layer-inputs (docs/http-api.md): the node serving layer 0 of an E-model answers
// the per-layer inputs of rows that stand for no token, the bytes its own perLayerInputs gives
// them with the padding token, and refuses what the other routes refuse: another node, a model
// without per-layer embeddings, another content type, a body over its limit, of another length,
// or with a value that is not finite (named by row and column).
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {model} from "../support/models.mjs";

const eModel = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);  // 5 layers, n_embd_per_layer 32
const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const MAX_TOKENS = 4;

const bytes = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
// Rows of media-like values: not any token's embedding.
const rows = (n, nEmbd, seed = 1) => Float32Array.from({length: n * nEmbd}, (_, i) => Math.sin(seed * 12.9898 + i * 0.731) * 0.8);

function post(app, body, type = "application/octet-stream") {
  return app.fetch(new Request("http://node/v1/per-layer-inputs", {method: "POST", headers: {"content-type": type}, body}));
}

async function refusal(response) {
  return {status: response.status, ...(await response.json()).error};
}

async function withNode(file, layers, fn) {
  const node = await LayerNode.open({model: file, layers, threads: 1, build: "single"});
  try {
    return await fn(node, createLayerNodeApp({node, maxTokens: MAX_TOKENS}));
  } finally {
    node.close();
  }
}

describe("POST /v1/per-layer-inputs", () => {
  test("answers the first node's per-layer inputs of the rows with the padding token, byte for byte; other rows, other inputs", async () => {
    await withNode(eModel(), [0, 2], async (node, app) => {
      for (const n of [1, 3, MAX_TOKENS]) {
        const media = rows(n, node.nEmbd, n);
        const response = await post(app, bytes(media));
        assert.equal(response.status, 200);
        assert.equal(response.headers.get("content-type"), "application/octet-stream");
        const got = Buffer.from(await response.arrayBuffer());
        assert.equal(got.length, node.nLayer * n * node.nEmbdPerLayer * 4);
        assert.ok(got.equals(bytes(await node.perLayerInputs(new Array(n).fill(0), media))), `${n} rows`);
        // Computed from the rows, not from token 0's embedding alone.
        const ofToken0 = await node.perLayerInputs(new Array(n).fill(0), node.embed(new Array(n).fill(0)));
        assert.ok(!got.equals(bytes(ofToken0)), "the rows' own projection is in the answer");
      }
      assert.equal(node.info().sessions, 0, "no session is touched");
    });
  });

  test("refusals name the problem", async () => {
    await withNode(eModel(), [0, 2], async (node, app) => {
      const e = node.nEmbd;
      const nan = rows(2, e);
      nan[e + 3] = NaN;
      const inf = rows(1, e);
      inf[5] = -Infinity;
      for (const [what, body, type, status, code, message] of [
        ["JSON", JSON.stringify({tokens: [0]}), "application/json", 415, "bad_content_type", /expected application\/octet-stream/],
        ["an empty body", new Uint8Array(0), undefined, 400, "bad_length", /body of 0 bytes: expected a positive multiple of 4 · n_embd = 256 bytes/],
        ["a row and a half", bytes(rows(2, e)).subarray(0, 6 * e), undefined, 400, "bad_length", /body of 384 bytes/],
        ["a NaN", bytes(nan), undefined, 400, "not_finite", /value NaN at row 1, column 3: hidden states must be finite/],
        ["an infinity", bytes(inf), undefined, 400, "not_finite", /value -Infinity at row 0, column 5/],
        ["max_tokens + 1 rows", bytes(rows(MAX_TOKENS + 1, e)), undefined, 413, "too_large", /max_tokens 4 rows of n_embd 64 float32/],
      ]) {
        const r = await refusal(await post(app, body, type));
        assert.deepEqual([r.status, r.code], [status, code], `${what}: ${r.message}`);
        assert.match(r.message, message, what);
      }
      const get = await app.fetch(new Request("http://node/v1/per-layer-inputs"));
      assert.deepEqual([get.status, get.headers.get("allow")], [405, "POST"]);
    });
    await withNode(eModel(), [2, 5], async (node, app) => {
      const r = await refusal(await post(app, bytes(rows(1, node.nEmbd))));
      assert.deepEqual([r.status, r.code], [404, "not_found"]);
      assert.match(r.message, /this node serves layers 2-4: per-layer inputs are computed on the node serving layer 0/);
    });
    await withNode(tiny(), [0, 2], async (node, app) => {
      const r = await refusal(await post(app, bytes(rows(1, node.nEmbd))));
      assert.deepEqual([r.status, r.code], [400, "bad_parameter"]);
      assert.match(r.message, /this model has no per-layer embeddings \(n_embd_per_layer 0\)/);
    });
  });
});
