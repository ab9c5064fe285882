// A 31B layer across edge isolates: `layerfold plan --memory 128MiB` proposes a tensor-parallel
// group for the middle layer of a 3-layer 31b-shape file (about 280 MiB of Q4_0, more than one
// isolate holds), its members run as workers in workerd (miniflare, SHARD=I/S) each reading its
// slices from R2 within its 128 MiB budget and exchanging its pieces with the others member to
// member, and a leader in this process drives them over their WebSockets: a prompt longer than the members' MAX_TOKENS (sent in calls of that many rows) and
// decode steps give a single node's bytes. A member that cannot fit is refused at start with the
// bytes it needs, a call of more rows by name, a wrong token at the upgrade. A whole model served
// by one group of isolates holding its ends (ENDS=1: the embedding and the head split by the
// vocabulary) gives a single node's logits and greedy tokens through a pipeline.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {MemberGroup} from "../../../js-glue/src/group/member_group.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {decodeFrame, encodeFrame} from "../../../js-glue/src/protocol/member_frames.js";
import {model, root} from "../support/models.mjs";
import {freePort} from "../support/servers.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {Miniflare} = require("miniflare");
const WebSocket = require("ws");
const cli = path.join(root, "js-glue", "bin", "layerfold.js");

const BUDGET = 128 * 2 ** 20;
const MAX_CONTEXT = 64;
const MAX_TOKENS = 8;
const TOKEN = "member-secret";

