// The gateway's pieces without a model: stop sequences over growing text, the kept sessions'
// prefix match, request checks, and the command's configuration from flags and environment.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {gatewayConfigOf as gatewayConfig} from "../support/cli_config.mjs";
import {chatRequest, completionRequest} from "../../../js-glue/src/generation/params.js";
import {SessionCache} from "../../../js-glue/src/generation/sessions.js";
import {StopText} from "../../../js-glue/src/generation/stop_text.js";

describe("stop sequences", () => {
  test("a tail that may still become a stop sequence is held back until the text settles it", () => {
    const stop = new StopText(["END", "\n\n"]);
    assert.deepEqual(stop.update("Hi E"), {text: "Hi ", stopped: false});
    assert.deepEqual(stop.update("Hi EN"), {text: "Hi ", stopped: false});
    assert.deepEqual(stop.update("Hi ENx"), {text: "Hi ENx", stopped: false});
    assert.deepEqual(stop.update("Hi ENx\n"), {text: "Hi ENx", stopped: false});
    assert.deepEqual(stop.update("Hi ENx\n\nmore END"), {text: "Hi ENx", stopped: true});
  });

  test("the earliest of several stop sequences wins, and an unfinished UTF-8 character waits", () => {
    assert.deepEqual(new StopText(["b", "abc"]).update("xxabcb"), {text: "xx", stopped: true});
    assert.deepEqual(new StopText([]).update("caf\uFFFD"), {text: "caf", stopped: false});
    assert.deepEqual(new StopText([]).update("café"), {text: "café", stopped: false});
  });
});

describe("kept sessions", () => {
  test("the kept history sharing the longest prefix with the prompt is taken, once, one needing no cut first", async () => {
    const cache = new SessionCache(4);
    const dropped = [];
    const drop = async (s) => { dropped.push(s); };
    await cache.keep("short", [1, 2], drop);
    await cache.keep("long", [1, 2, 3, 4], drop);
    await cache.keep("other", [1, 9, 9], drop);
    await cache.keep("whole", [1, 2, 3, 4, 5], drop);
    assert.deepEqual(cache.take([1, 2, 3, 4, 5]), {session: "long", reused: 4, cut: false}, "a step needs a new token: 4 at most");
    assert.deepEqual(cache.take([1, 2, 3, 4, 5]), {session: "whole", reused: 4, cut: true}, "an equal history is cut back by one");
    assert.deepEqual(cache.take([1, 2, 3, 4, 5]), {session: "short", reused: 2, cut: false});
    await cache.keep("parted", [1, 2, 7, 8], drop);
    assert.deepEqual(cache.take([1, 2, 3, 4, 5]), {session: "parted", reused: 2, cut: true}, "a history that parts ways is cut back to where it does");
    const fresh = cache.take([1, 2, 3, 4, 5]);
    assert.equal(fresh.reused, 0);
    assert.ok(!["long", "short", "other", "whole", "parted"].includes(fresh.session), "[1, 9, 9] would lose more than it keeps");
    assert.deepEqual(dropped, []);
  });

  test("beyond maxIdle the least recently kept session is dropped", async () => {
    const cache = new SessionCache(2);
    const dropped = [];
    for (const s of ["a", "b", "c"]) await cache.keep(s, [s.charCodeAt(0)], async (x) => { dropped.push(x); });
    assert.deepEqual(dropped, ["a"]);
    assert.equal(cache.size, 2);
  });
});

