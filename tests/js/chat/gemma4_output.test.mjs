// js-glue/src/chat/gemma4_output.js on its own: the deltas a stream gives, and that any split of
// an output into pieces (inside a marker, a call, a surrogate pair) gives the whole's message.
// Its agreement with llama.cpp is gemma4_output_llama.test.mjs.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Gemma4Output, parseGemma4Output, toolCallId} from "../../../js-glue/src/chat/gemma4_output.js";

const Q = '<|"|>';
const TOOLS = {tools: ["get_weather", "add"]};
const ids = () => {
  let n = 0;
  return () => `call_${n++}`;
};

const OUTPUTS = [
  "Hello 😀 world",
  "<|channel>thought\n  Let me think 😀<channel|>Answer<channel|>",
  `<|channel>thought\nweather<channel|>Checking.<|tool_call>call:get_weather{city:${Q}Zürich "old" town${Q}}<tool_call|><|tool_call>call:add{a:[1,{b:-2.5}]}<tool_call|>`,
  `A <|tool_call>call:nosuch{}<tool_call|> B <|tool_call>call:add{a:1 ,b:2}<tool_call|> C <|tool_call>call:add{x:${Q}<tool_call|>${Q}}<tool_call|>`,
  `<|tool_call>call:get_weather{city:${Q}Par`,
  "x <|channel>not a thought <|chan",
];

function streamed(pieces, options) {
  const out = new Gemma4Output({...options, newId: ids()});
  const deltas = pieces.flatMap((p) => out.push(p));
  return {deltas: [...deltas, ...out.end()], message: out.message};
}

describe("Gemma 4 output in pieces", () => {
  test("a thought, content and two calls give these deltas", () => {
    const {deltas} = streamed([OUTPUTS[2]], TOOLS);
    assert.deepEqual(deltas, [
      {reasoning_content: "weather"},
      {content: "Checking."},
      {tool_call: {index: 0, id: "call_0", name: "get_weather", arguments: '{"city":"Zürich \\"old\\" town"}'}},
      {tool_call: {index: 1, id: "call_1", name: "add", arguments: '{"a":[1,{"b":-2.5}]}'}},
    ]);
  });

  test("text that may still be a marker is held back until it is not", () => {
    const out = new Gemma4Output(TOOLS);
    assert.deepEqual(out.push("Hi <|tool"), [{content: "Hi "}]);
    assert.deepEqual(out.push("s> <|channel"), [{content: "<|tools> "}]);
    assert.deepEqual(out.push(">though"), []);
    assert.deepEqual(out.push("t\n\n"), []);
    assert.deepEqual(out.push("so<channel"), [{reasoning_content: "so"}]);
    assert.deepEqual(out.push("|>"), []);
    assert.deepEqual(out.end(), []);
    assert.deepEqual(out.message, {content: "Hi <|tools> ", reasoning_content: "so", tool_calls: []});
  });

  test("a call is given out once its closing marker is read", () => {
    const out = new Gemma4Output({...TOOLS, newId: ids()});
    assert.deepEqual(out.push("<|tool_call>call:add{a:1}"), []);
    assert.deepEqual(out.push("<tool_call"), []);
    assert.deepEqual(out.push("|>"), [{tool_call: {index: 0, id: "call_0", name: "add", arguments: '{"a":1}'}}]);
  });

  test("a call to an undeclared function is content as soon as its name says so", () => {
    const out = new Gemma4Output(TOOLS);
    assert.deepEqual(out.push("<|tool_call>call:ad"), []);
    assert.deepEqual(out.push("x{"), [{content: "<|tool_call>call:adx{"}]);
  });

  test("without tools a call is content; with parallel_tool_calls false only the first is a call", () => {
    const two = "<|tool_call>call:add{a:1}<tool_call|><|tool_call>call:add{a:2}<tool_call|>";
    assert.deepEqual(parseGemma4Output(two, {}), {content: two, reasoning_content: "", tool_calls: []});
    const one = parseGemma4Output(two, {...TOOLS, parallelToolCalls: false, newId: ids()});
    assert.deepEqual(one.tool_calls, [{id: "call_0", type: "function", function: {name: "add", arguments: '{"a":1}'}}]);
    assert.equal(one.content, "<|tool_call>call:add{a:2}<tool_call|>");
  });

  test("a surrogate pair split between pieces is given out whole", () => {
    const out = new Gemma4Output({});
    const smile = "😀";
    assert.deepEqual(out.push(`a${smile[0]}`), [{content: "a"}]);
    assert.deepEqual(out.push(smile[1]), [{content: smile}]);
  });

  test("call ids are OpenAI's shape and distinct", () => {
    const a = toolCallId();
    assert.match(a, /^call_[0-9a-f]{24}$/);
    assert.notEqual(a, toolCallId());
  });

  OUTPUTS.forEach((text, o) => {
    test(`output ${o}: every split in two and three pieces, and one character at a time, gives the whole's message and deltas that add up to it`, () => {
      const whole = streamed([text], TOOLS).message;
      const splits = [[...text].map((c) => c), text.split("")];
      for (let i = 0; i <= text.length; i++) {
        splits.push([text.slice(0, i), text.slice(i)]);
        for (let j = i; j <= text.length; j += 3) splits.push([text.slice(0, i), text.slice(i, j), text.slice(j)]);
      }
      for (const pieces of splits) {
        const {deltas, message} = streamed(pieces, TOOLS);
        assert.deepEqual(message, whole, JSON.stringify(pieces));
        const sum = {content: "", reasoning_content: "", tool_calls: []};
        for (const d of deltas) {
          assert.equal(Object.keys(d).length, 1);
          if (d.tool_call) {
            assert.equal(d.tool_call.index, sum.tool_calls.length);
            sum.tool_calls.push({id: d.tool_call.id, type: "function", function: {name: d.tool_call.name, arguments: d.tool_call.arguments}});
          } else {
            const [key, value] = Object.entries(d)[0];
            assert.ok(value !== "", "no empty delta");
            sum[key] += value;
          }
        }
        assert.deepEqual(sum, whole);
      }
    });
  });
});
