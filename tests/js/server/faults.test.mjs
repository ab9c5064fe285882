// The layer-node server under faults, on loopback: hostile and malformed requests (each with its
// status and code, and the session's cache untouched), a node killed mid-request, a restarted
// node, requests while the weights load, and SIGTERM with a request in flight.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {runHostileTable} from "../support/hostile_requests.mjs";
import {model} from "../support/models.mjs";
import {bytesOf, forward, startServer, waitReady} from "../support/server_process.mjs";

const TOKEN = "test-token-4f9a";
const file = () => model("tiny-gemma3", "tiny-gemma3");
const N_EMBD = 64;

// Deterministic hidden states [n, N_EMBD] for a node that does not embed.
function hiddenRows(n, seed) {
  return Float32Array.from({length: n * N_EMBD}, (_, i) => Math.sin(seed * 7.1 + i * 0.37));
}

async function withReference(layers, fn) {
  const node = await LayerNode.open({model: file(), layers, threads: 1});
  try {
    return await fn(node);
  } finally {
    node.close();
  }
}

// POST with a body whose second half is sent only when the test says so: a request that is
// certainly in flight. Resolves {response: Promise<{status, bytes}>, finish()}.
function heldRequest(url, path, body) {
  const half = Math.floor(body.length / 2);
  const request = http.request(`${url}${path}`, {
    method: "POST",
    headers: {"content-type": "application/octet-stream", "content-length": body.length, authorization: `Bearer ${TOKEN}`},
  });
  const response = new Promise((resolve, reject) => {
    request.on("response", (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({status: res.statusCode, bytes: Buffer.concat(chunks)}));
      res.on("error", reject);
    });
    request.on("error", reject);
  });
  response.catch(() => {});  // the test asserts on it later; a rejection before then is expected
  request.write(body.subarray(0, half));
  return {response, finish: () => request.end(body.subarray(half))};
}

// Waits until the server serves at least `n` requests besides the /metrics scrape asking.
async function inFlight(url, n) {
  for (let i = 0; i < 500; i++) {
    const text = await (await fetch(`${url}/metrics`, {headers: {authorization: `Bearer ${TOKEN}`}})).text();
    if (Number(/^layerfold_http_requests_in_flight (\d+)/m.exec(text)?.[1]) > n) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`${url} never had ${n} request(s) in flight`);
}

