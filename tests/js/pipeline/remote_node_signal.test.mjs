// A caller's AbortSignal reaches every remote call of RemoteNode (the fetch, the read of the
// answer, the back-off after a 429, the wait for the node to be ready again) and a NodeShare's
// line, against a stand-in layer node over node:http on 127.0.0.1 that hangs, throttles, resets
// connections or answers garbage; and the gateway's error mapping of a node's failures.
import assert from "node:assert/strict";
import http from "node:http";
import {describe, test} from "node:test";

import {toOpenAIError} from "../../../js-glue/src/generation/errors.js";
import {NodeShare} from "../../../js-glue/src/pipeline/node_share.js";
import {RemoteNode} from "../../../js-glue/src/pipeline/remote_node.js";
import {LayerfoldError} from "../../../js-glue/src/wasm/capi.js";

const INFO = {layers: [1, 2], n_layer: 2, n_embd: 8, n_vocab: 16, has_embed: false, has_head: true, kv_rows_in: [], kv_rows_out: []};
const ABORT_MS = 300;
// What "at once" allows on a loaded machine: the abort plus a generous second.
const PROMPT_MS = ABORT_MS + 1000;

// A stand-in node: /readyz and /v1/info answer (/readyz 503 while "loading"); /v1/logits does what `mode` says.
async function fakeNode(t) {
  const node = {mode: "hang", logitsCalls: 0};
  const server = http.createServer((req, res) => {
    if (node.mode === "reset" && req.url !== "/v1/info") return req.socket.destroy();
    if (req.url === "/readyz") return res.writeHead(node.mode === "503" ? 503 : 200).end("{}");
    if (req.url === "/v1/info") return res.writeHead(200, {"content-type": "application/json"}).end(JSON.stringify(INFO));
    node.logitsCalls++;
    if (node.mode === "429") return res.writeHead(429, {"retry-after": "30", "content-type": "application/json"}).end('{"error":{"code":"queue_full","message":"busy"}}');
    if (node.mode === "503") return res.writeHead(503).end("loading");
    if (node.mode === "slow-body") return res.writeHead(200, {"content-length": String(4 * 16)}).write(Buffer.alloc(8));
    // hang: nothing at all
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(resolve);
  }));
  node.url = `http://127.0.0.1:${server.address().port}`;
  return node;
}

// The call's outcome and how long it took, bounded so that a call that ignores its signal fails the test.
async function timed(promise) {
  const t0 = performance.now();
  const bound = new Promise((resolve) => setTimeout(() => resolve({error: new Error("still waiting after 5 s")}), 5000).unref());
  const outcome = await Promise.race([promise.then((value) => ({value}), (error) => ({error})), bound]);
  return {...outcome, ms: performance.now() - t0};
}

describe("a remote call under a signal", () => {
  for (const mode of ["hang", "429", "503", "reset", "slow-body"]) {
    test(`a node that ${mode === "hang" ? "never answers" : mode === "reset" ? "resets every connection" : mode === "slow-body" ? "stops mid-answer" : mode === "503" ? "is loading (503)" : "is busy (429, Retry-After: 30)"}: the call ends when the signal fires, with its reason`, async (t) => {
      const fake = await fakeNode(t);
      fake.mode = "ok";
      const node = await RemoteNode.open(fake.url, {readyTimeoutMs: 60_000});
      fake.mode = mode;
      const controller = new AbortController();
      const reason = new Error("the request's deadline passed");
      setTimeout(() => controller.abort(reason), ABORT_MS);
      const {error, ms} = await timed(node.logits(new Float32Array(8), {signal: controller.signal}));
      assert.equal(error, reason, `ended with ${error?.message}`);
      assert.ok(ms < PROMPT_MS, `ended after ${ms.toFixed(0)} ms`);
    });
  }

  test("a call whose signal already fired makes no request", async (t) => {
    const fake = await fakeNode(t);
    const node = await RemoteNode.open(fake.url);
    const reason = new Error("gone");
    await assert.rejects(node.logits(new Float32Array(8), {signal: AbortSignal.abort(reason)}), (error) => error === reason);
    assert.equal(fake.logitsCalls, 0);
  });

  test("a node whose /v1/info gives no sizes is refused at open", async (t) => {
    const server = http.createServer((req, res) => res.end(req.url === "/v1/info" ? JSON.stringify({...INFO, n_vocab: -1}) : "{}"));
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    t.after(() => new Promise((resolve) => server.close(resolve)));
    await assert.rejects(RemoteNode.open(`http://127.0.0.1:${server.address().port}`),
      (error) => error.code === "bad_response" && /n_vocab is -1, not a positive integer/.test(error.message));
  });

  test("a call waiting for its share of a node leaves the line when its signal fires", async () => {
    const share = new NodeShare(() => 1);
    let release;
    const first = share.run(() => new Promise((resolve) => { release = resolve; }));
    const controller = new AbortController();
    const reason = new Error("deadline");
    let ran = false;
    const waiting = share.run(() => { ran = true; }, controller.signal);
    controller.abort(reason);
    await assert.rejects(waiting, (error) => error === reason);
    release();
    await first;
    // The line is free: the next call runs at once, the aborted one never did.
    await share.run(() => {});
    assert.equal(ran, false);
  });
});

describe("a node's failure as the gateway answers it", () => {
  test("a refused answer, an unreachable node, a node's HTTP error: 502; a local engine error: 500", () => {
    const cases = [
      [new LayerfoldError("bad_response", "node 1 (http://10.0.0.8:8080, layers 1-1): POST /v1/logits: value NaN at row 0, column 3 is not finite"), 502, "bad_node_answer"],
      [new LayerfoldError("unavailable", "node 1 (http://10.0.0.8:8080, layers 1-1): POST /v1/logits failed twice: ECONNREFUSED"), 502, "node_unavailable"],
      [Object.assign(new LayerfoldError("internal", "node 1 (http://10.0.0.8:8080, layers 1-1): POST /v1/logits: HTTP 500 boom"), {status: 500}), 502, "node_error"],
      [new LayerfoldError("internal", "node 0 (local, layers 0-0): out of memory"), 500, "pipeline_error"],
    ];
    for (const [error, status, code] of cases) {
      const reply = toOpenAIError(error);
      assert.equal(reply.status, status, error.message);
      assert.equal(reply.code, code);
      assert.equal(reply.type, "server_error");
      assert.match(reply.message, /node \d \((http:\/\/10\.0\.0\.8:8080|local), layers/);
    }
  });
});
