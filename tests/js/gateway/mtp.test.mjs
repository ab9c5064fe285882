// Speculative decoding by MTP (docs/gateway.md): the drafter beside the last node of a 2-node
// pipeline, local and remote (loopback HTTP), its drafts verified by the all-rows step with
// cut-back. Greedy text identical to the Pipeline's own greedy decoding, seeded sampling and
// logprobs identical to a gateway without drafts, the drafts made on the tail and fed; a request
// cancelled mid-generation leaves nothing of its session or drafts on the tail; the options
// refused by name where the pipeline cannot draft.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {gatewayConfigOf as gatewayConfig} from "../support/cli_config.mjs";
import {serveGateway} from "../../../js-glue/src/gateway/host.js";
import {openModel} from "../../../js-glue/src/generation/open_model.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {greedy, handChatPrompt, nodeSessions, startGateway} from "../support/gateway_fixture.mjs";
import {modelWithDrafter} from "../support/models.mjs";
import {startServer} from "../support/server_process.mjs";

// gemma4, layers SSG: the tail must hold layers 1 and 2, whose caches the drafter reads.
const pair = () => modelWithDrafter("mtp-gateway", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0"], ["--assistant-layers", "SGS"]);
const NODES = "local:0-0,local:1-2";
const mtp = {maxDraft: 6, minNgram: 3, mtp: true};
const chat = (content) => [{role: "user", content}];
const PROMPTS = ["The capital of France is", "one two three one two three one two three", "hello"];

function draftsOf(r) {
  return r.usage.completion_tokens_details.accepted_prediction_tokens + r.usage.completion_tokens_details.rejected_prediction_tokens;
}

// Greedy completions and chats through `client` against the Pipeline's own greedy decoding on `reference`.
async function checkGreedy(client, reference) {
  let drafted = 0;
  for (const prompt of PROMPTS) {
    const expected = await greedy(reference, reference.tokenizer.encode(prompt), 32);
    const r = await client.completions.create({model: "tiny", prompt, max_tokens: 32, temperature: 0});
    assert.equal(r.choices[0].text, expected.text, prompt);
    drafted += draftsOf(r);
    const messages = chat(prompt);
    const chatExpected = await greedy(reference, handChatPrompt(reference.tokenizer, messages), 24);
    const c = await client.chat.completions.create({model: "tiny", messages, max_tokens: 24, temperature: 0});
    assert.equal(c.choices[0].message.content, chatExpected.text, prompt);
  }
  return drafted;
}

describe("gateway with MTP drafts", () => {
  test("local nodes: greedy text of plain decoding, drafts made on the tail and verified", async (t) => {
    const {target, drafter} = pair();
    const {client, pipeline} = await startGateway(t, {file: target, nodes: NODES, draftModel: drafter, speculative: mtp, maxCachedSessions: 0});
    const drafted = await checkGreedy(client, pipeline);
    const tail = pipeline.nodes.at(-1);
    assert.ok(tail.draftStats().drafts > 0, "the tail drafted");
    assert.ok(drafted > 0, "drafts were verified");
    assert.deepEqual(nodeSessions(pipeline), [0, 0]);
  });

  test("seeded sampling and logprobs: the bytes of a gateway without drafts", async (t) => {
    const {target, drafter} = pair();
    const plain = await startGateway(t, {file: target, nodes: NODES});
    const drafting = await startGateway(t, {file: target, nodes: NODES, draftModel: drafter, speculative: mtp});
    const requests = [
      ...PROMPTS.map((content, i) => ({messages: chat(content), max_tokens: 32, temperature: 0.7, top_k: 3, seed: 11 + i})),
      {messages: chat("hello"), max_tokens: 32, temperature: 0, logprobs: true, top_logprobs: 3},
    ];
    for (const body of requests) {
      const a = await plain.client.chat.completions.create({model: "tiny", ...body});
      const b = await drafting.client.chat.completions.create({model: "tiny", ...body});
      assert.equal(b.choices[0].message.content, a.choices[0].message.content, JSON.stringify(body));
      assert.equal(b.choices[0].finish_reason, a.choices[0].finish_reason);
      assert.deepEqual(b.choices[0].logprobs, a.choices[0].logprobs);
      assert.equal(b.usage.completion_tokens, a.usage.completion_tokens);
    }
    assert.ok(drafting.pipeline.nodes.at(-1).draftStats().drafts > 0);
  });

  test("remote nodes: the drafts travel with the tail's logits, the Pipeline's greedy text", async (t) => {
    const {target, drafter} = pair();
    const servers = await Promise.all([["0-0"], ["1-2", "--draft-model", drafter]].map(([layers, ...more]) =>
      startServer(t, {args: ["--model", target, "--layers", layers, ...more]})));
    const {client, pipeline} = await startGateway(t, {file: target, nodes: servers.map((s) => s.url).join(","), speculative: mtp, maxCachedSessions: 0});
    assert.equal(pipeline.drafts, true);
    const local = await Pipeline.open({model: target, build: "single"});
    t.after(() => local.close());
    const drafted = await checkGreedy(client, local);
    assert.ok(drafted > 0, "drafts were verified");
    const info = await (await fetch(`${servers[1].url}/v1/info`)).json();
    assert.equal(info.drafter.bytes_loaded > 0, true);
    assert.equal(pipeline.replays, 0, "every cut was made in place");
  });

  test("a request cancelled mid-generation leaves nothing of its session or drafts on the tail", async (t) => {
    const {target, drafter} = pair();
    const {client, pipeline} = await startGateway(t, {file: target, nodes: NODES, draftModel: drafter, speculative: mtp, maxCachedSessions: 0});
    const tail = pipeline.nodes.at(-1);
    const stream = await client.completions.create({model: "tiny", prompt: "The capital of France is", max_tokens: 400, temperature: 0, stream: true});
    let chunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.text && ++chunks === 3) break;  // leaving the loop aborts the request
    }
    assert.equal(chunks, 3, "the generation was still under way");
    const deadline = Date.now() + 5000;
    while (tail.sessions().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(nodeSessions(pipeline), [0, 0]);
    assert.equal(tail.draftStats().stoppedSessions, 0);
    assert.ok(tail.draftStats().drafts > 0, "it drafted before it was cancelled");
  });
});

