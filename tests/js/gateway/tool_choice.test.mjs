// tool_choice "required" and a named function through the official openai client, enforced by
// constrained decoding over Gemma 4's call syntax (js-glue/src/tokens/grammar/gemma4_calls.js): a
// random-weight model with the real Gemma 4 vocabulary and chat template, whose free text would
// almost never be a call, answers only calls whose arguments ajv (which the gateway does not use)
// finds valid against the tool's schema.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {describe, test} from "node:test";

import {loadSingleThreadModule} from "../../../js-glue/src/wasm/load_node.js";
import {startGateway} from "../support/gateway_fixture.mjs";
import {llamaSourceFile} from "../support/llama_source.mjs";
import {model, root} from "../support/models.mjs";
import {openTokenizer} from "../support/vocab_tokens.mjs";

const {default: Ajv} = createRequire(path.join(root, "js-glue", "package.json"))("ajv");
const {default: OpenAI} = createRequire(path.join(root, "js-glue", "package.json"))("openai");

const VOCAB = () => llamaSourceFile("models/ggml-vocab-gemma-4.gguf");
const TEMPLATE = () => llamaSourceFile("models/templates/google-gemma-4-31B-it.jinja");
const gemma4 = () => model("gemma4-template", "gemma4-vocab", ["--vocab-gguf", VOCAB(), "--chat-template", TEMPLATE()]);

const WEATHER = {type: "function", function: {name: "get_weather", description: "The weather in a city", parameters: {
  type: "object", additionalProperties: false, required: ["city", "days"], properties: {
    city: {type: "string", minLength: 1, maxLength: 12},
    days: {type: "integer"},
    unit: {type: "string", enum: ["celsius", "fahrenheit"]},
    place: {type: "object", additionalProperties: false, required: ["lat"], properties: {lat: {type: "number"}, exact: {type: "boolean"}}},
    tags: {type: "array", maxItems: 2, items: {type: "string", maxLength: 6}},
  }}}};
const TIME = {type: "function", function: {name: "get_time", description: "The time in a zone", parameters: {
  type: "object", additionalProperties: false, required: ["zone"], properties: {zone: {type: "string", enum: ["UTC", "CET"]}, soon: {type: "boolean"}}}}};
const TOOLS = [WEATHER, TIME];
const messages = [{role: "user", content: "What's the weather in Paris?"}];

// Token ids of the model's vocabulary by their text.
let vocabulary = null;
async function tokenId(piece) {
  vocabulary ??= openTokenizer(await loadSingleThreadModule(), gemma4()).tok;
  return [...Array(vocabulary.nVocab).keys()].find((id) => vocabulary.piece(id) === piece);
}

// Gemma 4 may open a thought channel before its answer, which the constraint lets through; a
// random model would never close it, so it is banned where the calls are the point.
const noThought = async () => ({logit_bias: {[await tokenId("<|channel>")]: -100}});

