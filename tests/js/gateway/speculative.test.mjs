// Speculative decoding by prompt lookup (docs/gateway.md): the drafter on its own, a pipeline step
// that answers every position's logits, and the gateway with drafts against plain decoding:
// greedy text identical to the Pipeline's own greedy decoding, seeded sampling, stop strings and
// logprobs identical to a gateway without drafts, the session's cache cut back to the kept
// tokens (a continued chat equals a cold one), and the same through remote nodes, whose cuts go
// over HTTP.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {gatewayConfigOf as gatewayConfig} from "../support/cli_config.mjs";
import {DraftPolicy} from "../../../js-glue/src/generation/draft_policy.js";
import {PromptLookup} from "../../../js-glue/src/generation/prompt_lookup.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {greedy, handChatPrompt, nodeSessions, startGateway, tiny} from "../support/gateway_fixture.mjs";
import {startServer} from "../support/server_process.mjs";

// minNgram 1 drafts at almost every step, so rejected drafts (and their cuts) happen often.
const eager = {maxDraft: 6, minNgram: 1};
const bytesOf = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);
const chat = (content) => [{role: "user", content}];
const PROMPTS = ["The capital of France is", "one two three one two three one two three", "hello"];

describe("prompt lookup drafts and the policy that verifies them", () => {
  test("the latest earlier match of the longest n-gram, run on into a loop, cut to the limit", () => {
    const lookup = new PromptLookup({minNgram: 2, maxNgram: 3, maxDraft: 5});
    // [7, 8, 9] recurs: the tokens after its latest earlier occurrence (index 4) are 1, 7, 8 ...
    assert.deepEqual(lookup.draft([7, 8, 9, 0, 7, 8, 9, 1, 7, 8, 9]), [1, 7, 8, 9, 1]);
    // A loop of period 1 drafts the whole length, not only the one token before the end.
    assert.deepEqual(lookup.draft([4, 4, 4]), [4, 4, 4, 4, 4]);
    // Only a 2-gram recurs: [5, 6] at index 0, followed by 2.
    assert.deepEqual(lookup.draft([5, 6, 2, 3, 5, 6]), [2, 3, 5, 6, 2]);
    assert.deepEqual(lookup.draft([5, 6, 2, 3, 5, 6], 2), [2, 3]);
    assert.deepEqual(lookup.draft([5, 6, 2, 3, 5, 6], 0), []);
    assert.deepEqual(lookup.draft([1, 2, 3, 4, 5]), [], "nothing recurs");
    assert.deepEqual(lookup.draft([3]), []);
  });

  test("the policy: a short first draft, longer ones while they are kept, none after rejections, a retry once they fade", () => {
    const policy = new DraftPolicy();
    // q = 3/4 and a row costing half a step: one drafted token gains 1.75 / 1.5, two 2.31 / 2.
    assert.equal(policy.length(8), 1);
    assert.equal(policy.length(0), 0);
    policy.stepped(0, 0, 100);  // a plain step: 100 ms
    for (let i = 0; i < 20; i++) {
      const d = Math.max(1, policy.length(8));
      policy.stepped(d, d, 100 * (1 + 0.5 * d));
    }
    const confident = policy.length(8);
    assert.ok(confident >= 4, `after 20 drafts kept whole at a row cost of 0.5: ${confident} tokens`);
    for (let i = 0; i < 4; i++) policy.stepped(confident, 0, 100 * (1 + 0.5 * confident));
    assert.equal(policy.length(8), 0, "rejected four times in a row: plain steps");
    let plain = 0;
    while (policy.length(8) === 0 && plain < 200) {
      policy.stepped(0, 0, 100);
      plain++;
    }
    assert.ok(plain > 3 && plain < 200, `drafting again after ${plain} plain steps`);
  });

  test("the policy measures a row's cost: cheap rows make longer drafts worth it", () => {
    const run = (rowCost) => {
      const policy = new DraftPolicy();
      policy.stepped(0, 0, 100);
      for (let i = 0; i < 6; i++) {
        const d = Math.max(1, policy.length(8));
        policy.stepped(d, d - (i % 2), 100 * (1 + rowCost * d));
      }
      return policy.length(8);
    };
    const cheap = run(0.05);
    const dear = run(1.5);
    assert.ok(cheap >= 4 && dear === 0, `a row at 5% of a step: ${cheap} tokens; at 150%: ${dear}`);
  });

  test("the policy times a plain step after its first draft: drafts dearer than they yield stop though every one is kept", () => {
    // MTP drafts whenever the policy verifies, so without the plain step it asks for, no step would
    // be plain and the prior row cost would stand. Here a drafted step of d tokens costs 1 + 1.5·d
    // plain steps (its rows and the last node's d drafts): never worth it, even all kept.
    const policy = new DraftPolicy();
    const lengths = [];
    for (let i = 0; i < 12; i++) {
      const d = policy.length(8);
      lengths.push(d);
      policy.stepped(d, d, 100 * (1 + 1.5 * d), d);
    }
    assert.equal(lengths[0], 1, "a first draft at the prior");
    assert.equal(lengths[1], 0, "then a plain step, timed");
    // One more draft at the prior row cost (the first one's time is not taken), which prices it.
    assert.ok(lengths[2] > 0 && lengths.slice(3).every((d) => d === 0), `no draft once the cost is known: ${lengths}`);
  });

  test("a step in which the last node drafted is not a plain step's time", () => {
    const run = (askedOnPlainSteps) => {
      const policy = new DraftPolicy();
      policy.stepped(0, 0, 100);
      // Plain steps that had the last node draft 4 tokens at 100 ms each: 5 times a plain step.
      for (let i = 0; i < 10; i++) policy.stepped(0, 0, 500, askedOnPlainSteps);
      // A drafted step of one token kept, at half a plain step a row (4 drafts made in it too).
      for (let i = 0; i < 3; i++) policy.stepped(1, 1, 100 * (1 + 0.5) + 400, 4);
      return policy.length(8);
    };
    // Timed against 100 ms, the drafted steps cost 4.5 rows a draft: no draft pays. Had the
    // drafting steps counted as plain (500 ms), a row would seem nearly free and drafts long.
    assert.equal(run(4), 0);
    assert.ok(run(0) >= 4, "with the same times reported as plain steps, rows seem cheap");
  });

  test("bad options are refused by name", () => {
    assert.throws(() => new PromptLookup({minNgram: 0}), /n-gram lengths 0\.\.5/);
    assert.throws(() => new PromptLookup({minNgram: 4, maxNgram: 3}), /n-gram lengths 4\.\.3/);
    assert.throws(() => new PromptLookup({maxDraft: 0}), /maxDraft 0/);
  });

  test("the gateway's options: off by name, prompt-lookup with its draft length, bad values refused", async () => {
    const model = tiny();
    assert.equal((await gatewayConfig({model, speculative: "off"}, {})).speculative, null);
    assert.deepEqual((await gatewayConfig({model}, {SPECULATIVE: "prompt-lookup", DRAFT_MAX: "5", DRAFT_MIN_NGRAM: "2"})).speculative, {maxDraft: 5, minNgram: 2});
    await assert.rejects(gatewayConfig({model, speculative: "medusa"}, {}), /--speculative must be one of prompt-lookup, mtp, off, got "medusa"/);
    await assert.rejects(gatewayConfig({model, speculative: "prompt-lookup", "draft-max": "65"}, {}), /--draft-max must be an integer from 1 to 64, got "65"/);
  });
});