describe("layer-node server under faults", () => {
  test("hostile requests: each gets its status and code, and the session's cache stays as it was", async (t) => {
    const server = await startServer(t, {args: ["--model", file(), "--layers", "1-1", "--max-tokens", "64"], env: {AUTH_TOKEN: TOKEN}});
    await waitReady(server.url);
    await withReference([1, 2], async (reference) => {
      let step = 0;
      // The good request after each hostile one: the next row of the session, byte for byte what
      // an undisturbed in-process node gives.
      const good = async ({nPast}) => {
        const hidden = hiddenRows(nPast === 0 ? 3 : 1, ++step);
        const expected = bytesOf(await reference.forward({session: "h", startPos: nPast, hidden}));
        const r = await forward(server.url, {session: "h", startPos: nPast, hidden, token: TOKEN});
        assert.equal(r.status, 200, JSON.stringify(r.error));
        assert.ok(r.bytes.equals(expected), `forward at ${nPast} differs from the in-process run`);
        assert.equal(r.headers.get("x-layerfold-n-past"), String(nPast + hidden.length / N_EMBD));
        return nPast + hidden.length / N_EMBD;
      };
      const nPast = await good({nPast: 0});
      const results = await runHostileTable(server.url, {token: TOKEN, session: "h", nPast, afterEach: good});
      assert.ok(results.length >= 50);
      for (const r of results) {
        assert.ok(r.pass, `${r.name}: expected ${JSON.stringify(r.expected)}, got ${JSON.stringify(r.actual)}`);
        assert.equal(r.sessionNPast, r.nPastBefore, `${r.name}: the session moved`);
        if (r.expected.code === "position_mismatch") assert.equal(r.errorNPast, r.nPastBefore, `${r.name}: n_past in the error`);
      }
      // A refused forward for an unknown session created nothing, a refused start of a new one neither.
      for (const id of ["never-seen", "never-created"]) {
        const probe = await fetch(`${server.url}/v1/sessions/${id}`, {headers: {authorization: `Bearer ${TOKEN}`}});
        assert.equal(probe.status, 404, id);
      }
      const info = await (await fetch(`${server.url}/v1/info`, {headers: {authorization: `Bearer ${TOKEN}`}})).json();
      assert.equal(info.sessions, 1, "a refused request left a session behind");
    });
    assert.equal(server.logs.some((l) => JSON.stringify(l).includes(TOKEN)), false, "the token reached a log line");
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
  });

  test("a node killed mid-request: the client's request fails; the restarted node answers 404 unknown_session, then starts over", async (t) => {
    const args = ["--model", file(), "--layers", "1-1"];
    const env = {AUTH_TOKEN: TOKEN};
    const first = await startServer(t, {args, env});
    await waitReady(first.url);
    const prompt = hiddenRows(4, 1);
    const started = await forward(first.url, {session: "s", startPos: 0, hidden: prompt, token: TOKEN});
    assert.equal(started.status, 200);

    const held = heldRequest(first.url, "/v1/sessions/s/forward?start_pos=4", bytesOf(hiddenRows(1, 2)));
    await inFlight(first.url, 1);
    assert.equal((await first.stop("SIGKILL")).signal, "SIGKILL");
    await assert.rejects(held.response, (e) => ["ECONNRESET", "ECONNREFUSED", "EPIPE"].includes(e.code) || /socket hang up/.test(e.message));
    await assert.rejects(fetch(`${first.url}/healthz`), (e) => e.cause?.code === "ECONNREFUSED");

    const second = await startServer(t, {args, env});
    await waitReady(second.url);
    const lost = await forward(second.url, {session: "s", startPos: 4, hidden: hiddenRows(1, 2), token: TOKEN});
    assert.equal(lost.status, 404);
    assert.equal(lost.error.code, "unknown_session");
    assert.match(lost.error.message, /session "s" is unknown.*restart/);
    const again = await forward(second.url, {session: "s", startPos: 0, hidden: prompt, token: TOKEN});
    assert.equal(again.status, 200);
    assert.ok(again.bytes.equals(started.bytes), "the rebuilt session differs from the first run");
    await second.stop();
  });

  test("while the weights load: /healthz 200, /readyz 503 with progress, /v1 503 not_ready; then 200", async (t) => {
    // The model over HTTP from a server that holds every answer until the test opens the gate.
    const bytes = fs.readFileSync(file());
    let open;
    const gate = new Promise((resolve) => { open = resolve; });
    const origin = http.createServer(async (req, res) => {
      await gate;
      const m = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
      const start = m ? Number(m[1]) : 0;
      const end = m && m[2] ? Math.min(Number(m[2]), bytes.length - 1) : bytes.length - 1;
      res.writeHead(m ? 206 : 200, {"content-length": end - start + 1, "accept-ranges": "bytes", "etag": "\"tiny\"",
        ...(m ? {"content-range": `bytes ${start}-${end}/${bytes.length}`} : {})});
      res.end(req.method === "HEAD" ? undefined : bytes.subarray(start, end + 1));
    });
    await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
    t.after(() => origin.close());
    const server = await startServer(t, {args: ["--layers", "1-1"], env: {AUTH_TOKEN: TOKEN, MODEL_URL: `http://127.0.0.1:${origin.address().port}/tiny.gguf`}});

    assert.deepEqual(await (await fetch(`${server.url}/healthz`)).json(), {ok: true});
    const loading = await fetch(`${server.url}/readyz`);
    assert.equal(loading.status, 503);
    const body = await loading.json();
    assert.equal(body.ready, false);
    assert.ok(Number.isInteger(body.progress.bytes) && Number.isInteger(body.progress.total_bytes));
    const early = await forward(server.url, {session: "s", startPos: 0, hidden: hiddenRows(2, 1), token: TOKEN});
    assert.equal(early.status, 503);
    assert.equal(early.error.code, "not_ready");

    open();
    await waitReady(server.url);
    const expected = await withReference([1, 2], (node) => node.forward({session: "s", startPos: 0, hidden: hiddenRows(2, 1)}));
    const ready = await forward(server.url, {session: "s", startPos: 0, hidden: hiddenRows(2, 1), token: TOKEN});
    assert.equal(ready.status, 200);
    assert.ok(ready.bytes.equals(bytesOf(expected)));
    await server.stop();
  });

  test("SIGTERM with a request in flight: not ready, new connections refused, the request completes, exit 0", async (t) => {
    const server = await startServer(t, {args: ["--model", file(), "--layers", "1-1"], env: {AUTH_TOKEN: TOKEN}});
    await waitReady(server.url);
    const hidden = hiddenRows(3, 5);
    const held = heldRequest(server.url, "/v1/sessions/t/forward?start_pos=0", bytesOf(hidden));
    await inFlight(server.url, 1);
    server.child.kill("SIGTERM");
    let refused = false;
    for (let i = 0; i < 200 && !refused; i++) {
      try {
        await (await fetch(`${server.url}/healthz`)).text();
        await new Promise((resolve) => setTimeout(resolve, 20));
      } catch (error) {
        refused = error.cause?.code === "ECONNREFUSED";
      }
    }
    assert.ok(refused, "new connections were still accepted after SIGTERM");
    held.finish();
    const response = await held.response;
    assert.equal(response.status, 200);
    const expected = await withReference([1, 2], (node) => node.forward({session: "t", startPos: 0, hidden}));
    assert.ok(response.bytes.equals(bytesOf(expected)));
    assert.deepEqual(await server.exited, {code: 0, signal: null});
    assert.ok(server.logs.some((l) => l.message === "stopped" && l.abandoned === 0));
  });
});
