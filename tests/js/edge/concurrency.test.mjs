// The edge worker under concurrent sessions, in workerd (miniflare): layers 3-5 of the small
// model, the last node of a pipeline, as `generate` with several prompts drives it. Eight
// sessions' forwards and logits at once answer the bytes each session gets alone, round after
// round; clients that abort mid-way (during the upload, while waiting, while reading the answer)
// leave the node answering single and concurrent requests, with every place in its queue back.
import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model, root} from "../support/models.mjs";
import {bytesOf, cli, forward} from "../support/server_process.mjs";
import {startWorkerd} from "../support/workerd.mjs";

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
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A forward whose body's first bytes are sent at once and the rest only on finish(): the node
// admits it and holds its place while it waits for the body.
function heldForward(url, session, hidden) {
  const bytes = bytesOf(hidden);
  let finish;
  const body = new ReadableStream({
    start(c) {
      c.enqueue(bytes.subarray(0, 8));
      finish = () => {
        c.enqueue(bytes.subarray(8));
        c.close();
      };
    },
  });
  const response = fetch(`${url}/v1/sessions/${session}/forward?start_pos=0`, {method: "POST", headers: octets, body, duplex: "half", signal: timeout()});
  response.catch(() => {});
  return {response, finish: () => finish()};
}

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

// `generate` with three prompts over `nodes`: a JSON object per prompt, in order. Killed after
// REQUEST_MS; a failure or a timeout fails the test with what it printed.
function generate(nodes) {
  const args = [cli, "generate", "--model", small(), "--nodes", nodes, "--max-tokens", "6", "--json",
    "--prompt", "The capital of France is", "--prompt", "Once upon a time", "--prompt", "One two three"];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {cwd: root});
    let out = "";
    let err = "";  // notes (the synthetic model's) and errors
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { err += d; });
    const timer = setTimeout(() => child.kill(), REQUEST_MS);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`generate --nodes ${nodes} ended with ${code ?? signal}: ${(err + out).slice(0, 2000)}`));
      else resolve(out.trim().split("\n").map((line) => JSON.parse(line)).filter((line) => "prompt" in line).map(({prompt, tokens}) => ({prompt, tokens})));
    });
  });
}

describe("edge node: concurrent sessions in workerd", () => {
  test("generate with three prompts through local layers 0-2 and an edge node of layers 3-5 gives the all-local tokens, three runs of three", async (t) => {
    const url = await edgeNode(t);
    const expected = await generate("local:0-2,local:3-5");
    assert.equal(expected.length, 3);
    for (let run = 0; run < 3; run++) assert.deepEqual(await generate(`local:0-2,${url}`), expected, `run ${run}`);
  });

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
    // Two prompts aborted as soon as the long logits request below is answered: each is cut while
    // waiting or running, or was answered just before (the node's steps take milliseconds).
    const waiting = new AbortController();
    const waiters = [1, 2].map((i) => forward(url, {session: `cut-wait-${i}`, startPos: 0, hidden: prompt(i), signal: waiting.signal}).catch((error) => error));
    // Mid-answer: 200 rows of logits (1.6 MB, streamed), of which the client reads one chunk
    // (workerd reads the rest out of the worker all the same).
    const reading = new AbortController();
    const long = await fetch(`${url}/v1/logits`, {method: "POST", headers: octets, signal: reading.signal,
      body: bytesOf(Float32Array.from({length: 200 * N_EMBD}, (_, k) => Math.cos(k * 0.01)))});
    assert.equal(long.status, 200);
    const reader = long.body.getReader();
    assert.ok((await reader.read()).value.length > 0);
    waiting.abort();
    reading.abort();
    upload.abort();
    assert.equal((await uploading).name, "AbortError");
    for (const r of await Promise.all(waiters)) assert.ok(r.name === "AbortError" || r.status === 200, `an aborted prompt got ${r.status ?? r.name}`);

    // Every place back: maxQueue + 1 uploads held open (their first bytes sent, the rest kept)
    // are all admitted, a request beyond them gets 429 counting exactly them, and once their
    // bodies are in they are answered. The aborted requests finish on the node in their own
    // time, so an attempt that met a place still taken is repeated, a bounded number of times.
    let seen = "no attempt";
    for (let attempt = 0; attempt < 30 && seen !== "ok"; attempt++) {
      const held = Array.from({length: maxQueue + 1}, (_, i) => heldForward(url, `after-${attempt}-${i}`, prompt(i)));
      const refusedEarly = await Promise.race([Promise.any(held.map((h) => h.response)).then(() => true, () => false), sleep(300).then(() => false)]);
      const beyond = refusedEarly ? null : await forward(url, {session: `beyond-${attempt}`, startPos: 0, hidden: prompt(0), signal: timeout()});
      for (const h of held) h.finish();
      const results = await Promise.all(held.map(async (h) => {
        const r = await h.response;
        return {status: r.status, bytes: Buffer.from(await r.arrayBuffer())};
      }));
      seen = `held uploads ${results.map((r) => r.status)}, the request beyond them ${beyond ? `${beyond.status} ${beyond.error?.message}` : "not sent"}`;
      if (beyond?.status === 429 && results.every((r) => r.status === 200)) {
        assert.match(beyond.error.message, new RegExp(`^${maxQueue + 1} requests are already in this node`));
        results.forEach((r, i) => assert.ok(r.bytes.equals(alone[i][0].out), `held upload ${i}: bytes differ from the session alone`));
        seen = "ok";
      } else {
        await sleep(100);
      }
    }
    assert.equal(seen, "ok", "places in the queue were not given back after the aborted requests");

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