describe("request checks", () => {
  const refuses = (fn, param) => assert.throws(fn, (error) => error.status === 400 && error.param === param);
  test("fields out of range or unsupported are refused by name", () => {
    const chat = (extra) => chatRequest({model: "m", messages: [{role: "user", content: "hi"}], ...extra});
    refuses(() => chat({temperature: -1}), "temperature");
    refuses(() => chat({top_p: 2}), "top_p");
    refuses(() => chat({max_tokens: 0}), "max_tokens");
    refuses(() => chat({stop: ["a", "b", "c", "d", "e"]}), "stop");
    refuses(() => chat({stop: [""]}), "stop");
    refuses(() => chat({presence_penalty: 2.5}), "presence_penalty");
    refuses(() => chat({frequency_penalty: -3}), "frequency_penalty");
    refuses(() => chat({repetition_penalty: 0}), "repetition_penalty");
    refuses(() => chat({repetition_penalty: "1.1"}), "repetition_penalty");
    refuses(() => chat({min_p: 1.5}), "min_p");
    refuses(() => chat({n: 0}), "n");
    refuses(() => chat({n: 9}), "n");
    refuses(() => chat({n: 1.5}), "n");
    refuses(() => chat({logit_bias: {"12": 101}}), "logit_bias");
    refuses(() => chat({logit_bias: {"-1": 5}}), "logit_bias");
    refuses(() => chat({logit_bias: {"hello": 5}}), "logit_bias");
    refuses(() => chat({logit_bias: [5]}), "logit_bias");
    refuses(() => completionRequest({model: "m", prompt: "a", logit_bias: {"7": NaN}}), "logit_bias");
    refuses(() => chat({tools: [{type: "function"}]}), "tools[0].function");
    refuses(() => chat({stream_options: {include_usage: true}}), "stream_options");
    refuses(() => chatRequest({model: "m", messages: [{role: "user", content: [{type: "image_url"}]}]}), "messages[0].content[0].image_url.url");
    refuses(() => chatRequest({model: "m", messages: [{role: "user", content: [{type: "video_url", video_url: {url: "x"}}]}]}), "messages[0].content[0]");
    refuses(() => chatRequest({model: "m", messages: [{role: "user", content: [{type: "input_audio", input_audio: {data: "AAAA"}}]}]}), "messages[0].content[0].input_audio.format");
    refuses(() => chatRequest({model: "m", messages: [{role: "user", content: [{type: "input_audio", input_audio: {data: "AAAA", format: "ogg"}}]}]}), "messages[0].content[0].input_audio.format");
    refuses(() => chatRequest({model: "m", messages: [{role: "user", content: [{type: "input_audio", input_audio: {format: "wav"}}]}]}), "messages[0].content[0].input_audio.data");
    refuses(() => chatRequest({model: "m", messages: [{role: "user", content: [{type: "input_audio"}]}]}), "messages[0].content[0].input_audio.data");
    refuses(() => chatRequest({model: "m", messages: [{role: "tool", tool_call_id: "c", content: [{type: "image_url", image_url: {url: "data:x"}}]}]}), "messages[0].content");
    refuses(() => completionRequest({model: "m", prompt: ["a", "b"]}), "prompt");
    refuses(() => completionRequest({model: "m", prompt: "a", logprobs: 6}), "logprobs");
    refuses(() => completionRequest({model: "m", prompt: "a", echo: true}), "echo");
    refuses(() => chat({seed: 2 ** 64}), "seed");
    refuses(() => chat({seed: 1.5}), "seed");
    refuses(() => chat({seed: "7"}), "seed");
    refuses(() => chat({response_format: "json"}), "response_format");
    refuses(() => chat({response_format: {type: "yaml"}}), "response_format.type");
    refuses(() => chat({response_format: {type: "json_schema"}}), "response_format.json_schema");
    refuses(() => chat({response_format: {type: "json_schema", json_schema: {name: "a b", schema: {}}}}), "response_format.json_schema.name");
    refuses(() => chat({response_format: {type: "json_schema", json_schema: {name: "a", schema: []}}}), "response_format.json_schema.schema");
    refuses(() => chat({response_format: {type: "json_schema", json_schema: {name: "a", schema: {}, strict: "yes"}}}), "response_format.json_schema.strict");
  });

  test("response_format: text is free text, json_object and json_schema become the request's format", () => {
    const format = (response_format) => chatRequest({model: "m", messages: [{role: "user", content: "hi"}], response_format}).responseFormat;
    assert.equal(format(undefined), null);
    assert.equal(format({type: "text"}), null);
    assert.deepEqual(format({type: "json_object"}), {type: "json_object"});
    const schema = {type: "object", properties: {a: {type: "string"}}};
    assert.deepEqual(format({type: "json_schema", json_schema: {name: "out_1", schema, strict: true}}), {type: "json_schema", name: "out_1", schema, strict: true});
    assert.deepEqual(format({type: "json_schema", json_schema: {name: "out"}}), {type: "json_schema", name: "out", schema: {}, strict: false});
  });

  test("a seed anywhere in 64 bits, signed or not, as JSON carries it", () => {
    const seedOf = (seed) => chatRequest({model: "m", messages: [{role: "user", content: "hi"}], seed}).sampling.seed;
    assert.equal(seedOf(JSON.parse("-9223372036854775808")), 0);  // -2^63, the message's own bound
    assert.equal(seedOf(2 ** 64 - 2048), 2 ** 32 - 2048);  // the largest double below 2^64
    assert.equal(seedOf(2 ** 53 + 2), 2);
  });

  test("defaults as OpenAI's, max_completion_tokens over max_tokens, text parts joined, a seed reduced to 32 bits", () => {
    const r = chatRequest({model: "m", messages: [{role: "developer", content: [{type: "text", text: "a"}, {type: "text", text: "b"}]}],
      max_tokens: 5, max_completion_tokens: 7, seed: -1, n: 1, presence_penalty: 0});
    assert.deepEqual(r.messages, [{role: "system", content: "ab"}]);
    assert.equal(r.maxTokens, 7);
    assert.equal(r.n, 1);
    assert.deepEqual(r.sampling, {temperature: 1, topP: 1, topK: 0, minP: 0, logitBias: new Map(), presencePenalty: 0, frequencyPenalty: 0,
      repetitionPenalty: 1, seed: 2 ** 32 - 1});
    const tuned = chatRequest({model: "m", messages: [{role: "user", content: "hi"}], n: 8, min_p: 0.05, logit_bias: {"0": -100, "42": 3.5},
      presence_penalty: -2, frequency_penalty: 2, repetition_penalty: 1.3});
    assert.equal(tuned.n, 8);
    assert.deepEqual(tuned.sampling.logitBias, new Map([[0, -100], [42, 3.5]]));
    assert.deepEqual([tuned.sampling.minP, tuned.sampling.presencePenalty, tuned.sampling.frequencyPenalty, tuned.sampling.repetitionPenalty], [0.05, -2, 2, 1.3]);
    assert.equal(completionRequest({model: "m", prompt: [[2, 3]]}).maxTokens, 16);
    assert.deepEqual(completionRequest({model: "m", prompt: [[2, 3]]}).prompt, {tokens: [2, 3]});
  });
});

