// Gemma 4 tool-call grammars (js-glue/src/tokens/grammar/gemma4_calls.js) as XGrammar reads them:
// a table of texts, written by hand in Gemma 4's call syntax with the markers as the characters
// the engine's vocabulary gives them, each accepted or refused as the tools' schemas say.
import assert from "node:assert/strict";
import {before, describe, test} from "node:test";

import {callGrammar, callTag, MARKERS} from "../../../../js-glue/src/tokens/grammar/gemma4_calls.js";
import {SchemaError} from "../../../../js-glue/src/tokens/grammar/schema_check.js";
import {loadXGrammar} from "../../../../js-glue/src/tokens/grammar/load_node.js";

const Q = MARKERS['<|"|>'];
const OPEN = MARKERS["<|tool_call>"];
const CLOSE = MARKERS["<tool_call|>"];
const call = (text) => OPEN + text.replaceAll('"', Q) + CLOSE;

const WEATHER = {type: "function", function: {name: "get_weather", strict: true, parameters: {
  type: "object", required: ["city", "days"], properties: {
    city: {type: "string", maxLength: 5}, unit: {type: "string", enum: ["c", "f"]}, days: {type: "integer"},
    tags: {type: "array", maxItems: 2, items: {type: "boolean"}}, at: {anyOf: [{type: "null"}, {type: "number"}]}}}}};
const NOW = {type: "function", function: {name: "now"}};

let xg;
before(async () => {
  xg = await loadXGrammar();
});

async function accepts(grammar, text) {
  return xg.Testings.isGrammarAcceptString(grammar, text);
}

describe("Gemma 4 call grammars", () => {
  test("required: calls whose arguments follow the schema, in the schema's order", async () => {
    const grammar = await xg.Grammar.fromEBNF(callGrammar([WEATHER, NOW]));
    const one = await xg.Grammar.fromEBNF(callGrammar([WEATHER, NOW], {parallel: false}));
    const rows = [
      [call('call:get_weather{city:"Paris",days:3}'), true],
      [call('call:get_weather{city:"Nice",unit:"c",days:-12,tags:[true,false],at:1.5e10}'), true],
      [call('call:get_weather{city:"Nice",days:0,at:null}') + call("call:now{any:[1,{x:\"y\"}]}"), true],
      [call("call:now{}"), true],
      ["", false],
      ['text ' + call("call:now{}"), false],
      [call('call:get_weather{days:3}'), false],  // city required
      [call('call:get_weather{days:3,city:"Paris"}'), false],  // the schema's order
      [call('call:get_weather{city:"Bordeaux",days:3}'), false],  // maxLength
      [call('call:get_weather{city:"Nice",unit:"k",days:3}'), false],  // enum
      [call('call:get_weather{city:"Nice",days:1.5}'), false],  // integer
      [call('call:get_weather{city:"Nice",days:3,tags:[true,true,true]}'), false],  // maxItems
      [call('call:get_weather{city:"Nice",days:3,at:"x"}'), false],  // anyOf
      [call('call:get_weather{city:"Nice",days:3,more:1}'), false],  // only declared properties
      [call('call:get_weather{city:"Nice",days:1234567890123456789}'), false],  // over 18 digits
      [call('call:get_weather{city:"Nice",days:3,at:1e100}'), false],  // a three-digit exponent
      [OPEN + "call:get_weather{city:" + Q + "a" + OPEN + Q + ",days:3}" + CLOSE, false],  // a marker inside a string
      [OPEN + "call:now{a:" + Q + CLOSE + Q + "}" + CLOSE, false],
      [call("call:later{}"), false],
      ["<|tool_call>call:now{}<tool_call|>", false],  // the markers spelled out
    ];
    for (const [text, expected] of rows) assert.equal(await accepts(grammar, text), expected, JSON.stringify(text));
    assert.equal(await accepts(one, call("call:now{}")), true);
    assert.equal(await accepts(one, call("call:now{}") + call("call:now{}")), false);
  });

  test("auto with a strict tool: any text, and calls to it follow its schema; other tools any dict", async () => {
    const grammar = await xg.Grammar.fromStructuralTag(callTag([WEATHER, NOW]));
    const rows = [
      ["Just text, with <b>markup</b> and é", true],
      ["Let me look. " + call('call:get_weather{city:"Paris",days:3}') + " done", true],
      [call("call:now{x:\"y\",z:[1]}"), true],
      [call('call:get_weather{city:"Paris"}'), false],
      [call('call:get_weather{city:"Paris",days:"3"}'), false],
      [call("call:later{}"), false],
    ];
    for (const [text, expected] of rows) assert.equal(await accepts(grammar, text), expected, JSON.stringify(text));
  });

  test("what Gemma 4 cannot write or the grammar cannot enforce is a SchemaError naming it", () => {
    const tool = (parameters) => [{type: "function", function: {name: "f", parameters}}];
    for (const [parameters, keyword] of [
      [{type: "object", properties: {a: {type: "string", pattern: "a"}}}, "pattern"],
      [{type: "object", properties: {"a:b": {type: "string"}}}, "properties"],
      [{type: "array"}, "type"],
    ]) {
      assert.throws(() => callGrammar(tool(parameters)), (error) => error instanceof SchemaError && error.keyword === keyword, keyword);
    }
  });
});
