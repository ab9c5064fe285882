// The edge worker in workerd (miniflare): the single-thread module from a module binding, in
// both variants (SIMD128 and relaxed SIMD), weights from a seeded R2 bucket. The library API and
// the HTTP protocol compute the bytes the Node threaded build computes, with either variant;
// weights load once per isolate; a layer range over the memory budget is refused with the bytes;
// a pipeline of an edge node and a container node on loopback gives the in-process top-k;
// hostile requests get the container's status codes.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {logSoftmax, topK} from "../../../js-glue/src/tokens/logits.js";
import {model, root} from "../support/models.mjs";
import {runHostileTable} from "../support/hostile_requests.mjs";
import {bytesOf, cli, forward, startServer, waitReady} from "../support/server_process.mjs";
import {startWorkerd} from "../support/workerd.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const small = () => model("small", "small");
const tinyGemma3 = () => model("tiny-gemma3", "tiny-gemma3");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-edge-"));
const TOKENS = [2, 17, 301, 42, 99];

// The library steps both sides run: embed (or take `hidden`), a forward of 4 positions and one
// of the rest, and the head; the output of each step in order. Stringified into the worker.
async function librarySteps(node, {tokens, hidden}) {
  const steps = [];
  const input = node.withEmbedding ? node.embed(tokens) : Float32Array.from(hidden);
  if (node.withEmbedding) steps.push(input);
  const split = 4 * node.nEmbd;
  steps.push(await node.forward({session: "s", startPos: 0, hidden: input.subarray(0, split)}));
  const last = await node.forward({session: "s", startPos: 4, hidden: input.subarray(split)});
  steps.push(last);
  if (node.withHead) steps.push(node.logits(last));
  return steps;
}

// A worker that drives the library API (openEdgeNode -> LayerNode) for one request: opens
// `layers` of `key` with the module `variant` names (simd128 or relaxed alone, or by default
// both, for openEdgeNode to choose), runs librarySteps; answers their bytes in order, info() in
// a header.
const LIBRARY_WORKER = `
import wasm from "layerfold_wasi.wasm";
import wasmRelaxed from "layerfold_wasi_relaxed.wasm";
import {openEdgeNode} from ${JSON.stringify(path.join(root, "js-glue", "edge", "edge_node.js"))};
${librarySteps.toString()}
const MODULES = {simd128: {module: wasm}, relaxed: {module: wasmRelaxed}, both: {module: wasm, relaxedModule: wasmRelaxed}};
export default {
  async fetch(request, env) {
    const {key, layers, tokens, hidden, memoryBudgetBytes, variant = "both"} = await request.json();
    let node;
    try {
      node = await openEdgeNode({...MODULES[variant], bucket: env.MODEL, key, layers, memoryBudgetBytes, maxTokens: 64});
    } catch (error) {
      return Response.json({code: error.code, message: error.message, neededBytes: error.neededBytes}, {status: 503});
    }
    try {
      const steps = await librarySteps(node, {tokens, hidden});
      const bytes = new Uint8Array(steps.reduce((n, s) => n + s.byteLength, 0));
      let at = 0;
      for (const s of steps) { bytes.set(new Uint8Array(s.buffer, s.byteOffset, s.byteLength), at); at += s.byteLength; }
      return new Response(bytes, {headers: {"x-info": JSON.stringify({...node.info(), sessionLength: node.sessionLength("s")})}});
    } finally {
      node.close();
    }
  },
};`;

// The same steps in Node, on the threaded build.
async function referenceSteps(file, layers, {tokens, hidden}) {
  const node = await LayerNode.open({model: file, layers, build: "threaded", threads: 2});
  try {
    const steps = await librarySteps(node, {tokens, hidden});
    const input = node.withEmbedding ? steps[0] : Float32Array.from(hidden);
    return {bytes: Buffer.concat(steps.map(bytesOf)), input, nEmbd: node.nEmbd};
  } finally {
    node.close();
  }
}

const post = (mf, url, body, headers = {}) => mf.dispatchFetch(url, {method: "POST", headers, body});
const octets = {"content-type": "application/octet-stream"};

const KERNELS = {simd128: "wasm-simd128", relaxed: "wasm-relaxed-simd"};
let workerDir;
let simd128WorkerDir;
let libraryDir;

