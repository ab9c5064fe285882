// The sampling fields of the OpenAI request through the official openai client: n choices that
// share one prefill, logit_bias, the penalties and min_p, and their bad values refused by name.
// Expected tokens come from the Pipeline stepped directly with logits adjusted here by hand (or,
// for seeded draws, the Sampler the gateway's own unit test checks against its definition).
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Sampler} from "../../../js-glue/src/tokens/sampler.js";
import {argmax, endIds, handChatPrompt, startGateway} from "../support/gateway_fixture.mjs";

const hello = [{role: "user", content: "hello"}];

// Every step the pipeline runs: the number of tokens fed.
function countSteps(pipeline) {
  const step = pipeline.step.bind(pipeline);
  const fed = [];
  pipeline.step = (session, tokens, options) => {
    fed.push(tokens.length);
    return step(session, tokens, options);
  };
  return fed;
}

// A decode straight through the Pipeline in a session of its own: choose(logits, generated) picks
// each token -> {ids (the end token excluded), sampled (included)}.
async function decode(pipeline, prompt, maxTokens, choose) {
  const ends = endIds(pipeline.tokenizer);
  const session = `reference-${Math.random()}`;
  const ids = [];
  let input = prompt;
  try {
    while (ids.length < maxTokens) {
      const id = choose((await pipeline.step(session, input)).logits, ids);
      if (ends.has(id)) return {ids, sampled: ids.length + 1};
      ids.push(id);
      input = [id];
    }
    return {ids, sampled: ids.length};
  } finally {
    await pipeline.dropSession(session);
  }
}

const seeded = (options) => {
  const sampler = new Sampler(options);
  return (logits, ids) => {
    if (ids.length) sampler.accept(ids.at(-1));
    return sampler.sample(logits);
  };
};