const ajv = new Ajv({strict: true});
const validators = new Map(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function checkCalls(message, finishReason, what, names = [...validators.keys()]) {
  assert.equal(finishReason, "tool_calls", `${what}: ${JSON.stringify(message)}`);
  assert.ok(!message.content, `${what}: content ${JSON.stringify(message.content)}`);
  assert.ok(message.tool_calls.length >= 1, what);
  for (const call of message.tool_calls) {
    assert.ok(names.includes(call.function.name), `${what}: called ${call.function.name}`);
    const validate = validators.get(call.function.name);
    assert.ok(validate(JSON.parse(call.function.arguments)), `${what}: ${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
  }
  return message.tool_calls;
}

describe("tool_choice by constrained decoding", () => {
  test("\"required\" with two tools: 20 seeds all answer valid calls, to both tools", async (t) => {
    const {client} = await startGateway(t, {file: gemma4(), maxCachedSessions: 0});
    const called = new Set();
    let parallel = 0;
    for (let seed = 0; seed < 20; seed++) {
      const r = await client.chat.completions.create({model: "tiny", messages, tools: TOOLS, tool_choice: "required", max_tokens: 300, temperature: 1, seed, ...await noThought()});
      const calls = checkCalls(r.choices[0].message, r.choices[0].finish_reason, `seed ${seed}`);
      for (const call of calls) called.add(call.function.name);
      if (calls.length > 1) parallel++;
    }
    assert.deepEqual([...called].sort(), ["get_time", "get_weather"]);
    assert.ok(parallel > 0, "no seed made parallel calls");
  });

  test("a named function is always the one call, streamed and not; parallel_tool_calls false gives one call", async (t) => {
    const {client} = await startGateway(t, {file: gemma4(), maxCachedSessions: 0});
    const named = {type: "function", function: {name: "get_time"}};
    for (let seed = 0; seed < 8; seed++) {
      const r = await client.chat.completions.create({model: "tiny", messages, tools: TOOLS, tool_choice: named, max_tokens: 300, temperature: 1, seed, ...await noThought()});
      const calls = checkCalls(r.choices[0].message, r.choices[0].finish_reason, `seed ${seed}`, ["get_time"]);
      assert.equal(calls.length, 1);
      const one = await client.chat.completions.create({model: "tiny", messages, tools: TOOLS, tool_choice: "required", parallel_tool_calls: false, max_tokens: 300, temperature: 1, seed, ...await noThought()});
      assert.equal(checkCalls(one.choices[0].message, one.choices[0].finish_reason, `seed ${seed}, one call`).length, 1);
    }
    for (const [seed, tool_choice] of [[1, named], [2, "required"], [3, "required"]]) {
      const stream = await client.chat.completions.create({model: "tiny", messages, tools: TOOLS, tool_choice, max_tokens: 300, temperature: 1, seed, stream: true, ...await noThought()});
      const calls = [];
      let content = "";
      let finishReason = null;
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        if (!choice) continue;
        content += choice.delta.content ?? "";
        finishReason = choice.finish_reason ?? finishReason;
        for (const d of choice.delta.tool_calls ?? []) {
          calls[d.index] ??= {id: d.id, type: "function", function: {name: "", arguments: ""}};
          calls[d.index].function.name += d.function?.name ?? "";
          calls[d.index].function.arguments += d.function?.arguments ?? "";
        }
      }
      checkCalls({content, tool_calls: calls}, finishReason, `streamed seed ${seed}`, tool_choice === named ? ["get_time"] : undefined);
    }
  });

  test("\"auto\" with a strict tool: a call the model starts follows the schema", async (t) => {
    const {client} = await startGateway(t, {file: gemma4(), maxCachedSessions: 0});
    const callOpen = await tokenId("<|tool_call>");
    // A random model almost never writes <|tool_call> unbiased: the bias makes it start a call at once.
    const request = {model: "tiny", messages, tool_choice: "auto", parallel_tool_calls: false, logit_bias: {[callOpen]: 100}, max_tokens: 300, temperature: 1};
    const strictWeather = {...WEATHER, function: {...WEATHER.function, strict: true}};
    for (let seed = 0; seed < 8; seed++) {
      const r = await client.chat.completions.create({...request, tools: [strictWeather], seed});
      assert.equal(checkCalls(r.choices[0].message, r.choices[0].finish_reason, `seed ${seed}`, ["get_weather"]).length, 1);
    }
    // Not strict: the same start is not shaped, and a random model's arguments are no call.
    const loose = await client.chat.completions.create({...request, tools: [WEATHER], seed: 0});
    assert.equal(loose.choices[0].message.tool_calls, undefined, JSON.stringify(loose.choices[0].message));
  });

  test("parameters the grammar cannot enforce are a 400 naming the keyword", async (t) => {
    const {client} = await startGateway(t, {file: gemma4()});
    const tool = (parameters) => [{type: "function", function: {name: "f", parameters}}];
    for (const [parameters, keyword] of [
      [{type: "object", properties: {a: {type: "string", pattern: "^a+$"}}}, "pattern"],
      [{type: "object", properties: {a: {type: "integer", minimum: 3}}}, "minimum"],
      [{type: "string"}, "type"],
    ]) {
      await assert.rejects(client.chat.completions.create({model: "tiny", messages, tools: tool(parameters), tool_choice: "required", max_tokens: 5}), (error) => {
        assert.ok(error instanceof OpenAI.BadRequestError, String(error));
        assert.equal(error.param, "tools");
        assert.match(error.message, new RegExp(keyword));
        return true;
      });
    }
  });
});