before(async () => {
  workerDir = path.join(tmp, "worker");
  await bundleEdgeWorker(workerDir);
  simd128WorkerDir = path.join(tmp, "worker-simd128");
  await bundleEdgeWorker(simd128WorkerDir, {relaxed: false});
  libraryDir = path.join(tmp, "library");
  fs.mkdirSync(libraryDir);
  fs.writeFileSync(path.join(tmp, "library_entry.js"), LIBRARY_WORKER);
  await bundleEdgeWorker(libraryDir, {entry: path.join(tmp, "library_entry.js")});
});

after(() => fs.rmSync(tmp, {recursive: true, force: true}));

describe("edge node: the library API in workerd", () => {
  // First, middle and last nodes of a 6-layer model, and a whole tiny one (Q4_0, which the
  // relaxed module lays out in row strips); each in both module variants.
  const cases = [["tiny", tiny, [0, 2]], ["small", small, [0, 2]], ["small", small, [2, 4]], ["small", small, [4, 6]]];
  for (const [name, file, layers] of cases) {
    test(`${name} layers [${layers}): embed, forward, continuation and head equal the Node threaded build's bytes, SIMD128 and relaxed SIMD`, async (t) => {
      const mf = await startWorkerd(t, libraryDir, {objects: {"model.gguf": file()}});
      const nEmbd = name === "tiny" ? 64 : 256;
      const hidden = Array.from({length: TOKENS.length * nEmbd}, (_, i) => Math.fround(Math.sin(i * 0.11)));
      const expected = await referenceSteps(file(), layers, {tokens: TOKENS, hidden});
      for (const variant of ["simd128", "relaxed"]) {
        const response = await post(mf, "http://edge/", JSON.stringify({key: "model.gguf", layers, tokens: TOKENS, hidden, variant}));
        assert.equal(response.status, 200, await response.clone().text());
        const got = Buffer.from(await response.arrayBuffer());
        assert.equal(got.length, expected.bytes.length);
        assert.ok(got.equals(expected.bytes), `edge bytes (${variant}) differ from the Node threaded build's`);
        const info = JSON.parse(response.headers.get("x-info"));
        assert.deepEqual([info.build, info.kernels, info.threads, info.layers, info.sessionLength],
          ["single", KERNELS[variant], 1, layers, TOKENS.length]);
      }
    });
  }

  test("given both modules, openEdgeNode runs the relaxed one, which workerd validates and whose own probe finds relaxed_madd fused", async (t) => {
    const mf = await startWorkerd(t, libraryDir, {objects: {"model.gguf": tiny()}});
    const response = await post(mf, "http://edge/", JSON.stringify({key: "model.gguf", layers: [0, 2], tokens: TOKENS}));
    assert.equal(response.status, 200, await response.clone().text());
    const info = JSON.parse(response.headers.get("x-info"));
    assert.equal(info.kernels, KERNELS.relaxed);  // the module's check: on this x86-64 host with FMA3 V8 fuses it
    // workerd compiles no wasm from bytes, so the host's madd probe cannot run there
    assert.match(info.kernelChoice, /wasm cannot be compiled here, so the relaxed module checks relaxed_madd is fused itself/);
    // an isolate's clock stands still while it computes: the forms cannot be told apart by time
    assert.deepEqual([info.dotForm.form, info.dotForm.dotAddMs, info.dotForm.pairsMs], ["dot-add", 0, 0]);
    assert.match(info.dotForm.reason, /the clock did not advance while both were timed/);
  });

  test("openEdgeNode over budget throws over_budget with the bytes needed and available", async (t) => {
    const mf = await startWorkerd(t, libraryDir, {objects: {"model.gguf": tiny()}});
    const response = await post(mf, "http://edge/", JSON.stringify({key: "model.gguf", layers: [0, 2], tokens: TOKENS, memoryBudgetBytes: 500_000}));
    assert.equal(response.status, 503);
    const error = await response.json();
    assert.equal(error.code, "over_budget");
    assert.ok(error.neededBytes > 500_000);
    assert.match(error.message, new RegExp(`need ${error.neededBytes} bytes .*budget is 500000 bytes`));
  });
});