describe("a step answering every position", () => {
  // Every row of a step of several tokens is the logits a step ending at that row gives: what
  // verifying a draft in one forward relies on.
  async function checkRows(pipeline) {
    const prompt = handChatPrompt(pipeline.tokenizer, chat("hello"));
    const tail = [40, 41, 42, 43, 44];
    const one = [];
    for (const [i, id] of tail.entries()) {
      const out = await pipeline.step("one-by-one", i === 0 ? [...prompt, id] : [id]);
      one.push(out.logits);
    }
    await pipeline.step("together", [...prompt, tail[0]]);
    const rows = (await pipeline.step("together", tail.slice(1), {allRows: true})).logits;
    const nVocab = one[0].length;
    assert.equal(rows.length, 4 * nVocab);
    for (let r = 0; r < 4; r++) assert.ok(bytesOf(rows.subarray(r * nVocab, (r + 1) * nVocab)).equals(bytesOf(one[r + 1])), `row ${r}`);
    // Cut back over the last three, the session goes on as if they were never sent.
    await pipeline.truncate("together", prompt.length + 2);
    const again = (await pipeline.step("together", [tail[2]])).logits;
    assert.ok(bytesOf(again).equals(bytesOf(one[2])));
  }

  test("local nodes", async (t) => {
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single"});
    t.after(() => pipeline.close());
    await checkRows(pipeline);
  });

  test("remote nodes", async (t) => {
    const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", tiny(), "--layers", layers]})));
    const pipeline = await Pipeline.open({model: tiny(), nodes: servers.map((s) => s.url).join(",")});
    t.after(() => pipeline.close());
    await checkRows(pipeline);
  });
});