describe("chat request checks: tools, tool messages, thinking", () => {
  const refuses = (fn, param, code) => assert.throws(fn, (error) => error.status === 400 && error.param === param && (code === undefined || error.code === code));
  const ASK = {role: "user", content: "weather?"};
  const WEATHER = {type: "function", function: {name: "get_weather", description: "d", parameters: {type: "object"}, strict: true}};
  const chat = (extra) => chatRequest({model: "m", messages: [ASK], ...extra});

  test("tools are checked by shape, each fault naming its field", () => {
    refuses(() => chat({tools: {}}), "tools");
    refuses(() => chat({tools: Array(129).fill(WEATHER)}), "tools");
    refuses(() => chat({tools: [{type: "retrieval"}]}), "tools[0].type");
    refuses(() => chat({tools: [WEATHER, {type: "function", function: {name: "a b"}}]}), "tools[1].function.name");
    refuses(() => chat({tools: [{type: "function", function: {name: "f", description: 3}}]}), "tools[0].function.description");
    refuses(() => chat({tools: [{type: "function", function: {name: "f", parameters: "{}"}}]}), "tools[0].function.parameters");
    refuses(() => chat({tools: [{type: "function", function: {name: "f", strict: "yes"}}]}), "tools[0].function.strict");
    refuses(() => chat({tools: [WEATHER, WEATHER]}), "tools[1].function.name");
    refuses(() => chat({tools: [WEATHER], parallel_tool_calls: "no"}), "parallel_tool_calls");
    const r = chat({tools: [WEATHER], parallel_tool_calls: false});
    assert.deepEqual(r.tools, [{type: "function", function: {name: "get_weather", description: "d", parameters: {type: "object"}, strict: true}}]);
    assert.deepEqual([r.toolChoice, r.parallelToolCalls], ["auto", false]);
    assert.deepEqual([chat({}).tools, chat({}).toolChoice, chat({}).parallelToolCalls], [[], "none", true]);
  });

  test("tool_choice auto, none, required and a declared function are taken; a forced call refuses a response_format", () => {
    assert.equal(chat({tools: [WEATHER], tool_choice: "none"}).toolChoice, "none");
    assert.equal(chat({tools: [WEATHER], tool_choice: "auto"}).toolChoice, "auto");
    assert.equal(chat({tools: [WEATHER], tool_choice: "required"}).toolChoice, "required");
    assert.deepEqual(chat({tools: [WEATHER], tool_choice: {type: "function", function: {name: "get_weather", extra: 1}}}).toolChoice,
      {type: "function", function: {name: "get_weather"}});
    refuses(() => chat({tool_choice: "required"}), "tool_choice");
    refuses(() => chat({tools: [WEATHER], tool_choice: "required", response_format: {type: "json_object"}}), "tool_choice", "unsupported_parameter");
    assert.equal(chat({tools: [WEATHER], tool_choice: "required", response_format: {type: "text"}}).toolChoice, "required");
    refuses(() => chat({tools: [WEATHER], tool_choice: {type: "function", function: {name: "other"}}}), "tool_choice", undefined);
    assert.throws(() => chat({tools: [WEATHER], tool_choice: {type: "function", function: {name: "other"}}}), (error) => error.code !== "unsupported_parameter");
    refuses(() => chat({tools: [WEATHER], tool_choice: "any"}), "tool_choice");
  });

  test("an assistant's tool calls and a tool's result are checked and kept as the template takes them", () => {
    const CALL = {role: "assistant", content: null, reasoning_content: "think", tool_calls: [{id: "c1", type: "function", function: {name: "get_weather", arguments: "{\"city\":\"Paris\"}"}}]};
    const RESULT = {role: "tool", tool_call_id: "c1", name: "get_weather", content: [{type: "text", text: "su"}, {type: "text", text: "nny"}]};
    const r = chat({messages: [ASK, CALL, RESULT]});
    assert.deepEqual(r.messages, [ASK, CALL, {role: "tool", tool_call_id: "c1", name: "get_weather", content: "sunny"}]);
    const messages = (m) => ({messages: [ASK, m]});
    refuses(() => chat(messages({...CALL, tool_calls: []})), "messages[1].tool_calls");
    refuses(() => chat(messages({...CALL, tool_calls: [{type: "function", function: {name: "f", arguments: "{}"}}]})), "messages[1].tool_calls[0].id");
    refuses(() => chat(messages({...CALL, tool_calls: [{id: "c", type: "code", function: {}}]})), "messages[1].tool_calls[0]");
    refuses(() => chat(messages({...CALL, tool_calls: [{id: "c", type: "function", function: {name: "f", arguments: {city: "P"}}}]})), "messages[1].tool_calls[0].function.arguments");
    refuses(() => chat(messages({...CALL, reasoning_content: 7})), "messages[1].reasoning_content");
    refuses(() => chat(messages({role: "assistant", content: null})), "messages[1].content");
    refuses(() => chat(messages({role: "tool", content: "x"})), "messages[1].tool_call_id");
    refuses(() => chat(messages({role: "tool", tool_call_id: "c1", content: null})), "messages[1].content");
    refuses(() => chat(messages({role: "function", content: "x"})), "messages[1].role");
  });

  test("thinking: off by default, on by chat_template_kwargs.enable_thinking or any reasoning_effort but none", () => {
    const thinking = (extra) => chat(extra).enableThinking;
    assert.equal(thinking({}), false);
    assert.equal(thinking({chat_template_kwargs: {enable_thinking: true}}), true);
    assert.equal(thinking({chat_template_kwargs: {enable_thinking: false}}), false);
    assert.equal(thinking({reasoning_effort: "low"}), true);
    assert.equal(thinking({reasoning_effort: "none", chat_template_kwargs: {enable_thinking: true}}), false);
    assert.equal(thinking({reasoning_effort: "high", chat_template_kwargs: {enable_thinking: false}}), false);
    refuses(() => chat({reasoning_effort: "max"}), "reasoning_effort");
    refuses(() => chat({chat_template_kwargs: {enable_thinking: "true"}}), "chat_template_kwargs.enable_thinking");
    refuses(() => chat({chat_template_kwargs: []}), "chat_template_kwargs");
    refuses(() => chat({chat_template_kwargs: {bos_token: "x"}}), "chat_template_kwargs.bos_token", "unsupported_parameter");
  });
});