// One frame to the member at `url` over a socket of the test's own -> the answer's header.
async function request(url, header, arrays = []) {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/member`, {headers: {authorization: `Bearer ${TOKEN}`}});
  await new Promise((resolve, reject) => { ws.once("open", resolve); ws.once("error", reject); });
  const reply = new Promise((resolve) => ws.once("message", (data) => resolve(data)));
  ws.send(encodeFrame(header, arrays));
  const data = await reply;
  ws.close();
  return decodeFrame(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), "member").header;
}

// A worker of the bundle in `dir` serving `key` of the R2 bucket MODEL with `bindings`, on `port`.
function worker(dir, name, bindings, port = 0) {
  return {
    name, modules: true, modulesRoot: dir, scriptPath: path.join(dir, "worker.js"), compatibilityDate: "2025-01-01",
    modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}], r2Buckets: {MODEL: "model"},
    unsafeDirectSockets: [{host: "127.0.0.1", port}], bindings: {AUTH_TOKEN: TOKEN, ...bindings},
  };
}

// Waits for the member at `url` to be in, or throws its load's error.
async function ready(url) {
  for (;;) {
    const response = await fetch(`${url}/readyz`);
    const body = await response.json();
    if (response.status === 200) return;
    if (body.error) throw new Error(`${url}: ${JSON.stringify(body.error)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("a tensor-parallel group of edge isolates", () => {
  test("a 31b-shape layer over members of 128 MiB gives a single node's bytes", {timeout: 900_000}, async (t) => {
    const file = model("31b-shape-3", "31b-shape", ["--n-layer", "3"]);
    const r = spawnSync(process.execPath, [cli, "plan", file, "--nodes", "3", "--memory", "128MiB", "--end-memory", "4GiB",
      "--max-context", String(MAX_CONTEXT), "--max-tokens", String(MAX_TOKENS), "--json"], {encoding: "utf8"});
    assert.equal(r.status, 0, r.stderr);
    const middle = JSON.parse(r.stdout).nodes[1];
    assert.deepEqual(middle.layers, [1, 1]);
    const members = middle.members;
    assert.ok(members >= 3, `a 31B layer needs 3 members or more at 128 MiB, plan says ${members}`);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-edge-tp-"));
    t.after(() => fs.rmSync(dir, {recursive: true, force: true}));
    await bundleEdgeWorker(dir);
    const ports = [];
    while (ports.length < members) ports.push(await freePort());
    const settings = {MODEL_KEY: "31b.gguf", LAYERS: "1-1", MEMORY_BUDGET_BYTES: String(BUDGET), MAX_CONTEXT: String(MAX_CONTEXT), MAX_TOKENS: String(MAX_TOKENS)};
    const mf = new Miniflare({workers: [
      ...ports.map((port, i) => worker(dir, `member${i}`, {...settings, SHARD: `${i}/${members}`}, port)),
      // One member fewer: its share does not fit the budget.
      worker(dir, "tight", {...settings, SHARD: `0/${members - 1}`}),
      // The file is too large for miniflare's R2 API to pass (one string): a worker puts the body
      // of a request, whose length workerd knows.
      {name: "loader", modules: true, compatibilityDate: "2025-01-01", r2Buckets: {MODEL: "model"}, unsafeDirectSockets: [{port: 0}],
        script: "export default { async fetch(request, env) { await env.MODEL.put('31b.gguf', request.body); return new Response('ok'); } };"},
    ]});
    t.after(() => mf.dispose());
    const put = await fetch(await mf.unsafeGetDirectURL("loader"), {method: "PUT", body: await fs.openAsBlob(file)});
    assert.equal(put.status, 200, await put.text());
    const urls = ports.map((port) => `http://127.0.0.1:${port}`);

    const tight = await fetch(`${String(await mf.unsafeGetDirectURL("tight")).replace(/\/$/, "")}/v1/member`);
    assert.equal(tight.status, 503);
    const {error: over} = await tight.json();
    assert.equal(over.code, "over_budget");
    assert.ok(over.needed_bytes > BUDGET && over.available_bytes === BUDGET, JSON.stringify(over));
    assert.match(over.message, new RegExp(`member 0 of ${members - 1} over layers \\[1, 2\\) need ${over.needed_bytes} bytes`));

    // Each member loads on its first request, one at a time.
    for (const url of urls) await ready(url);
    await assert.rejects(MemberGroup.connect(urls, {authToken: "wrong"}), {code: "unauthenticated"});
    const group = await MemberGroup.connect(urls, {authToken: TOKEN, deadlineMs: 300_000});
    t.after(() => group.close());
    assert.equal(group.exchange, "members", `the isolates exchange member to member (${group.linkFailure})`);

    // The single node of layer 1, and the first node's hidden states of a prompt to feed both.
    const first = await LayerNode.open({model: file, layers: [0, 1], build: "single", maxContext: MAX_CONTEXT});
    t.after(() => first.close());
    const single = await LayerNode.open({model: file, layers: [1, 2], build: "single", maxContext: MAX_CONTEXT});
    t.after(() => single.close());
    // A prompt of more rows than the members were counted for: the leader sends it in calls of 8.
    const tokens = [2, 651, 603, 529, 906, 563, 17, 1025, 44, 380, 7, 2991, 64, 12];
    const steps = [[0, 12], [12, 1], [13, 1]];
    const bytesOf = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);
    for (const [start, n] of steps) {
      const hidden = await first.forward({session: "a", startPos: start, hidden: first.embed(tokens.slice(start, start + n))});
      const expected = await single.forward({session: "a", startPos: start, hidden});
      const got = await group.forward({session: "a", startPos: start, hidden});
      assert.ok(bytesOf(got).equals(bytesOf(expected)), `rows ${start}..${start + n - 1}: the single node's bytes`);
    }
    assert.equal(await group.sessionLength("a"), tokens.length);
    group.close();
    // A member refuses a call past the rows its memory was counted for, by name.
    const begin = await request(urls[0], {op: "begin", session: "b", startPos: 0, rows: MAX_TOKENS + 1, perLayer: 0},
      [new Float32Array((MAX_TOKENS + 1) * group.nEmbd)]);
    assert.equal(begin.op, "error");
    assert.match(begin.message, /a call of 9 rows, more than the 8 its memory budget was counted for/);

    const memory = [];
    for (const [i, url] of urls.entries()) {
      const info = await request(url, {op: "info"});
      assert.equal(info.max_tokens, MAX_TOKENS);
      memory.push(info.memory_bytes);
      assert.ok(memory[i] > 0 && memory[i] <= BUDGET, `member ${i}: ${memory[i]} bytes of WASM memory`);
    }
    t.diagnostic(`${members} members; plan's largest ${middle.bytes} bytes; WASM memory ${memory.join(", ")} bytes`);
  });

  test("a whole model as one group of isolates holding its ends gives a single node's logits and tokens", {timeout: 600_000}, async (t) => {
    const file = model("small", "small", ["--type", "Q4_0"]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-edge-tp-ends-"));
    t.after(() => fs.rmSync(dir, {recursive: true, force: true}));
    await bundleEdgeWorker(dir);
    const ports = [await freePort(), await freePort()];
    const settings = {MODEL_KEY: "small.gguf", LAYERS: "0-5", ENDS: "1", MEMORY_BUDGET_BYTES: String(BUDGET), MAX_CONTEXT: String(MAX_CONTEXT),
      MAX_TOKENS: String(MAX_TOKENS)};
    const mf = new Miniflare({workers: ports.map((port, i) => worker(dir, `member${i}`, {...settings, SHARD: `${i}/2`}, port))});
    t.after(() => mf.dispose());
    await (await mf.getR2Bucket("MODEL", "member0")).put("small.gguf", fs.readFileSync(file));
    const urls = ports.map((port) => `http://127.0.0.1:${port}`);
    for (const url of urls) await ready(url);
    const info = await request(urls[1], {op: "info"});
    assert.equal(info.embedding && info.head, true);
    assert.equal(info.vocab[1], info.n_vocab);

    const greedy = async (pipeline) => {
      const tokens = [];
      const logits = [];
      let input = [2, 17, 300, 5, 41, 88, 9, 120, 33, 7, 1000, 64];
      for (let i = 0; i < 8; ++i) {
        const out = (await pipeline.step("g", input)).logits;
        logits.push(Buffer.from(out.buffer, out.byteOffset, out.byteLength));
        input = [out.reduce((best, x, j) => (x > out[best] ? j : best), 0)];
        tokens.push(input[0]);
      }
      await pipeline.close();
      return {tokens, logits};
    };
    const plain = await greedy(await Pipeline.open({model: file, build: "single"}));
    const pipeline = await Pipeline.open({model: file, nodes: `tp(${urls.join(",")})`, authToken: TOKEN, memberDeadlineMs: 300_000});
    assert.match(pipeline.nodes[0].info().build, /exchange members/);
    const ours = await greedy(pipeline);
    assert.deepEqual(ours.tokens, plain.tokens);
    ours.logits.forEach((l, i) => assert.ok(l.equals(plain.logits[i]), `step ${i}'s logits`));
  });
});
