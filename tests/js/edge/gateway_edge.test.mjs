// The gateway in workerd (miniflare): edge/gateway_worker.js bundled as scripts/build-edge
// bundles the layer-node worker, the model's header from a seeded R2 bucket, two `layerfold
// serve` nodes on loopback, and the official openai client against the worker's URL: the same
// answers, whole and streamed, as the Node gateway's pipeline gives; with prompt lookup on
// (SPECULATIVE), the same greedy text, drafts cut back on the nodes; image parts refused, naming
// where to send them; SPECULATIVE=mtp refused
// over nodes without a drafter (tests/js/edge/e2b_mtp.test.mjs drafts with one); a
// tensor-parallel group in NODES refused by name (its leader runs in Node).
import assert from "node:assert/strict";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {greedy, handChatPrompt, tiny} from "../support/gateway_fixture.mjs";
import {root} from "../support/models.mjs";
import {startServer} from "../support/server_process.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {Miniflare} = require("miniflare");
const {default: OpenAI} = require("openai");

const hello = [{role: "user", content: "hello"}];
// A prompt whose greedy continuation prompt lookup guesses partly right (tests/js/gateway/speculative.test.mjs).
const LOOKUP_PROMPT = "The capital of France is";

describe("gateway in workerd", () => {
  test("the openai client against the worker, over remote nodes: whole and streamed answers as in Node, errors in OpenAI's shape", async (t) => {
    const local = await Pipeline.open({model: tiny(), build: "single"});
    let expected;
    let lookupExpected;
    try {
      expected = await greedy(local, handChatPrompt(local.tokenizer, hello), 8);
      lookupExpected = await greedy(local, local.tokenizer.encode(LOOKUP_PROMPT), 32);
    } finally {
      await local.close();
    }
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-gateway-edge-"));
    t.after(() => fs.rmSync(tmp, {recursive: true, force: true}));
    await bundleEdgeWorker(tmp, {entry: path.join(root, "js-glue", "edge", "gateway_worker.js"), relaxed: false});
    const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", tiny(), "--layers", layers]})));
    const worker = async (settings = {}) => {
      const mf = new Miniflare({
        modules: true, modulesRoot: tmp, scriptPath: path.join(tmp, "worker.js"),
        modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}],
        r2Buckets: ["MODEL"], compatibilityDate: "2025-01-01",
        bindings: {MODEL_KEY: "tiny.gguf", NODES: servers.map((s) => s.url).join(","), AUTH_TOKEN: "edge-key", ...settings},
      });
      t.after(() => mf.dispose());
      await (await mf.getR2Bucket("MODEL")).put("tiny.gguf", fs.readFileSync(tiny()));
      const url = await mf.ready;
      return {url, client: new OpenAI({baseURL: new URL("/v1", url).href, apiKey: "edge-key", maxRetries: 0})};
    };
    const {url, client} = await worker();

    assert.deepEqual((await client.models.list()).data.map((m) => m.id), ["tiny"]);
    const whole = await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 8, temperature: 0});
    assert.equal(whole.choices[0].message.content, expected.text);
    let text = "";
    let usage = null;
    for await (const chunk of await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 8, temperature: 0, stream: true,
      stream_options: {include_usage: true}})) {
      text += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
    }
    assert.equal(text, expected.text);
    assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
    await assert.rejects(client.chat.completions.create({model: "tiny", messages: hello, n: 9}), (error) => error.status === 400 && error.param === "n");
    // n: 2 over the remote nodes: choice i is what a one-choice request with seed + i gets.
    const sampled = {model: "tiny", messages: hello, max_tokens: 6, temperature: 1.5, top_k: 50};
    const two = await client.chat.completions.create({...sampled, n: 2, seed: 11});
    const one = async (seed) => (await client.chat.completions.create({...sampled, seed})).choices[0].message.content;
    assert.deepEqual(two.choices.map((c) => c.message.content), [await one(11), await one(12)]);
    // No vision tower fits an isolate: an image part is refused by name, saying where to send it.
    const image = [{role: "user", content: [{type: "text", text: "Look:"}, {type: "image_url", image_url: {url: "data:image/png;base64,AAAA"}}]}];
    await assert.rejects(client.chat.completions.create({model: "tiny", messages: image, max_tokens: 4}), (error) => error.status === 400 &&
      error.param === "messages[0].content[1].image_url.url" && /this edge gateway reads no images: .*layerfold gateway --mmproj/.test(error.message));
    const wrong = new OpenAI({baseURL: new URL("/v1", url).href, apiKey: "nope", maxRetries: 0});
    await assert.rejects(wrong.models.list(), (error) => error.status === 401);

    const drafting = await worker({SPECULATIVE: "prompt-lookup", DRAFT_MIN_NGRAM: "1"});
    const r = await drafting.client.completions.create({model: "tiny", prompt: LOOKUP_PROMPT, max_tokens: 32, temperature: 0});
    assert.equal(r.choices[0].text, lookupExpected.text);
    assert.ok(r.usage.completion_tokens_details.accepted_prediction_tokens > 0 && r.usage.completion_tokens_details.rejected_prediction_tokens > 0,
      JSON.stringify(r.usage));

    // A group's leader holds WebSockets from call to call, which an isolate cannot: refused by name.
    const grouped = await worker({NODES: `tp(${servers.map((s) => s.url).join(",")})`});
    await assert.rejects(grouped.client.models.list(), (error) => error.status === 503 &&
      /NODES: a tensor-parallel group \(tp\(URL,...\)\) is led from Node/.test(error.message));

    // MTP needs a last node that drafts: refused at open, naming where the drafter goes.
    const noDrafter = await worker({SPECULATIVE: "mtp"});
    await assert.rejects(noDrafter.client.models.list(), (error) => error.status === 503 &&
      /SPECULATIVE=mtp: the last node has no draft model \(DRAFT_MODEL_KEY on the edge worker serving the last layers, or serve --draft-model\)/.test(error.message));
  });
});