describe("gateway configuration", () => {
  test("each option from its flag, else its environment variable; tokens from the environment only", async () => {
    const config = await gatewayConfig({port: "9001", model: "/m/chat-model.gguf"},
      {PORT: "1", NODES: "local:0-1", MAX_QUEUE: "3", AUTH_TOKEN: "k", NODES_AUTH_TOKEN: "n", MODEL_URL: "/other.gguf"});
    assert.equal(config.port, 9001);
    assert.equal(config.model, "/m/chat-model.gguf");
    assert.equal(config.modelId, "chat-model");
    assert.equal(config.nodes, "local:0-1");
    assert.equal(config.maxQueue, 3);
    assert.equal(config.host, "127.0.0.1");
    assert.deepEqual([config.authToken, config.nodesAuthToken], ["k", "n"]);
    // Two credentials: the clients' key never goes to the nodes.
    assert.equal((await gatewayConfig({model: "/m.gguf"}, {AUTH_TOKEN: "k"})).nodesAuthToken, undefined);
    assert.equal((await gatewayConfig({model: "r2://bucket/gemma.gguf", "model-id": "gemma"}, {})).modelId, "gemma");
    assert.equal((await gatewayConfig({model: "https://h/x/gemma-4.gguf?sig=1"}, {})).modelId, "gemma-4");
  });

  test("bad values are refused naming the flag or the variable they came from", async () => {
    await assert.rejects(gatewayConfig({model: "m.gguf"}, {MAX_QUEUE: "lots"}), /MAX_QUEUE must be an integer >= 0, got "lots"/);
    await assert.rejects(gatewayConfig({model: "m.gguf", build: "fast"}, {}), /--build must be one of threaded, single, got "fast"/);
    await assert.rejects(gatewayConfig({model: "m.gguf"}, {LAYERFOLD_INSECURE_NO_AUTH: "yes"}), /LAYERFOLD_INSECURE_NO_AUTH must be 1 \(or 0, or unset\), got "yes"/);
  });
});
