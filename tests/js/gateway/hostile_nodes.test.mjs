// The gateway trusts no node's answer: a proxy in front of real `layerfold serve` nodes
// (hostile_proxy.mjs) spoils their answers (NaN, Inf and huge values in logits and hidden
// states, a truncated body, a body inflated to 600 MiB with and without Content-Length, an
// answer held past the deadline), through a pipeline of a local and a remote node and through
// one of remote nodes only. Every case answers a 502-class OpenAI error naming the node (or, in
// a stream, an error event and the end), promptly, without the gateway's memory growing by the
// inflated size, and the next good request gets the reference text. Then a dead or hanging node
// under requests with a short deadline: each ends within its deadline + 1 s, and the line is
// free again afterwards (no 429).
import assert from "node:assert/strict";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {greedy, handChatPrompt, startGateway, tiny} from "../support/gateway_fixture.mjs";
import {startHostileProxy} from "../support/hostile_proxy.mjs";
import {root} from "../support/models.mjs";
import {startServer} from "../support/server_process.mjs";

const {Miniflare} = createRequire(path.join(root, "js-glue", "package.json"))("miniflare");

const DEADLINE_MS = 4000;
const NODE_TOKEN = "node-secret-4f1c";
const hello = [{role: "user", content: "hello"}];
const MAX_TOKENS = 4;
const INFLATED_BYTES = 600 * 1024 * 1024;

// path: the node calls spoiled; status and code: the error expected.
const spoiled = (action, path) => ({action, path, status: 502, code: "bad_node_answer"});
const CASES = {
  "NaN in the logits": spoiled("nan", /^\/v1\/logits/),
  "Inf in the hidden states": spoiled("inf", /\/forward/),
  "a huge finite value in the logits": spoiled("huge", /^\/v1\/logits/),
  "a huge finite value in the hidden states": spoiled("huge", /\/forward/),
  "truncated logits": spoiled("truncate", /^\/v1\/logits/),
  "hidden states inflated to 600 MiB, with Content-Length": {...spoiled("inflate", /\/forward/), inflated: true},
  "logits inflated to 600 MiB, without Content-Length": {...spoiled("inflate-chunked", /^\/v1\/logits/), inflated: true},
  "an answer held past the deadline": {action: "hold", path: /^\/v1\/logits/, status: 504, code: "deadline_exceeded", held: true},
};
// Through the edge gateway in workerd (its memory is another process's, not measured here).
const EDGE_CASES = ["NaN in the logits", "Inf in the hidden states", "logits inflated to 600 MiB, without Content-Length", "an answer held past the deadline"];
// Only where node 0 is remote: its embed answer.
const EMBED_CASE = {"a huge finite value in the embedding": spoiled("huge", /^\/v1\/embed/)};

async function expectedText() {
  const local = await Pipeline.open({model: tiny(), build: "single"});
  try {
    return (await greedy(local, handChatPrompt(local.tokenizer, hello), MAX_TOKENS)).text;
  } finally {
    await local.close();
  }
}

function post(url, apiKey, body) {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST", headers: {"content-type": "application/json", authorization: `Bearer ${apiKey}`},
    body: JSON.stringify({model: "tiny", messages: hello, max_tokens: MAX_TOKENS, temperature: 0, ...body}),
    // The test's own bound: a gateway that waits for the node fails the test rather than hang it.
    signal: AbortSignal.timeout(DEADLINE_MS + 15_000),
  });
}

// The largest RSS of this process seen while job() runs (the gateway runs in it).
async function peakRss(job) {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 20);
  try {
    await job();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, process.memoryUsage().rss);
}

/**
 * One whole and one streamed request while `proxies` spoil `kase`'s path, then a good request:
 * asserts the errors, their promptness, the node named without its token, and the good text.
 */
async function checkCase({url, apiKey, proxies, kase, expected, measureRss = true}) {
  const where = (message) => proxies.some((p) => message.includes(p.url.replace("http://", "")));
  for (const p of proxies) p.spoil(kase.path, kase.action);
  const hitsBefore = proxies.reduce((n, p) => n + p.hits, 0);
  const before = process.memoryUsage().rss;
  let whole;
  let wholeMs;
  const peak = await peakRss(async () => {
    const t0 = performance.now();
    const response = await post(url, apiKey);
    whole = {status: response.status, body: await response.json()};
    wholeMs = performance.now() - t0;
  });
  assert.equal(whole.status, kase.status, JSON.stringify(whole.body));
  assert.equal(whole.body.error.code, kase.code, JSON.stringify(whole.body));
  assert.equal(typeof whole.body.error.message, "string");
  assert.ok(!whole.body.error.message.includes(NODE_TOKEN), whole.body.error.message);
  if (!kase.held) assert.ok(where(whole.body.error.message), `the error names no node: ${whole.body.error.message}`);
  assert.ok(wholeMs < (kase.held ? DEADLINE_MS + 1000 : 10_000), `answered after ${wholeMs.toFixed(0)} ms`);
  if (kase.held) assert.ok(wholeMs >= DEADLINE_MS - 50, `answered after ${wholeMs.toFixed(0)} ms, before the deadline`);
  if (measureRss && kase.inflated) assert.ok(peak - before < INFLATED_BYTES / 3, `RSS grew by ${((peak - before) / 2 ** 20).toFixed(0)} MiB`);

  const t0 = performance.now();
  const stream = await post(url, apiKey, {stream: true});
  assert.equal(stream.status, 200);
  const events = (await stream.text()).split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, ""));
  const streamMs = performance.now() - t0;
  assert.ok(streamMs < (kase.held ? DEADLINE_MS + 1000 : 10_000), `stream ended after ${streamMs.toFixed(0)} ms`);
  assert.notEqual(events.at(-1), "[DONE]");
  const last = JSON.parse(events.at(-1));
  assert.equal(last.error?.code, kase.code, events.at(-1));
  const content = events.slice(0, -1).map((e) => JSON.parse(e).choices[0]?.delta?.content ?? "").join("");
  assert.equal(content, "", "text of a bad answer reached the stream");
  assert.ok(proxies.reduce((n, p) => n + p.hits, 0) > hitsBefore, "the proxy spoiled nothing");

  for (const p of proxies) p.pass();
  const good = await post(url, apiKey);
  const body = await good.json();
  assert.equal(good.status, 200, JSON.stringify(body));
  assert.equal(body.choices[0].message.content, expected);
}