describe("edge worker: the layer-node protocol in workerd", () => {
  test("scripts/build-edge ships both module variants beside the bundle, and only the SIMD128 one with --simd128-only", () => {
    const listing = (dir) => fs.readdirSync(dir).filter((f) => f.endsWith(".wasm")).sort();
    assert.deepEqual(listing(workerDir), ["layerfold_wasi.wasm", "layerfold_wasi_relaxed.wasm"]);
    assert.deepEqual(listing(simd128WorkerDir), ["layerfold_wasi.wasm"]);
    const r = spawnSync(path.join(root, "scripts", "build-edge"), ["--simd128-only", path.join(tmp, "cli-simd128")], {encoding: "utf8"});
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(listing(path.join(tmp, "cli-simd128")), ["layerfold_wasi.wasm"]);
    assert.match(r.stdout, /worker\.js {2}\d+ bytes\n.*layerfold_wasi\.wasm {2}\d+ bytes\n$/);
  });

  for (const [bundle, dir] of [["with both modules", () => workerDir], ["SIMD128 only", () => simd128WorkerDir]]) {
    test(`${bundle}: forwards equal the Node threaded build's bytes; sessions persist across requests; concurrent first requests share one load`, async (t) => {
      const mf = await startWorkerd(t, dir(), {bindings: {MODEL_KEY: "tiny.gguf", AUTH_TOKEN: "edge-secret"}, objects: {"tiny.gguf": tiny()}});
      const auth = {authorization: "Bearer edge-secret"};
      const expected = await referenceSteps(tiny(), [0, 2], {tokens: TOKENS});
      const nEmbd = expected.nEmbd;
      const first = expected.input.subarray(0, 4 * nEmbd);
      // Three sessions started at once, on a fresh isolate: one load serves them all.
      const starts = await Promise.all(["a", "b", "c"].map((s) =>
        post(mf, `http://edge/v1/sessions/${s}/forward?start_pos=0`, bytesOf(first), {...octets, ...auth})));
      for (const r of starts) {
        assert.equal(r.status, 200);
        assert.ok(Buffer.from(await r.arrayBuffer()).equals(expected.bytes.subarray(TOKENS.length * nEmbd * 4, (TOKENS.length + 4) * nEmbd * 4)));
        assert.equal(r.headers.get("x-layerfold-n-past"), "4");
      }
      const next = await post(mf, "http://edge/v1/sessions/b/forward?start_pos=4", bytesOf(expected.input.subarray(4 * nEmbd)), {...octets, ...auth});
      assert.equal(next.status, 200);
      const lastHidden = Buffer.from(await next.arrayBuffer());
      assert.ok(lastHidden.equals(expected.bytes.subarray((TOKENS.length + 4) * nEmbd * 4, (TOKENS.length + 5) * nEmbd * 4)));
      const info = await (await mf.dispatchFetch("http://edge/v1/info", {headers: auth})).json();
      assert.equal(info.sessions, 3);
      assert.deepEqual([info.build, info.threads, info.layers, info.has_embed, info.has_head], ["single", 1, [0, 2], true, true]);
      // The head over HTTP: the logits bytes, and top-k from them.
      const logits = await post(mf, "http://edge/v1/logits", lastHidden, {...octets, ...auth});
      assert.ok(Buffer.from(await logits.arrayBuffer()).equals(expected.bytes.subarray((TOKENS.length + 5) * nEmbd * 4)));
      const top = await (await post(mf, "http://edge/v1/logits?top_k=3", lastHidden, {...octets, ...auth})).json();
      const reference = new Float32Array(expected.bytes.buffer.slice(expected.bytes.byteOffset + (TOKENS.length + 5) * nEmbd * 4, expected.bytes.byteOffset + expected.bytes.length));
      assert.deepEqual(top.rows[0].top.map((e) => e.id), topK(logSoftmax(reference), 3));
      const embed = await post(mf, "http://edge/v1/embed", JSON.stringify({tokens: TOKENS}), {"content-type": "application/json", ...auth});
      assert.ok(Buffer.from(await embed.arrayBuffer()).equals(expected.bytes.subarray(0, TOKENS.length * nEmbd * 4)));
      assert.equal((await mf.dispatchFetch("http://edge/v1/info")).status, 401);
    });
  }

  test("a layer range over the memory budget is refused at start with the bytes needed and available", async (t) => {
    const mf = await startWorkerd(t, workerDir, {bindings: {MODEL_KEY: "small.gguf", MEMORY_BUDGET_BYTES: "4000000"}, objects: {"small.gguf": small()}});
    assert.equal((await mf.dispatchFetch("http://edge/healthz")).status, 200);
    for (const url of ["http://edge/v1/info", "http://edge/readyz"]) {
      const response = await mf.dispatchFetch(url);
      assert.equal(response.status, 503);
      const {error} = await response.json();
      assert.equal(error.code, "over_budget");
      assert.equal(error.available_bytes, 4_000_000);
      assert.ok(error.needed_bytes > 4_000_000);
      assert.match(error.message, new RegExp(`layers \\[0, 6\\) need ${error.needed_bytes} bytes .*budget is 4000000 bytes`));
    }
  });
});