describe("gateway with prompt lookup", () => {
  test("greedy: the Pipeline's own greedy text, with drafts kept and rejected, and the sessions cut to what they hold", async (t) => {
    const {client, pipeline} = await startGateway(t, {speculative: eager, maxCachedSessions: 0});
    let accepted = 0;
    let rejected = 0;
    for (const prompt of PROMPTS) {
      const expected = await greedy(pipeline, pipeline.tokenizer.encode(prompt), 40);
      const r = await client.completions.create({model: "tiny", prompt, max_tokens: 40, temperature: 0});
      assert.equal(r.choices[0].text, expected.text, prompt);
      assert.equal(r.usage.completion_tokens, expected.ids.length + (r.choices[0].finish_reason === "stop" ? 1 : 0));
      accepted += r.usage.completion_tokens_details.accepted_prediction_tokens;
      rejected += r.usage.completion_tokens_details.rejected_prediction_tokens;
      const messages = chat(prompt);
      const chatExpected = await greedy(pipeline, handChatPrompt(pipeline.tokenizer, messages), 24);
      const c = await client.chat.completions.create({model: "tiny", messages, max_tokens: 24, temperature: 0});
      assert.equal(c.choices[0].message.content, chatExpected.text, prompt);
    }
    assert.ok(accepted > 0 && rejected > 0, `drafts kept ${accepted}, rejected ${rejected}: both paths ran`);
    assert.deepEqual(nodeSessions(pipeline), [0, 0]);
  });

  test("seeded sampling, stop strings across tokens, logprobs and streams: the bytes of a gateway without drafts", async (t) => {
    const plain = await startGateway(t, {});
    const drafting = await startGateway(t, {speculative: eager});
    let drafted = 0;
    const requests = [
      ...PROMPTS.map((content, i) => ({messages: chat(content), max_tokens: 32, temperature: 0.7, top_k: 3, seed: 11 + i})),
      {messages: chat("hello"), max_tokens: 32, temperature: 0, logprobs: true, top_logprobs: 3},
    ];
    // A stop string made of the greedy reply's text across a token boundary.
    const greedyText = (await plain.client.chat.completions.create({model: "tiny", messages: chat("hello"), max_tokens: 24, temperature: 0})).choices[0].message.content;
    requests.push({messages: chat("hello"), max_tokens: 24, temperature: 0, stop: [greedyText.slice(9, 14)]});
    for (const body of requests) {
      const a = await plain.client.chat.completions.create({model: "tiny", ...body});
      const b = await drafting.client.chat.completions.create({model: "tiny", ...body});
      assert.equal(b.choices[0].message.content, a.choices[0].message.content, JSON.stringify(body));
      assert.equal(b.choices[0].finish_reason, a.choices[0].finish_reason);
      if (body.stop) assert.equal(a.choices[0].finish_reason, "stop", "the stop string was met");
      assert.deepEqual(b.choices[0].logprobs, a.choices[0].logprobs);
      assert.equal(b.usage.completion_tokens, a.usage.completion_tokens);
      drafted += b.usage.completion_tokens_details.accepted_prediction_tokens + b.usage.completion_tokens_details.rejected_prediction_tokens;
      const stream = await drafting.client.chat.completions.create({model: "tiny", ...body, stream: true});
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      assert.equal(text, a.choices[0].message.content);
    }
    assert.ok(drafted > 0);
  });

  test("a chat continued after drafted turns: the bytes of a cold one", async (t) => {
    const warm = await startGateway(t, {speculative: eager});
    const cold = await startGateway(t, {maxCachedSessions: 0});
    let messages = chat("one two three one two three");
    for (let turn = 0; turn < 3; turn++) {
      const body = {model: "tiny", messages, max_tokens: 20, temperature: 0};
      const w = await warm.client.chat.completions.create(body);
      const c = await cold.client.chat.completions.create(body);
      assert.equal(w.choices[0].message.content, c.choices[0].message.content, `turn ${turn}`);
      if (turn > 0) assert.ok(w.usage.prompt_tokens_details.cached_tokens > 0, `turn ${turn} reused its session`);
      messages = [...messages, {role: "assistant", content: w.choices[0].message.content}, {role: "user", content: `again ${turn}`}];
    }
  });

  test("through remote nodes: cuts over HTTP, the Pipeline's greedy text", async (t) => {
    const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", tiny(), "--layers", layers]})));
    const {client, pipeline} = await startGateway(t, {nodes: servers.map((s) => s.url).join(","), speculative: eager, maxCachedSessions: 0});
    const local = await Pipeline.open({model: tiny(), build: "single"});
    t.after(() => local.close());
    let rejected = 0;
    for (const prompt of PROMPTS) {
      const expected = await greedy(local, local.tokenizer.encode(prompt), 32);
      const r = await client.completions.create({model: "tiny", prompt, max_tokens: 32, temperature: 0});
      assert.equal(r.choices[0].text, expected.text, prompt);
      rejected += r.usage.completion_tokens_details.rejected_prediction_tokens;
    }
    assert.ok(rejected > 0, "some drafts were cut back on the remote nodes");
    assert.equal(pipeline.replays, 0, "every cut was made in place");
  });
});