/**
 * n requests at once while the proxies reset (a dead node) or hold (a hanging one) every call:
 * each is refused at once (429) or ends within the deadline + 1 s; then, the node back, a
 * request is answered (the line was given back).
 */
async function checkDeadNode({url, apiKey, proxies, action, n, expected}) {
  for (const p of proxies) p.spoil(/./, action);
  const results = await Promise.all(Array.from({length: n}, async () => {
    const t0 = performance.now();
    const response = await post(url, apiKey);
    const body = await response.json();
    return {status: response.status, code: body.error?.code, ms: performance.now() - t0};
  }));
  for (const r of results) {
    if (r.status === 429) continue;
    assert.equal(r.status, 504, JSON.stringify(r));
    assert.equal(r.code, "deadline_exceeded");
    assert.ok(r.ms < DEADLINE_MS + 1000, `a request ended after ${r.ms.toFixed(0)} ms`);
  }
  assert.ok(results.some((r) => r.status === 504));
  for (const p of proxies) p.pass();
  const good = await post(url, apiKey);
  const body = await good.json();
  assert.equal(good.status, 200, JSON.stringify(body));
  assert.equal(body.choices[0].message.content, expected);
}

/** Two `layerfold serve` nodes of the tiny model behind their token, each behind a hostile proxy. */
async function hostileNodes(t) {
  const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", tiny(), "--layers", layers], env: {AUTH_TOKEN: NODE_TOKEN}})));
  return Promise.all(servers.map((s) => startHostileProxy(t, s.url)));
}


describe("gateway against hostile nodes", () => {
  const topologies = {
    "a local and a remote node": (proxies) => ({nodes: `local:0-0,${proxies[1].url}`, spoiledBy: [proxies[1]]}),
    "remote nodes only": (proxies) => ({nodes: proxies.map((p) => p.url).join(","), spoiledBy: proxies}),
  };
  for (const [topology, shape] of Object.entries(topologies)) {
    test(`${topology}: every spoiled answer is a 502-class error, promptly, and the next request is answered`, async (t) => {
      const expected = await expectedText();
      const proxies = await hostileNodes(t);
      const {nodes, spoiledBy} = shape(proxies);
      const {url} = await startGateway(t, {nodes, authToken: "gw-key", nodesAuthToken: NODE_TOKEN, requestTimeoutMs: DEADLINE_MS});
      const cases = {...CASES, ...(spoiledBy.length === 2 ? EMBED_CASE : {})};
      for (const [name, kase] of Object.entries(cases)) {
        await t.test(name, () => checkCase({url, apiKey: "gw-key", proxies: spoiledBy, kase, expected}));
      }
    });
  }

  test("a dead or hanging node: 20 requests with a short deadline end within it + 1 s, and the line is free again", async (t) => {
    const expected = await expectedText();
    const proxies = await hostileNodes(t);
    const {url} = await startGateway(t, {nodes: proxies.map((p) => p.url).join(","), authToken: "gw-key", nodesAuthToken: NODE_TOKEN,
      requestTimeoutMs: DEADLINE_MS, maxQueue: 16});
    for (const action of ["reset", "hold"]) {
      await t.test(action, () => checkDeadNode({url, apiKey: "gw-key", proxies: [proxies[1]], action, n: 20, expected}));
    }
  });
});

describe("edge gateway in workerd against hostile nodes", () => {
  test("spoiled answers through the worker are 502-class errors, promptly, and the next request is answered", async (t) => {
    const expected = await expectedText();
    const proxies = await hostileNodes(t);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-gateway-hostile-"));
    t.after(() => fs.rmSync(tmp, {recursive: true, force: true}));
    await bundleEdgeWorker(tmp, {entry: path.join(root, "js-glue", "edge", "gateway_worker.js"), relaxed: false});
    const mf = new Miniflare({
      modules: true, modulesRoot: tmp, scriptPath: path.join(tmp, "worker.js"),
      modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}],
      r2Buckets: ["MODEL"], compatibilityDate: "2025-01-01",
      bindings: {MODEL_KEY: "tiny.gguf", NODES: proxies.map((p) => p.url).join(","), AUTH_TOKEN: "edge-key", NODES_AUTH_TOKEN: NODE_TOKEN,
        REQUEST_TIMEOUT_MS: String(DEADLINE_MS)},
    });
    t.after(() => mf.dispose());
    await (await mf.getR2Bucket("MODEL")).put("tiny.gguf", fs.readFileSync(tiny()));
    const url = (await mf.ready).href.replace(/\/$/, "");
    for (const name of EDGE_CASES) {
      await t.test(name, () => checkCase({url, apiKey: "edge-key", proxies, kase: CASES[name], expected, measureRss: false}));
    }
  });
});
