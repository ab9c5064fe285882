// MTP drafts at the edge: an E2B-shaped model split by `layerfold plan --memory 128MiB
// --draft-model` into layer-node workers in one workerd (miniflare), the last one holding the
// e2b-shape drafter (make-model --assistant: Google's E2B drafter shape) beside its head, read
// from the same R2 bucket (DRAFT_MODEL_KEY), and two gateway workers over them, one with
// SPECULATIVE=mtp and one without drafts. Greedy and seeded chats, and logprobs, are the same
// bytes through both, the drafting gateway's usage counting drafts verified; every isolate stays
// inside 128 MiB. A draft model on a node without the head, or one that would not fit the
// isolate's budget, is refused at start with the layer or the bytes it needs.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {modelWithDrafter, root} from "../support/models.mjs";
import {freePort} from "../support/servers.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {Miniflare} = require("miniflare");
const {default: OpenAI} = require("openai");
const cli = path.join(root, "js-glue", "bin", "layerfold.js");

// The preset's 7 layers SSSSGSG; the drafter reads the caches of layers 5 and 6, shared-KV
// layers whose sources are 3 and 4, so the tail holds mirrors of those.
const pair = () => modelWithDrafter("e2b-shape", "e2b-shape");
const BUDGET = 128 * 2 ** 20;
const MAX_CONTEXT = 128;
const MAX_TOKENS = 16;
const chat = (content) => [{role: "user", content}];
const PROMPTS = ["The capital of France is", "one two three one two three", "hello"];
const draftsOf = ({usage}) => usage.completion_tokens_details.accepted_prediction_tokens + usage.completion_tokens_details.rejected_prediction_tokens;

function plan(target, ...more) {
  const r = spawnSync(process.execPath, [cli, "plan", target, "--nodes", "4", "--memory", "128MiB",
    "--max-context", String(MAX_CONTEXT), "--max-tokens", String(MAX_TOKENS), "--json", ...more], {encoding: "utf8"});
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout).nodes;
}

