// The library's chat and completion API (openModel, Model.chat, Model.complete) on the tiny
// model's two layers as two local nodes: answers whole and streamed hold the tokens of greedy
// decoding run straight through the Pipeline (no generation code), a later turn continues the
// earlier turn's session, a fired AbortSignal or a loop left early stops the generation and frees
// its session on every node, and bad options are refused by name.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Model, OpenAIError, openModel} from "../../../js-glue/src/index.js";
import {gemmaVocab, greedy, handChatPrompt, nodeSessions, tiny} from "../support/gateway_fixture.mjs";
import {until} from "../support/wait.mjs";

async function open(t, options = {}) {
  const model = await openModel({model: tiny(), nodes: "local:0-0,local:1-1", build: "single", ...options});
  t.after(() => model.close());
  return model;
}

// The pipeline's steps counted, to see a generation stop.
function countSteps(pipeline) {
  const counter = {steps: 0};
  const step = pipeline.step.bind(pipeline);
  pipeline.step = (...args) => {
    counter.steps++;
    return step(...args);
  };
  return counter;
}

const user = (content) => ({role: "user", content});

describe("the library's Model", () => {
  test("chat() answers whole and streamed with the tokens of greedy decoding", async (t) => {
    const model = await open(t, {id: "tiny-lib"});
    const messages = [user("The capital of France is")];
    const expected = await greedy(model.pipeline, handChatPrompt(model.tokenizer, messages), 8);

    const whole = await model.chat(messages, {max_tokens: 8, temperature: 0});
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.model, "tiny-lib");
    assert.equal(whole.choices[0].message.content, expected.text);
    assert.equal(whole.usage.completion_tokens, expected.ids.length);
    assert.equal(whole.usage.prompt_tokens, handChatPrompt(model.tokenizer, messages).length);
    assert.equal(whole.timings.predicted_n, expected.ids.length);

    const chunks = [];
    for await (const chunk of model.chat(messages, {max_tokens: 8, temperature: 0, stream: true})) chunks.push(chunk);
    assert.ok(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "tiny-lib"));
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), expected.text);
    assert.equal(chunks.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
    assert.equal(chunks.at(-1).timings.predicted_n, expected.ids.length);
  });

  test("complete() continues text and token ids as greedy decoding does", async (t) => {
    const model = await open(t);
    const ids = model.tokenizer.encode("Once upon a time", {addBos: true});
    const expected = await greedy(model.pipeline, ids, 6);
    const fromIds = await model.complete(ids, {max_tokens: 6, temperature: 0});
    assert.equal(fromIds.object, "text_completion");
    assert.equal(fromIds.choices[0].text, expected.text);
    const fromText = await model.complete("Once upon a time", {max_tokens: 6, temperature: 0});
    assert.equal(fromText.choices[0].text, expected.text);
    let streamed = "";
    for await (const chunk of model.complete(ids, {max_tokens: 6, temperature: 0, stream: true})) streamed += chunk.choices[0]?.text ?? "";
    assert.equal(streamed, expected.text);
  });

  test("a later turn continues the session of the turn before, with the bytes of a cold model", async (t) => {
    // The real Gemma vocabulary: a reply tokenizes back as it was generated (docs/gateway.md).
    const warm = await open(t, {model: gemmaVocab()});
    const cold = await open(t, {model: gemmaVocab(), maxCachedSessions: 0});
    let messages = [user("Hello, how are you?")];
    let previous = null;
    for (let turn = 0; turn < 3; turn++) {
      const options = {max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3};
      const [w, c] = [await warm.chat(messages, options), await cold.chat(messages, options)];
      assert.deepEqual(w.choices, c.choices, `turn ${turn}: text, tokens and every logprob the same`);
      assert.equal(c.usage.prompt_tokens_details.cached_tokens, 0);
      // The kept session holds the last prompt and every generated token but the last (never fed).
      const expected = previous ? previous.usage.prompt_tokens + previous.usage.completion_tokens - 1 : 0;
      assert.equal(w.usage.prompt_tokens_details.cached_tokens, expected, `turn ${turn}`);
      previous = w;
      // The answer's message as it came (refusal: null and all), as a caller hands it back.
      messages = [...messages, w.choices[0].message, user(`And point ${turn}?`)];
    }
  });

  test("a signal that fires mid-stream rejects with its reason, stops the generation and frees its session", async (t) => {
    const model = await open(t, {maxCachedSessions: 0});
    const counter = countSteps(model.pipeline);
    const controller = new AbortController();
    let chunks = 0;
    await assert.rejects(async () => {
      for await (const chunk of model.chat([user("hello")], {max_tokens: 400, temperature: 0, stream: true, signal: controller.signal})) {
        if (chunk.choices[0]?.delta.content && ++chunks === 3) controller.abort();
      }
    }, (error) => error === controller.signal.reason && error.name === "AbortError");
    await until(() => nodeSessions(model.pipeline).every((n) => n === 0), "the sessions to be dropped");
    assert.ok(counter.steps < 10, `${counter.steps} steps for a stream aborted after 3 chunks`);

    const whole = new AbortController();
    const pending = model.chat([user("hello")], {max_tokens: 400, temperature: 0, signal: whole.signal});
    setTimeout(() => whole.abort(new Error("enough")), 50);
    await assert.rejects(pending, /enough/);
    await until(() => nodeSessions(model.pipeline).every((n) => n === 0), "the sessions to be dropped");

    const before = counter.steps;
    await assert.rejects(model.chat([user("hello")], {signal: AbortSignal.abort()}), {name: "AbortError"});
    assert.equal(counter.steps, before, "an aborted signal started a generation");
    // The model serves on.
    assert.equal((await model.chat([user("hello")], {max_tokens: 2, temperature: 0})).choices.length, 1);
  });

  test("a stream left early stops its generation and frees its session", async (t) => {
    const model = await open(t, {maxCachedSessions: 0});
    const counter = countSteps(model.pipeline);
    for await (const chunk of model.chat([user("hello")], {max_tokens: 400, temperature: 0, stream: true})) {
      if (chunk.choices[0]?.delta.content) break;
    }
    await until(() => nodeSessions(model.pipeline).every((n) => n === 0), "the sessions to be dropped");
    assert.ok(counter.steps < 5, `${counter.steps} steps for a stream left after its first text`);
  });

  test("bad options are refused by name, before any step", async (t) => {
    const model = await open(t);
    const counter = countSteps(model.pipeline);
    const refusal = (param) => (error) => error instanceof OpenAIError && error.status === 400 && error.param === param;
    await assert.rejects(model.chat([user("hi")], {temperature: "abc"}), refusal("temperature"));
    await assert.rejects(model.chat([user("hi")], {signal: "soon"}), refusal("signal"));
    await assert.rejects(model.chat([user("hi")], {model: "other"}), refusal("model"));
    await assert.rejects(model.chat([user("hi")], null), refusal("options"));
    await assert.rejects(model.chat([{role: "wizard", content: "hi"}]), refusal("messages[0].role"));
    await assert.rejects(model.complete([model.tokenizer.nVocab]), refusal("prompt"));
    await assert.rejects(async () => {
      for await (const _ of model.chat([user("hi")], {stream: true, max_tokens: 0}));
    }, refusal("max_tokens"));
    assert.equal(counter.steps, 0);
  });

  test("a Model over a pipeline the caller opened leaves it open", async (t) => {
    const owner = await open(t);
    const model = new Model(owner.pipeline, {id: "borrowed"});
    assert.equal((await model.chat([user("hi")], {max_tokens: 2, temperature: 0})).model, "borrowed");
    await model.close();
    assert.equal((await owner.chat([user("hi")], {max_tokens: 2, temperature: 0})).choices.length, 1);
  });
});