describe("edge worker beside container nodes", () => {
  test("hostile requests get the container's status codes, and the session's cache stays as it was", async (t) => {
    const token = "edge-token-7c1e";
    const mf = await startWorkerd(t, workerDir, {
      bindings: {MODEL_KEY: "m.gguf", LAYERS: "1-1", MAX_TOKENS: "64", AUTH_TOKEN: token}, objects: {"m.gguf": tinyGemma3()},
    });
    const url = String(await mf.ready).replace(/\/$/, "");
    const reference = await LayerNode.open({model: tinyGemma3(), layers: [1, 2], build: "threaded", threads: 2});
    t.after(() => reference.close());
    let step = 0;
    // The good request after each hostile one: the next rows of the session, byte for byte what
    // an undisturbed in-process node gives.
    const good = async ({nPast}) => {
      const hidden = Float32Array.from({length: (nPast === 0 ? 3 : 1) * 64}, (_, i) => Math.sin(++step * 7.1 + i * 0.37));
      const expected = bytesOf(await reference.forward({session: "h", startPos: nPast, hidden}));
      const r = await forward(url, {session: "h", startPos: nPast, hidden, token});
      assert.equal(r.status, 200, JSON.stringify(r.error));
      assert.ok(r.bytes.equals(expected), `forward at ${nPast} differs from the in-process run`);
      return nPast + hidden.length / 64;
    };
    const results = await runHostileTable(url, {token, session: "h", nPast: await good({nPast: 0}), afterEach: good});
    assert.ok(results.length >= 50);
    for (const r of results) {
      assert.ok(r.pass, `${r.name}: expected ${JSON.stringify(r.expected)}, got ${JSON.stringify(r.actual)}`);
      assert.equal(r.sessionNPast, r.nPastBefore, `${r.name}: the session moved`);
      if (r.expected.code === "position_mismatch") assert.equal(r.errorNPast, r.nPastBefore, `${r.name}: n_past in the error`);
    }
  });

  test("a pipeline of an edge node and a container node passes layerfold validate with the in-process top-k", async (t) => {
    const mf = await startWorkerd(t, workerDir, {bindings: {MODEL_KEY: "tiny.gguf", LAYERS: "0-0"}, objects: {"tiny.gguf": tiny()}});
    const edgeUrl = String(await mf.ready).replace(/\/$/, "");
    const container = await startServer(t, {args: ["--model", tiny(), "--layers", "1-1"]});
    await waitReady(container.url);
    const validate = (nodes) => spawnSync(process.execPath, [cli, "validate", "--model", tiny(), "--nodes", nodes, "--top-k", "5", "--json"],
      {cwd: root, encoding: "utf8"});
    const mixed = validate(`${edgeUrl},${container.url}`);
    assert.equal(mixed.status, 0, mixed.stderr);
    const local = validate("local:0-0,local:1-1");
    assert.equal(local.status, 0, local.stderr);
    const [got, expected] = [mixed, local].map((r) => JSON.parse(r.stdout));
    assert.deepEqual(got.tokens, expected.tokens);
    assert.deepEqual(got.top.map((e) => e.id), expected.top.map((e) => e.id));
    assert.deepEqual(got.top.map((e) => e.probability), expected.top.map((e) => e.probability));
    assert.deepEqual(got.timings.nodes.map((n) => n.layers), [[0, 1], [1, 2]]);
    await container.stop();
  });
});
