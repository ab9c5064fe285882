// js-glue/src/generation/answer.js with chat_output.js's reader: a Gemma 4 answer with tools as the
// request fields params.js gives (tools, toolChoice, parallelToolCalls), turned into OpenAI's
// whole message and stream chunks; the expected objects are OpenAI's documented shapes written
// out by hand.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Answer} from "../../../js-glue/src/generation/answer.js";
import {chatOutputReader} from "../../../js-glue/src/generation/chat_output.js";
import {ResponseShapes} from "../../../js-glue/src/generation/responses.js";

const Q = '<|"|>';
const tool = (name) => ({type: "function", function: {name, parameters: {type: "object"}}});
const chat = (extra) => ({kind: "chat", tools: [tool("get_weather"), tool("get_time")], ...extra});
const head = {id: "chatcmpl-1", created: 7, model: "m", kind: "chat"};
const USAGE = {promptTokens: 5, completionTokens: 9, cachedTokens: 0};
const TIMINGS = {cachedTokens: 0, promptTokens: 5, promptMs: 10, predictedTokens: 9, predictedMs: 16};
const END = {usage: USAGE, timings: TIMINGS};
// The model's text as the generation hands it out, in pieces that split markers.
const PIECES = ["<|chan", "nel>thought\nHm.<channel|>On it.<|tool_", `call>call:get_weather{city:${Q}Oslo${Q}}<tool_call|>`, "<|tool_call>call:get_time{}<tool_call|>"];

function answerOf(request, includeUsage = false) {
  const reader = chatOutputReader(request, true);
  let n = 0;
  if (reader) reader.newId = () => `call_${n++}`;
  return new Answer(new ResponseShapes(head, () => "", false), () => reader, {includeUsage});
}

// The whole answer of a one-choice generation that ended with finishReason.
function finish(answer, finishReason) {
  answer.add({index: 0, finishReason});
  return answer.complete(END);
}

describe("a Gemma 4 answer with tools", () => {
  test("whole: content, reasoning_content, tool_calls and finish_reason tool_calls", () => {
    const answer = answerOf(chat());
    for (const text of PIECES) answer.add({index: 0, text, token: {id: 0}});
    const r = finish(answer, "stop");
    assert.deepEqual(r.choices, [{
      index: 0,
      message: {
        role: "assistant", content: "On it.", reasoning_content: "Hm.", refusal: null,
        tool_calls: [
          {id: "call_0", type: "function", function: {name: "get_weather", arguments: '{"city":"Oslo"}'}},
          {id: "call_1", type: "function", function: {name: "get_time", arguments: "{}"}},
        ],
      },
      logprobs: null,
      finish_reason: "tool_calls",
    }]);
  });

  test("streamed: the deltas OpenAI sends, a call's id, type and name before its arguments", () => {
    const answer = answerOf(chat(), true);
    const chunks = [...answer.first(), ...PIECES.flatMap((text) => answer.next({index: 0, text, token: {id: 0}})), ...answer.next({index: 0, finishReason: "stop"}), ...answer.last(END)];
    assert.deepEqual(chunks.map((c) => c.choices[0]?.delta ?? null), [
      {role: "assistant", content: "", refusal: null},
      {reasoning_content: "Hm."},
      {content: "On it."},
      {tool_calls: [{index: 0, id: "call_0", type: "function", function: {name: "get_weather", arguments: ""}}]},
      {tool_calls: [{index: 0, function: {arguments: '{"city":"Oslo"}'}}]},
      {tool_calls: [{index: 1, id: "call_1", type: "function", function: {name: "get_time", arguments: ""}}]},
      {tool_calls: [{index: 1, function: {arguments: "{}"}}]},
      {},
      null,
    ]);
    assert.deepEqual(chunks.map((c) => c.choices[0]?.finish_reason ?? null), [null, null, null, null, null, null, null, "tool_calls", null]);
    assert.deepEqual(chunks.at(-1).usage.total_tokens, 14);
    assert.ok(chunks.slice(0, -1).every((c) => c.object === "chat.completion.chunk" && c.usage === null));
    assert.equal(chunks.at(-1).timings.predicted_n, 9);
    assert.ok(chunks.slice(0, -1).every((c) => !("timings" in c)), "timings on the usage chunk only");
  });

  test("timings: on the whole answer, and on a stream without usage on the last choice's finish chunk only", () => {
    const whole = answerOf(chat());
    for (const text of PIECES) whole.add({index: 0, text});
    assert.deepEqual(finish(whole, "stop").timings, {
      cache_n: 0, prompt_n: 5, prompt_ms: 10, prompt_per_token_ms: 2, prompt_per_second: 500,
      predicted_n: 9, predicted_ms: 16, predicted_per_token_ms: 2, predicted_per_second: 500,
    });
    const reader = () => chatOutputReader({kind: "chat"}, false);
    const two = new Answer(new ResponseShapes(head, () => "", false), reader, {n: 2});
    const chunks = [...two.first(), ...two.next({index: 0, text: "a"}), ...two.next({index: 0, finishReason: "stop"}),
      ...two.next({index: 1, text: "b"}), ...two.next({index: 1, finishReason: "length"}), ...two.last(END)];
    assert.deepEqual(chunks.map((c) => [c.choices[0].index, c.choices[0].finish_reason, "timings" in c]), [
      [0, null, false], [1, null, false], [0, null, false], [0, "stop", false], [1, null, false], [1, "length", true],
    ]);
    assert.equal(chunks.at(-1).timings.prompt_n, 5);
  });

  test("tool_choice none leaves calls as content; a named tool_choice reads calls to that function only", () => {
    const none = answerOf(chat({toolChoice: "none"}));
    for (const text of PIECES) none.add({index: 0, text});
    const message = finish(none, "stop").choices[0].message;
    assert.equal(message.content, `On it.<|tool_call>call:get_weather{city:${Q}Oslo${Q}}<tool_call|><|tool_call>call:get_time{}<tool_call|>`);
    assert.equal(message.tool_calls, undefined);
    const named = answerOf(chat({toolChoice: {type: "function", function: {name: "get_time"}}}));
    for (const text of PIECES) named.add({index: 0, text});
    const only = finish(named, "stop").choices[0].message;
    assert.deepEqual(only.tool_calls.map((c) => c.function.name), ["get_time"]);
    assert.equal(only.content, `On it.<|tool_call>call:get_weather{city:${Q}Oslo${Q}}<tool_call|>`);
  });

  test("parallelToolCalls false reads the first call; an answer cut by length keeps finish_reason length", () => {
    const one = answerOf(chat({parallelToolCalls: false}));
    for (const text of PIECES) one.add({index: 0, text});
    const r = finish(one, "length");
    assert.deepEqual(r.choices[0].message.tool_calls.map((c) => c.function.name), ["get_weather"]);
    assert.equal(r.choices[0].message.content, "On it.<|tool_call>call:get_time{}<tool_call|>");
    assert.equal(r.choices[0].finish_reason, "length");
  });

  test("a completion's text is not read, nor another model's; a declaration without a name declares nothing", () => {
    assert.equal(chatOutputReader({kind: "completion"}, true), null);
    assert.equal(chatOutputReader(chat(), false), null);
    assert.deepEqual(chatOutputReader({kind: "chat", tools: [null, {}, {function: {name: ""}}, tool("f")]}, true).tools, ["f"]);
    assert.deepEqual(chatOutputReader({kind: "chat", tools: "f"}, true).tools, []);
  });
});
