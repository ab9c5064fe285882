// Tools, tool results and the thinking switch through the gateway, by the official openai client:
// a model made with Google's Gemma 4 chat template and the real Gemma 4 vocabulary (make_model
// --vocab gguf --chat-template, both read from the llama.cpp source the oracle bundles) gets the
// prompt llama.cpp's own rendering gives (its token count in usage), and what the gateway cannot
// enforce is refused by name.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {describe, test} from "node:test";

import {GEMMA4_TEMPLATE as TEMPLATE, GEMMA4_VOCAB as VOCAB, gemma4, startGateway} from "../support/gateway_fixture.mjs";
import {llamaChat} from "../support/llama_chat.mjs";
import {root} from "../support/models.mjs";

const {default: OpenAI} = createRequire(path.join(root, "js-glue", "package.json"))("openai");

const WEATHER = {type: "function", function: {name: "get_weather", description: "The weather in a city",
  parameters: {type: "object", properties: {city: {type: "string"}}, required: ["city"]}}};
const ASK = {role: "user", content: "What's the weather in Paris?"};
const CALL = {role: "assistant", content: null, tool_calls: [{id: "c1", type: "function", function: {name: "get_weather", arguments: "{\"city\":\"Paris\"}"}}]};
const RESULT = {role: "tool", tool_call_id: "c1", content: "21 degrees, clear"};

describe("the gateway over Google's Gemma 4 chat template", () => {
  test("tools, a call and its result, and thinking on reach the template: the prompt is llama.cpp's", async (t) => {
    const {client} = await startGateway(t, {file: gemma4()});
    // [request the client sends, what llama.cpp is given]
    const cases = [
      [{messages: [ASK]}, {messages: [ASK]}],
      [{messages: [ASK], tools: [WEATHER]}, {messages: [ASK], tools: [WEATHER]}],
      [{messages: [ASK, CALL, RESULT], tools: [WEATHER], tool_choice: "auto", parallel_tool_calls: false}, {messages: [ASK, CALL, RESULT], tools: [WEATHER]}],
      [{messages: [ASK], chat_template_kwargs: {enable_thinking: true}}, {messages: [ASK], enable_thinking: true}],
      [{messages: [{role: "developer", content: "Be brief."}, ASK], reasoning_effort: "medium"},
        {messages: [{role: "developer", content: "Be brief."}, ASK], enable_thinking: true}],
    ];
    const expected = await llamaChat(VOCAB(), TEMPLATE(), cases.map(([, llama]) => llama));
    const lengths = new Set();
    for (const [i, [request]] of cases.entries()) {
      const r = await client.chat.completions.create({model: "tiny", max_tokens: 1, temperature: 0, ...request});
      assert.equal(r.usage.prompt_tokens, expected[i].tokens.length, JSON.stringify(request));
      lengths.add(r.usage.prompt_tokens);
    }
    assert.equal(lengths.size, cases.length, "every switch changed the prompt");
  });

  test("what the gateway cannot enforce or the template cannot carry is a 400 naming the field", async (t) => {
    const {client} = await startGateway(t, {file: gemma4()});
    const refuses = async (request, param, code) => {
      await assert.rejects(client.chat.completions.create({model: "tiny", max_tokens: 1, ...request}), (error) => {
        assert.ok(error instanceof OpenAI.BadRequestError, String(error));
        assert.equal(error.param, param);
        if (code) assert.equal(error.code, code);
        return true;
      });
    };
    await refuses({messages: [ASK], tool_choice: "required"}, "tool_choice");
    await refuses({messages: [ASK], tools: [WEATHER], tool_choice: "required", response_format: {type: "json_object"}}, "tool_choice", "unsupported_parameter");
    await refuses({messages: [ASK], tools: [WEATHER], tool_choice: {type: "function", function: {name: "get_time"}}}, "tool_choice");
    await refuses({messages: [ASK, {...CALL, tool_calls: [{...CALL.tool_calls[0], function: {name: "get_weather", arguments: "{city"}}]}, RESULT]},
      "messages[1].tool_calls[0].function.arguments");
    await refuses({messages: [ASK], tools: [{...WEATHER, function: {...WEATHER.function, parameters: {type: "object", properties: {"<|tool>": {type: "string"}}}}}]},
      "tools[0].function.parameters");
    await refuses({messages: [ASK], reasoning_effort: "extreme"}, "reasoning_effort");
  });
});