describe("gateway sampling fields", () => {
  test("n: 3 chat choices from one prefill, each the seeded draw of its own index, usage over all", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const prompt = handChatPrompt(pipeline.tokenizer, hello);
    const expected = [];
    for (let i = 0; i < 3; i++) expected.push(await decode(pipeline, prompt, 10, seeded({temperature: 1.2, topK: 50, seed: 40 + i})));
    const fed = countSteps(pipeline);
    const r = await client.chat.completions.create({model: "tiny", messages: hello, n: 3, max_tokens: 10, temperature: 1.2, top_k: 50, seed: 40});
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    assert.deepEqual(r.choices.map((c) => c.message.content), expected.map((e) => pipeline.tokenizer.decode(e.ids)));
    assert.notEqual(new Set(expected.map((e) => e.ids.join())).size, 1, "the three seeds drew the same tokens: the test shows nothing");
    assert.equal(r.usage.prompt_tokens, prompt.length);
    assert.equal(r.usage.completion_tokens, expected.reduce((n, e) => n + e.sampled, 0));
    // One prefill, in two steps around the checkpoint where the model's turn opens (its last
    // <|turn>), then one token per step, no replay.
    const [turn] = pipeline.tokenizer.encode("<|turn>", {addBos: false, parseSpecial: true});
    const opens = prompt.lastIndexOf(turn);
    assert.deepEqual(fed.filter((n) => n > 1), [opens, prompt.length - opens]);
    assert.equal(fed.length, 2 + expected.reduce((n, e) => n + e.sampled - 1, 0));
    assert.equal(pipeline.replays, 0);
  });

  test("n: 3 completions streamed: each choice's deltas carry its index and end with its finish_reason", async (t) => {
    const {client} = await startGateway(t);
    const body = {model: "tiny", prompt: "once upon a time", n: 3, max_tokens: 8, temperature: 0.9, seed: 3};
    const whole = await client.completions.create(body);
    const texts = ["", "", ""];
    const finishes = [];
    let usage = null;
    for await (const chunk of await client.completions.create({...body, stream: true, stream_options: {include_usage: true}})) {
      usage = chunk.usage ?? usage;
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason) finishes.push(c.index);
      }
    }
    assert.deepEqual(texts, whole.choices.map((c) => c.text));
    assert.deepEqual(finishes, [0, 1, 2]);
    // The same counts; the stream's prompt came partly from the session the first request kept.
    assert.deepEqual([usage.prompt_tokens, usage.completion_tokens], [whole.usage.prompt_tokens, whole.usage.completion_tokens]);
    assert.ok(usage.prompt_tokens_details.cached_tokens > 0);
    const chat = await client.chat.completions.create({model: "tiny", messages: hello, n: 2, max_tokens: 6, temperature: 0.9, seed: 3, stream: true});
    const roles = [];
    const chatTexts = ["", ""];
    for await (const chunk of chat) {
      const [c] = chunk.choices;
      if (c.delta.role) roles.push(c.index);
      chatTexts[c.index] += c.delta.content ?? "";
    }
    assert.deepEqual(roles, [0, 1]);
    const chatWhole = await client.chat.completions.create({model: "tiny", messages: hello, n: 2, max_tokens: 6, temperature: 0.9, seed: 3});
    assert.deepEqual(chatTexts, chatWhole.choices.map((c) => c.message.content));
  });

  test("logit_bias: +100 forces a token, -100 bans the greedy one", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const {tokenizer} = pipeline;
    const prompt = tokenizer.encode("once upon a time");
    const forced = tokenizer.encode(" castle", {addBos: false})[0];
    const r = await client.completions.create({model: "tiny", prompt: "once upon a time", max_tokens: 5, temperature: 1, seed: 1, logit_bias: {[forced]: 100}});
    assert.equal(r.choices[0].text, tokenizer.decode([forced, forced, forced, forced, forced]));
    const greedy = await decode(pipeline, prompt, 5, (logits) => argmax(logits));
    const banned = greedy.ids[0];
    const expected = await decode(pipeline, prompt, 5, (logits) => argmax(logits.map((l, id) => (id === banned ? l - 100 : l))));
    const b = await client.completions.create({model: "tiny", prompt: "once upon a time", max_tokens: 5, temperature: 0, logit_bias: {[banned]: -100}});
    assert.equal(b.choices[0].text, tokenizer.decode(expected.ids));
    assert.notEqual(expected.ids[0], banned);
  });

  test("presence, frequency and repetition penalties change greedy choices as defined", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const prompt = pipeline.tokenizer.encode("the the the the");
    const plain = await decode(pipeline, prompt, 12, (logits) => argmax(logits));
    const cases = {
      frequency_penalty: [1.5, (x, id, generated) => x - 1.5 * generated.filter((g) => g === id).length],
      presence_penalty: [2, (x, id, generated) => x - (generated.includes(id) ? 2 : 0)],
      repetition_penalty: [1.8, (x, id, generated) => ([...prompt, ...generated].includes(id) ? (x > 0 ? x / 1.8 : x * 1.8) : x)],
    };
    for (const [field, [value, adjust]] of Object.entries(cases)) {
      const expected = await decode(pipeline, prompt, 12, (logits, generated) => argmax(logits.map((x, id) => adjust(x, id, generated))));
      assert.notDeepEqual(expected.ids, plain.ids, `${field} ${value} changes nothing here: the case is not crafted well`);
      const r = await client.completions.create({model: "tiny", prompt: "the the the the", max_tokens: 12, temperature: 0, [field]: value});
      assert.equal(r.choices[0].text, pipeline.tokenizer.decode(expected.ids), field);
    }
  });

  test("min_p 1 keeps only the best token: a hot temperature draws the greedy answer", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const prompt = handChatPrompt(pipeline.tokenizer, hello);
    const greedy = await decode(pipeline, prompt, 8, (logits) => argmax(logits));
    const r = await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 8, temperature: 2, min_p: 1, seed: 5});
    assert.equal(r.choices[0].message.content, pipeline.tokenizer.decode(greedy.ids));
  });

  test("bad values are a 400 naming the field", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const refuses = (body, param) => assert.rejects(client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 2, ...body}),
      (error) => error.status === 400 && error.param === param && typeof error.error.message === "string");
    await refuses({n: 9}, "n");
    await refuses({n: 0}, "n");
    await refuses({logit_bias: {[pipeline.tokenizer.nVocab]: 1}}, "logit_bias");
    await refuses({logit_bias: {"5": 200}}, "logit_bias");
    await refuses({min_p: -0.1}, "min_p");
    await refuses({presence_penalty: 2.5}, "presence_penalty");
    await refuses({frequency_penalty: "high"}, "frequency_penalty");
    await refuses({repetition_penalty: 0}, "repetition_penalty");
  });
});
