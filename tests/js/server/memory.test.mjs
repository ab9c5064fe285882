// What one request can make a layer node hold (docs/http-api.md, "Limits"): logits bounded per
// request and computed a few rows at a time, answers streamed as the client reads them and cut
// off when it stops, bodies read only once the queue admitted the request and under a deadline,
// Node's own timeouts set on purpose.
import assert from "node:assert/strict";
import net from "node:net";
import {describe, test} from "node:test";

import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {serve} from "../../../js-glue/src/server/node_host.js";
import {logSoftmax, topK} from "../../../js-glue/src/tokens/logits.js";
import {model} from "../support/models.mjs";
import {startServer, waitReady} from "../support/server_process.mjs";

const OCTETS = {"content-type": "application/octet-stream"};
const TOKEN = "memory-token-1";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The head node of a model with the real Gemma vocabulary (262144 tokens, 1 MiB of logits per
// row) and n_embd 4: row r's logits are 0 but for id r (1 + the row's first value). It refuses
// to compute more than 4 rows in one call, the chunk the node is meant to work in.
function headNode({nVocab = 262144, maxRowsPerCall = 4} = {}) {
  const calls = [];
  return {
    nEmbd: 4, nVocab, nLayer: 1, layers: [0, 1], withEmbedding: false, withHead: true, maxSessions: 8, maxContext: 16, metadata: {}, modelInfo: {},
    calls,
    logits(hidden) {
      const rows = hidden.length / 4;
      calls.push(rows);
      if (rows > maxRowsPerCall) throw new Error(`asked for the logits of ${rows} rows in one call (${rows} MiB)`);
      const out = new Float32Array(rows * nVocab);
      for (let r = 0; r < rows; r++) out[r * nVocab + ((calls.length - 1) * maxRowsPerCall + r) % nVocab] = 1 + hidden[r * 4];
      return out;
    },
    async logitsAsync(hidden) {
      return this.logits(hidden);
    },
    info: () => ({model: "head.gguf", build: "single", threads: 1, sessions: 0, kvBytes: 0, wasmMemoryBytes: 0}),
    sessionLength: () => null,
  };
}

const rows = (n, fill = 0.5) => new Float32Array(n * 4).fill(fill);
const post = (app, path, body, headers = {}) => app.fetch(new Request(`http://node${path}`, {method: "POST", headers: {...OCTETS, ...headers}, body, duplex: "half"}));

// A node whose forwards finish only when the test releases them.
function heldNode() {
  const releases = [];
  return {
    nEmbd: 4, nVocab: 8, nLayer: 1, layers: [0, 1], withEmbedding: false, withHead: false, maxSessions: 8, maxContext: 64, metadata: {}, modelInfo: {},
    forward: ({hidden}) => new Promise((resolve) => releases.push(() => resolve(hidden))),
    sessionLength: () => null,
    layerTimings: () => [1],
    release: () => releases.splice(0).forEach((r) => r()),
  };
}

// A request body that sends `first` bytes and then nothing, counting the pulls made on it.
function stalledBody(first) {
  const body = {pulls: 0};
  body.stream = new ReadableStream({
    pull(controller) {
      body.pulls++;
      if (body.pulls === 1 && first > 0) controller.enqueue(new Uint8Array(first));
      return new Promise(() => {});  // never more
    },
  }, {highWaterMark: 0});
  return body;
}

// A raw HTTP/1.1 client: writes `head` (and `body`), reads the answer, pausing for pauseMs once
// readLimit bytes are in (a client that stops reading), and resolves {status, text, bytes,
// closedAt} once the server has closed the connection or timeoutMs passes.
function rawClient(url, head, {body = null, readLimit = Infinity, pauseMs = 0, timeoutMs = 10_000} = {}) {
  const {port} = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), "127.0.0.1");
    let data = Buffer.alloc(0);
    const t0 = Date.now();
    const done = (closed) => {
      clearTimeout(timer);
      socket.destroy();
      const text = data.toString("latin1");
      resolve({status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text, bytes: data.length, closedAt: closed ? Date.now() - t0 : null});
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on("connect", () => {
      socket.write(head);
      if (body) socket.write(body);
    });
    socket.on("data", (chunk) => {
      data = Buffer.concat([data, chunk]);
      if (data.length >= readLimit && readLimit !== Infinity) {
        readLimit = Infinity;
        socket.pause();
        setTimeout(() => socket.resume(), pauseMs);
      }
    });
    socket.on("close", () => done(true));
    socket.on("error", () => {});
  });
}

const requestHead = (method, path, headers) => `${[`${method} ${path} HTTP/1.1`, "Host: node",
  ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)].join("\r\n")}\r\n\r\n`;

