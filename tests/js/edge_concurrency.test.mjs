// The edge worker under concurrent sessions, in workerd (miniflare): layers 3-5 of the small
// model, the last node of a pipeline, as `generate` with several prompts drives it. Eight
// sessions' forwards and logits at once answer the bytes each session gets alone, round after
// round; clients that abort mid-way (during the upload, while waiting, while reading the answer)
// leave the node answering single and concurrent requests, with every place in its queue back.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {bundleEdgeWorker} from "../../js-glue/edge/bundle.js";
import {LayerNode} from "../../js-glue/src/node/layer_node.js";
import {model} from "./models.mjs";
import {bytesOf, forward} from "./server_process.mjs";
import {startWorkerd} from "./workerd.mjs";

const small = () => model("small", "small");
const LAYERS = [3, 6];
const N_EMBD = 256;
const SESSIONS = 8;
const DECODE_STEPS = 3;
// Every request of the test is bounded: a node that stops answering fails the test, not hangs it.
const REQUEST_MS = 30_000;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-edge-conc-"));
let workerDir;

before(async () => {
  workerDir = path.join(tmp, "worker");
  await bundleEdgeWorker(workerDir);
});
after(() => fs.rmSync(tmp, {recursive: true, force: true}));

// The hidden states a session sends at each call: a prompt of 2 + i rows, then single rows.
function sessionInputs(i) {
  const rows = [2 + i, ...Array(DECODE_STEPS).fill(1)];
  return rows.map((n, call) => Float32Array.from({length: n * N_EMBD}, (_, k) => Math.sin((i + 1) * 1.7 + call * 0.91 + k * 0.013)));
}

// What each session gets alone, from an in-process node of the same layers: per call, the
// hidden states out and the logits of their last row.
async function aloneAnswers() {
  const node = await LayerNode.open({model: small(), layers: LAYERS, build: "single"});
  try {
    const answers = [];
    for (let i = 0; i < SESSIONS; i++) {
      let startPos = 0;
      const calls = [];
      for (const hidden of sessionInputs(i)) {
        const out = await node.forward({session: `alone-${i}`, startPos, hidden});
        startPos += hidden.length / N_EMBD;
        calls.push({out: bytesOf(out), logits: bytesOf(node.logits(out.subarray(out.length - N_EMBD)))});
      }
      answers.push(calls);
    }
    return answers;
  } finally {
    node.close();
  }
}

const octets = {"content-type": "application/octet-stream"};
const timeout = () => AbortSignal.timeout(REQUEST_MS);

async function logits(url, hidden, signal = timeout()) {
  const response = await fetch(`${url}/v1/logits`, {method: "POST", headers: octets, body: bytesOf(hidden), signal});
  return {status: response.status, bytes: Buffer.from(await response.arrayBuffer())};
}

// One session through the node: each forward, then the logits of its output's last row.
async function runSession(url, session, inputs) {
  const got = [];
  let startPos = 0;
  for (const hidden of inputs) {
    const r = await forward(url, {session, startPos, hidden, signal: timeout()});
    assert.equal(r.status, 200, `${session} forward at ${startPos}: ${JSON.stringify(r.error)}`);
    startPos += hidden.length / N_EMBD;
    assert.equal(r.headers.get("x-layerfold-n-past"), String(startPos));
    const last = new Float32Array(r.bytes.buffer.slice(r.bytes.byteOffset + r.bytes.length - N_EMBD * 4, r.bytes.byteOffset + r.bytes.length));
    const l = await logits(url, last);
    assert.equal(l.status, 200, `${session} logits at ${startPos}: ${l.bytes.toString().slice(0, 300)}`);
    got.push({out: r.bytes, logits: l.bytes});
  }
  return got;
}

async function edgeNode(t, bindings = {}) {
  const mf = await startWorkerd(t, workerDir, {bindings: {MODEL_KEY: "small.gguf", LAYERS: "3-5", ...bindings}, objects: {"small.gguf": small()}});
  return String(await mf.ready).replace(/\/$/, "");
}