describe("MTP drafts on an E2B-shaped pipeline of edge nodes", () => {
  test("the tail drafts inside 128 MiB; greedy, seeded and logprobs through the edge gateway equal plain decoding; misplaced or oversized drafters refused", async (t) => {
    const {target, drafter} = pair();
    const nodes = plan(target, "--draft-model", drafter);
    for (const n of nodes) assert.ok(n.bytes <= BUDGET, `layers ${n.layers}: ${n.bytes} bytes`);
    const tail = nodes.at(-1);
    assert.equal(tail.layers[1], 6);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-edge-mtp-"));
    t.after(() => fs.rmSync(dir, {recursive: true, force: true}));
    const nodeDir = path.join(dir, "node");
    const gatewayDir = path.join(dir, "gateway");
    await bundleEdgeWorker(nodeDir);
    await bundleEdgeWorker(gatewayDir, {entry: path.join(root, "js-glue", "edge", "gateway_worker.js"), relaxed: false});
    const common = {modules: true, modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}], compatibilityDate: "2025-01-01",
      r2Buckets: {MODEL: "model"}};
    // The gateways name the nodes' URLs in their settings, so the nodes listen on ports chosen first.
    const ports = [];
    while (ports.length < nodes.length) ports.push(await freePort());
    const urls = ports.map((port) => `http://127.0.0.1:${port}`);
    const layerNode = (name, [first, last], more = {}, port = 0) => ({
      ...common, name, modulesRoot: nodeDir, scriptPath: path.join(nodeDir, "worker.js"), unsafeDirectSockets: [{host: "127.0.0.1", port}],
      bindings: {MODEL_KEY: "e2b.gguf", LAYERS: `${first}-${last}`, MEMORY_BUDGET_BYTES: String(BUDGET),
        MAX_CONTEXT: String(MAX_CONTEXT), MAX_TOKENS: String(MAX_TOKENS), ...more},
    });
    const gateway = (name, speculative) => ({
      ...common, name, modulesRoot: gatewayDir, scriptPath: path.join(gatewayDir, "worker.js"), unsafeDirectSockets: [{port: 0}],
      bindings: {MODEL_KEY: "e2b.gguf", MODEL_ID: "e2b", NODES: urls.join(","), SPECULATIVE: speculative, DRAFT_MAX: "6", MAX_CACHED_SESSIONS: "0"},
    });
    const withDrafter = {DRAFT_MODEL_KEY: "e2b-drafter.gguf"};
    const mf = new Miniflare({workers: [
      ...nodes.map(({layers}, i) => layerNode(`node${i}`, layers, i === nodes.length - 1 ? withDrafter : {}, ports[i])),
      layerNode("headless", nodes[0].layers, withDrafter),
      layerNode("tight", tail.layers, {...withDrafter, MEMORY_BUDGET_BYTES: String(tail.bytes - 1)}),
      gateway("plain", "off"), gateway("mtp", "mtp"),
    ]});
    t.after(() => mf.dispose());
    const bucket = await mf.getR2Bucket("MODEL", "node0");
    await bucket.put("e2b.gguf", fs.readFileSync(target));
    await bucket.put("e2b-drafter.gguf", fs.readFileSync(drafter));
    const urlOf = async (name) => String(await mf.unsafeGetDirectURL(name)).replace(/\/$/, "");

    // Refused at start, before any weight is read: the drafter needs the head's node...
    const headless = await fetch(`${await urlOf("headless")}/v1/info`);
    assert.equal(headless.status, 503);
    const {error: misplaced} = await headless.json();
    assert.equal(misplaced.code, "not_ready");
    assert.match(misplaced.message, new RegExp(`a draft model goes on the node holding the head \\(layer 6\\); this node serves layers 0-${nodes[0].layers[1]}`));
    // ...and room in the isolate: plan's figure for the tail, the drafter counted, one byte more than the budget.
    const tight = await fetch(`${await urlOf("tight")}/v1/info`);
    assert.equal(tight.status, 503);
    const {error: over} = await tight.json();
    assert.equal(over.code, "over_budget");
    assert.deepEqual([over.needed_bytes, over.available_bytes], [tail.bytes, tail.bytes - 1]);
    assert.match(over.message, new RegExp(`need ${tail.bytes} bytes .*draft model [\\d.]+ MiB.*budget is ${tail.bytes - 1} bytes`));

    // Each node loads on its first request: one at a time, so no answer waits on the others' loads.
    for (const url of urls) {
      const response = await fetch(`${url}/v1/info`);
      assert.equal(response.status, 200, await response.clone().text());
      await response.body?.cancel();
    }
    const client = async (name) => new OpenAI({baseURL: `${await urlOf(name)}/v1`, apiKey: "none", maxRetries: 0, timeout: 600_000});
    const plain = await client("plain");
    const mtp = await client("mtp");

    const requests = [
      ...PROMPTS.map((content) => ({messages: chat(content), max_tokens: 24, temperature: 0})),
      ...PROMPTS.map((content, i) => ({messages: chat(content), max_tokens: 24, temperature: 0.7, top_k: 3, seed: 11 + i})),
      {messages: chat("hello"), max_tokens: 16, temperature: 0, logprobs: true, top_logprobs: 3},
    ];
    const drafts = {accepted: 0, rejected: 0};
    for (const body of requests) {
      const a = await plain.chat.completions.create({model: "e2b", ...body});
      const b = await mtp.chat.completions.create({model: "e2b", ...body});
      assert.equal(b.choices[0].message.content, a.choices[0].message.content, JSON.stringify(body));
      assert.equal(b.choices[0].finish_reason, a.choices[0].finish_reason);
      assert.deepEqual(b.choices[0].logprobs, a.choices[0].logprobs);
      assert.equal(b.usage.completion_tokens, a.usage.completion_tokens);
      assert.equal(draftsOf(a), 0, "the plain gateway drafts nothing");
      drafts.accepted += b.usage.completion_tokens_details.accepted_prediction_tokens;
      drafts.rejected += b.usage.completion_tokens_details.rejected_prediction_tokens;
    }
    // The tail's drafts were verified: some kept (the drafter guesses a greedy loop's repeats), some cut back.
    assert.ok(drafts.accepted > 0 && drafts.rejected > 0, JSON.stringify(drafts));

    // Every isolate's WASM memory within the budget, the tail's drafter in it.
    for (const [i, url] of urls.entries()) {
      const info = await (await fetch(`${url}/v1/info`)).json();
      assert.deepEqual(info.layers, [nodes[i].layers[0], nodes[i].layers[1] + 1]);
      assert.ok(info.wasm_memory_bytes <= BUDGET, `node ${i}: ${info.wasm_memory_bytes} bytes of WASM memory`);
      if (i === urls.length - 1) assert.ok(info.drafter.bytes_loaded > 0 && info.drafter.model.includes("e2b-drafter.gguf"), JSON.stringify(info.drafter));
      else assert.equal(info.drafter, null);
    }
  });
});