describe("logits: bounded per request, computed and sent in chunks", () => {
  test("2048 rows of a 262144-token vocabulary: 400 answer_too_large naming max_logits_bytes, the engine never asked", async () => {
    const node = headNode();
    const app = createLayerNodeApp({node});
    const r = await post(app, "/v1/logits", rows(2048));
    assert.equal(r.status, 400);
    const {error} = await r.json();
    assert.equal(error.code, "answer_too_large");
    assert.match(error.message, /2048 rows × n_vocab 262144 × 4 = 2147483648 bytes exceed the node's max_logits_bytes 67108864: send at most 64 rows/);
    assert.deepEqual(node.calls, []);
    const info = await (await app.fetch(new Request("http://node/v1/info"))).json();
    assert.equal(info.max_logits_bytes, 64 * 1024 * 1024);
  });

  test("top_k=262144 over 16 rows: 400 answer_too_large (the JSON would be 293 MB); top_k=4096 over 16 is answered", async () => {
    const node = headNode();
    const app = createLayerNodeApp({node});
    const r = await post(app, "/v1/logits?top_k=262144", rows(16));
    assert.equal(r.status, 400);
    const {error} = await r.json();
    assert.equal(error.code, "answer_too_large");
    assert.match(error.message, /top_k 262144 over 16 rows is 4194304 entries, above the node's 65536 per request: ask at most top_k 4096/);
    assert.deepEqual(node.calls, []);
    const ok = await post(app, "/v1/logits?top_k=4096", rows(16));
    assert.equal(ok.status, 200);
    assert.equal((await ok.json()).rows.length, 16);
    assert.deepEqual(node.calls, [4, 4, 4, 4]);
  });

  test("64 rows (the limit): streamed 4 rows per engine call, each computed only when the client has read the one before", async () => {
    const node = headNode();
    const app = createLayerNodeApp({node});
    const hidden = Float32Array.from({length: 64 * 4}, (_, i) => i / 4);
    const r = await post(app, "/v1/logits", hidden);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-length"), String(64 * 262144 * 4));
    assert.deepEqual(node.calls, [4], "the first chunk is computed before the status is sent, and only it");
    const reader = r.body.getReader();
    const first = await reader.read();
    assert.equal(first.value.byteLength, 4 * 262144 * 4);
    await sleep(50);
    assert.equal(node.calls.length, 1, "a chunk was computed that nobody asked for yet");
    const chunks = [first.value];
    for (let step = await reader.read(); !step.done; step = await reader.read()) chunks.push(step.value);
    assert.deepEqual(node.calls, new Array(16).fill(4));
    const all = new Float32Array(Buffer.concat(chunks).buffer.slice(0));
    assert.equal(all.length, 64 * 262144);
    for (const row of [0, 5, 63]) assert.equal(all[row * 262144 + row], 1 + hidden[row * 4]);
  });

  test("top_k rows as tokens/logits.js ranks them: the same ids, logits and p, equal values by id", async () => {
    const node = headNode({nVocab: 1024, maxRowsPerCall: 1024});
    const app = createLayerNodeApp({node});
    const hidden = Float32Array.from({length: 3 * 4}, (_, i) => Math.sin(i));
    const r = await post(app, "/v1/logits?top_k=7", hidden);
    assert.equal(r.status, 200);
    const body = await r.json();
    const logits = headNode({nVocab: 1024, maxRowsPerCall: 1024}).logits(hidden);
    for (let row = 0; row < 3; row++) {
      const values = logits.subarray(row * 1024, (row + 1) * 1024);
      const logProbs = logSoftmax(values);
      assert.deepEqual(body.rows[row].top, topK(values, 7).map((id) => ({id, logit: values[id], p: Math.exp(logProbs[id])})));
    }
  });

  test("a client that stops reading a large answer is cut off after SEND_TIMEOUT_MS, and its place in the queue is free again", async (t) => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const server = await startServer(t, {
      args: ["--model", file, "--max-tokens", "8192", "--max-queue", "0", "--send-timeout-ms", "500"], env: {AUTH_TOKEN: TOKEN},
    });
    await waitReady(server.url);
    // 8192 rows of n_embd 64: logits of 32 MiB, more than the kernel's socket buffers hold.
    const body = Buffer.from(new Float32Array(8192 * 64).fill(0.1).buffer);
    const stalled = await rawClient(server.url, requestHead("POST", "/v1/logits", {
      Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/octet-stream", "Content-Length": body.length,
    }), {body, readLimit: 64 * 1024, pauseMs: 3000, timeoutMs: 20_000});
    assert.equal(stalled.status, 200);
    // Reading again after the pause, the client gets what the sockets held, then the end.
    assert.ok(stalled.closedAt !== null, `the node kept the connection of a client that read nothing for 3 s (${stalled.bytes} bytes)`);
    assert.ok(stalled.bytes < 32 * 1024 * 1024, `the whole answer arrived after all (${stalled.bytes} bytes)`);
    // With max-queue 0 only one request is admitted at a time: this one gets in, so the stalled one left.
    const next = await fetch(`${server.url}/v1/logits?top_k=1`, {method: "POST", headers: {...OCTETS, authorization: `Bearer ${TOKEN}`}, body: body.subarray(0, 256)});
    assert.equal(next.status, 200, await next.text());
    const lost = server.logs.find((l) => l.message === "answer not delivered");
    assert.equal(lost?.severity, "WARNING");
    assert.equal(lost.outcome, "stalled");
    assert.equal(server.logs.some((l) => l.severity === "ERROR"), false, JSON.stringify(server.logs.filter((l) => l.severity === "ERROR")));
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
    // The cut is a log line, not a stack trace printed beside the log by the HTTP adapter.
    assert.equal(server.stderr(), "");
  });
});

describe("request bodies: read once admitted, under a deadline", () => {
  test("beyond the queue: 429 before a byte of the body is read", async () => {
    const node = heldNode();
    const app = createLayerNodeApp({node, maxQueue: 0, bodyTimeoutMs: 1000});
    const uploading = stalledBody(8);
    const first = post(app, "/v1/sessions/a/forward?start_pos=0", uploading.stream);
    await sleep(20);
    assert.equal(uploading.pulls, 1, "the admitted request reads its body");
    const second = stalledBody(16);
    const refused = await post(app, "/v1/sessions/b/forward?start_pos=0", second.stream);
    assert.equal(refused.status, 429);
    assert.equal((await refused.json()).error.code, "queue_full");
    assert.equal(second.pulls, 0, "the refused request's body was read");
    first.catch(() => {});
  });

  test("a body that stalls: 408 body_timeout after bodyTimeoutMs, with Connection: close; the place is free again", async () => {
    const node = heldNode();
    const app = createLayerNodeApp({node, maxQueue: 0, bodyTimeoutMs: 200});
    const t0 = performance.now();
    const answer = await Promise.race([post(app, "/v1/sessions/a/forward?start_pos=0", stalledBody(8).stream), sleep(3000).then(() => null)]);
    assert.ok(answer, "no answer within 3 s to a body that stalls");
    assert.ok(performance.now() - t0 >= 190);
    assert.equal(answer.status, 408);
    assert.equal(answer.headers.get("connection"), "close");
    const {error} = await answer.json();
    assert.equal(error.code, "body_timeout");
    assert.match(error.message, /not received within 200 ms \(8 bytes arrived\)/);
    const next = post(app, "/v1/sessions/b/forward?start_pos=0", rows(1));
    await sleep(20);
    node.release();
    assert.equal((await next).status, 200);
  });

  test("over HTTP: a stalled upload gets its 408 as JSON; one beyond the queue gets 429 without sending its body", async (t) => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const server = await startServer(t, {args: ["--model", file, "--max-queue", "0", "--body-timeout-ms", "500"], env: {AUTH_TOKEN: TOKEN}});
    await waitReady(server.url);
    const headers = {Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/octet-stream", "Content-Length": String(64 * 4 * 10)};
    const slow = rawClient(server.url, requestHead("POST", "/v1/sessions/s/forward?start_pos=0", headers), {body: Buffer.alloc(256)});
    await sleep(100);
    const beyond = await rawClient(server.url, requestHead("POST", "/v1/sessions/t/forward?start_pos=0", headers), {timeoutMs: 3000});
    assert.equal(beyond.status, 429, beyond.text.slice(0, 200));
    const timedOut = await slow;
    assert.equal(timedOut.status, 408, timedOut.text.slice(0, 300));
    assert.match(timedOut.text, /"code":"body_timeout"/);
    const line = server.logs.find((l) => l.message === "request" && l.status === 408);
    assert.equal(line.severity, "WARNING");
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
  });

  test("Node's timeouts are set on purpose: headers within 20 s, the whole request within headers + body deadline + 10 s", async () => {
    const served = await serve({model: model("tiny", "tiny", ["--type", "Q4_0"]), threads: 1, port: 0, host: "127.0.0.1", bodyTimeoutMs: 5000, log: () => {}});
    try {
      await served.loaded;
      assert.equal(served.server.headersTimeout, 20_000);
      assert.equal(served.server.requestTimeout, 35_000);
      assert.equal(served.server.timeout, 0);
    } finally {
      await served.shutdown();
    }
  });
});