describe("MTP options", () => {
  test("--speculative mtp with --draft-model, refused where the pipeline cannot draft", async (t) => {
    const {target, drafter} = pair();
    const config = await gatewayConfig({model: target, speculative: "mtp", "draft-model": drafter}, {});
    assert.deepEqual(config.speculative, {maxDraft: 8, minNgram: 3, mtp: true});
    assert.equal(config.draftModel, drafter);
    assert.equal((await gatewayConfig({model: target}, {SPECULATIVE: "mtp", DRAFT_MODEL: drafter})).draftModel, drafter);
    await assert.rejects(gatewayConfig({model: target, speculative: "medusa"}, {}), /--speculative must be one of prompt-lookup, mtp, off, got "medusa"/);
    // The gateway refuses at open, the library at the Model: a last node without a draft model cannot draft by MTP.
    const refused = await serveGateway({model: target, nodes: NODES, modelId: "tiny", build: "single", port: 0, host: "127.0.0.1", speculative: mtp, log: () => {}});
    await assert.rejects(refused.opened, /--speculative mtp: the last node has no draft model/);
    await refused.shutdown();
    // The library: a last node without a draft model cannot draft by MTP.
    await assert.rejects(openModel({model: target, build: "single", speculative: mtp}), /speculative mtp: the pipeline's last node has no draft model/);
    const model = await openModel({model: target, nodes: NODES, build: "single", draftModel: drafter, speculative: mtp});
    t.after(() => model.close());
    const answer = await model.complete("hello", {max_tokens: 8, temperature: 0});
    assert.equal(typeof answer.choices[0].text, "string");
    await assert.rejects(Pipeline.open({model: target, nodes: "local:0-0,http://127.0.0.1:9", draftModel: drafter}),
      /a draft model is loaded by the node holding the head, here the remote http:\/\/127\.0\.0\.1:9: start it with serve --draft-model/);
  });
});