describe("edge node: concurrent sessions in workerd", () => {
  test("8 sessions' forwards and logits at once give each session's bytes alone, in every one of 4 rounds", async (t) => {
    const url = await edgeNode(t);
    const alone = await aloneAnswers();
    for (let round = 0; round < 4; round++) {
      const got = await Promise.all(alone.map((_, i) => runSession(url, `r${round}-s${i}`, sessionInputs(i))));
      got.forEach((calls, i) => calls.forEach(({out, logits: l}, c) => {
        assert.ok(out.equals(alone[i][c].out), `round ${round}, session ${i}, call ${c}: hidden states differ from the session alone`);
        assert.ok(l.equals(alone[i][c].logits), `round ${round}, session ${i}, call ${c}: logits differ from the session alone`);
      }));
    }
  });

  test("clients that abort mid-way give their places in the queue back; the node answers single and concurrent requests after", async (t) => {
    const maxQueue = 3;  // four requests admitted at once
    const url = await edgeNode(t, {MAX_QUEUE: String(maxQueue)});
    const alone = await aloneAnswers();
    const prompt = (i) => sessionInputs(i)[0];

    // Mid-upload: the body's first half, then the client goes away.
    const upload = new AbortController();
    const half = bytesOf(prompt(0)).subarray(0, N_EMBD * 2);
    const uploading = fetch(`${url}/v1/sessions/cut-upload/forward?start_pos=0`, {
      method: "POST", headers: octets, duplex: "half", signal: upload.signal,
      body: new ReadableStream({start: (c) => c.enqueue(half)}),
    }).catch((error) => error);
    // While waiting behind others: two prompts and a long logits answer, aborted at once.
    const waiting = new AbortController();
    const waiters = [1, 2].map((i) => forward(url, {session: `cut-wait-${i}`, startPos: 0, hidden: prompt(i), signal: waiting.signal}).catch((error) => error));
    // Mid-answer: 200 rows of logits (1.6 MB, streamed), of which the client reads one chunk.
    const reading = new AbortController();
    const long = await fetch(`${url}/v1/logits`, {method: "POST", headers: octets, signal: reading.signal,
      body: bytesOf(Float32Array.from({length: 200 * N_EMBD}, (_, k) => Math.cos(k * 0.01)))});
    assert.equal(long.status, 200);
    const reader = long.body.getReader();
    assert.ok((await reader.read()).value.length > 0);
    waiting.abort();
    reading.abort();
    upload.abort();
    for (const r of [await uploading, ...(await Promise.all(waiters))]) assert.equal(r.name, "AbortError");

    // Every place back: as many requests at once as the queue admits are all answered. The
    // aborted requests finish on the node in their own time, so the check is repeated a bounded
    // number of times before it fails with what it got.
    let statuses = [];
    for (let attempt = 0; attempt < 50; attempt++) {
      const results = await Promise.all(Array.from({length: maxQueue + 1}, (_, i) =>
        forward(url, {session: `after-${attempt}-${i}`, startPos: 0, hidden: prompt(i), signal: timeout()})));
      statuses = results.map((r) => r.status);
      if (statuses.every((s) => s === 200)) {
        results.forEach((r, i) => assert.ok(r.bytes.equals(alone[i][0].out), `request ${i} after the aborts: bytes differ from the session alone`));
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(statuses, Array(maxQueue + 1).fill(200), "places in the queue were not given back after the aborted requests");

    // A single session from its start, and the aborted sessions continue from what the node holds.
    const single = await runSession(url, "single", sessionInputs(5));
    single.forEach(({out, logits: l}, c) => assert.ok(out.equals(alone[5][c].out) && l.equals(alone[5][c].logits), `single session, call ${c}`));
    for (const session of ["cut-upload", "cut-wait-1", "cut-wait-2"]) {
      const held = await fetch(`${url}/v1/sessions/${session}`, {signal: timeout()});
      const nPast = held.status === 200 ? (await held.json()).n_past : 0;
      if (held.status !== 200) assert.equal(held.status, 404);
      const r = await forward(url, {session, startPos: nPast, hidden: sessionInputs(6)[1], signal: timeout()});
      assert.equal(r.status, 200, `${session} at ${nPast}: ${JSON.stringify(r.error)}`);
    }
  });
});
