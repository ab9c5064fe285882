// The two rounds of an agent loop, as an application runs them with the openai client: a request
// with tools, the answer's tool_calls, a `role: "tool"` message with the result, the final answer.
// The model is random weights steered by startSteeringProxy to write the call, then the answer;
// the second round's prompt is checked against llama.cpp's own rendering of the conversation.
import assert from "node:assert/strict";

import {assemble} from "./chat_stream.mjs";
import {GEMMA4_TEMPLATE, GEMMA4_VOCAB} from "./gateway_fixture.mjs";
import {llamaChat} from "./llama_chat.mjs";

const Q = '<|"|>';
const WEATHER = {type: "function", function: {name: "get_weather", description: "The weather in a city",
  parameters: {type: "object", properties: {city: {type: "string"}}, required: ["city"]}}};
const ASK = {role: "user", content: "What's the weather in Paris?"};
// What the model writes: Gemma 4's call syntax, then the marker after which the tool answers.
const CALL_TEXT = `<|tool_call>call:get_weather{city:${Q}Paris${Q}}<tool_call|><|tool_response>`;
const RESULT = "21 degrees, clear";
const ANSWER = "It is 21 degrees and clear in Paris.";

// The openai client says "Connection error." whatever failed: its cause names it.
function withCause(error) {
  const causes = [];
  for (let c = error.cause; c; c = c.cause) causes.push(c.code ?? c.message ?? String(c));
  if (causes.length) error.message += ` (${causes.join(": ")})`;
  throw error;
}

// A completion's one choice as {message, usage}, whole or put together from its stream.
async function complete(client, request, stream) {
  if (!stream) {
    const r = await client.chat.completions.create(request).catch(withCause);
    const [choice] = r.choices;
    return {content: choice.message.content, tool_calls: choice.message.tool_calls ?? [], finish_reason: choice.finish_reason, usage: r.usage};
  }
  const chunks = [];
  const reply = await client.chat.completions.create({...request, stream: true, stream_options: {include_usage: true}}).catch(withCause);
  for await (const chunk of reply) chunks.push(chunk);
  const {content, tool_calls, finish_reason} = assemble(chunks);
  return {content: content || null, tool_calls, finish_reason, usage: chunks.at(-1).usage};
}

/**
 * Runs both rounds through `client` (a gateway whose head node is behind `proxy`) and asserts
 * each: the call parsed into tool_calls, the result rendered as llama.cpp renders it (its token
 * count; its tokens too when `prompts` records what the pipeline was given), the answer.
 * @example await assertAgentLoop(client, proxy, tokenizer, {stream: true, prompts: recordPrompts(pipeline)});
 */
export async function assertAgentLoop(client, proxy, tokenizer, {stream, prompts = null}) {
  const encode = (text) => tokenizer.encode(text, {addBos: false, parseSpecial: true});
  const base = {model: "tiny", temperature: 0, max_tokens: 64, tools: [WEATHER]};

  proxy.steer(encode(CALL_TEXT));
  const first = await complete(client, {...base, messages: [ASK]}, stream);
  assert.equal(first.finish_reason, "tool_calls", JSON.stringify(first));
  assert.equal(first.content, null);
  assert.equal(first.tool_calls.length, 1);
  const [call] = first.tool_calls;
  assert.match(call.id, /^call_\w{24}$/);
  assert.deepEqual([call.type, call.function.name, JSON.parse(call.function.arguments)], ["function", "get_weather", {city: "Paris"}]);

  const messages = [ASK, {role: "assistant", content: null, tool_calls: [call]}, {role: "tool", tool_call_id: call.id, content: RESULT}];
  proxy.steer([...encode(ANSWER), ...encode("<turn|>")]);
  const second = await complete(client, {...base, messages}, stream);
  assert.deepEqual([second.content, second.tool_calls, second.finish_reason], [ANSWER, [], "stop"]);
  const [llama] = await llamaChat(GEMMA4_VOCAB(), GEMMA4_TEMPLATE(), [{messages, tools: [WEATHER]}]);
  assert.ok(llama.prompt.includes(RESULT), llama.prompt);
  assert.equal(second.usage.prompt_tokens, llama.tokens.length, "the second round's prompt is llama.cpp's rendering of the loop");
  if (prompts) assert.deepEqual(prompts.at(-1), llama.tokens);
  assert.equal(second.usage.completion_tokens, encode(ANSWER).length + 1);
}
