// The thought channel's end through the gateway and the official openai client
// (js-glue/src/generation/thought_channel.js): with thinking on and a json_schema, the constraint
// starts once the channel closes, so the thought is free text in reasoning_content and the
// content is JSON that validates (ajv, which the gateway does not use); a thinking budget closes
// the channel after N thought tokens by forcing `<channel|>`, and the answer goes on. The model
// is a script over the real Gemma 4 vocabulary (support/scripted_pipeline.mjs): at each position
// it prefers the script's token, so what the gateway masks or forces shows in the answer.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {createGatewayApp} from "../../../js-glue/src/gateway/app.js";
import {ThoughtChannel} from "../../../js-glue/src/generation/thought_channel.js";
import {startHttpServer} from "../../../js-glue/src/server/node_process.js";
import {NodeState} from "../../../js-glue/src/server/node_state.js";
import {GrammarEngine} from "../../../js-glue/src/tokens/grammar/engine.js";
import {loadXGrammar} from "../../../js-glue/src/tokens/grammar/load_node.js";
import {root} from "../support/models.mjs";
import {scriptedGemma4Pipeline} from "../support/scripted_pipeline.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {default: OpenAI} = require("openai");
const {default: Ajv} = require("ajv");

const messages = [{role: "user", content: "Paris, as JSON"}];
const PLACE = {
  type: "object",
  properties: {city: {type: "string"}, days: {type: "integer"}},
  required: ["city", "days"],
  additionalProperties: false,
};
const FLAG = {type: "object", properties: {ok: {type: "boolean"}}, required: ["ok"], additionalProperties: false};
const jsonSchema = (schema) => ({type: "json_schema", json_schema: {name: "answer", schema, strict: true}});
const THOUGHT = "The user wants a place, so I will give the city and how many days to stay there";
// As the grammar writes JSON: a space after each `:` and `,`.
const ANSWER = '{"city": "Paris", "days": 3}';

// A stream's content and reasoning_content, put together as the openai client's users do.
async function streamed(stream) {
  const out = {content: "", reasoning_content: ""};
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    out.content += d.content ?? "";
    out.reasoning_content += d.reasoning_content ?? "";
  }
  return out;
}

describe("the thought channel's end: structured output after it, a thinking budget", () => {
  let pipeline;
  let http;
  let client;
  let ids;
  before(async () => {
    pipeline = await scriptedGemma4Pipeline();
    const app = createGatewayApp({state: NodeState.of(pipeline), modelId: "gemma4", openGrammar: (p, endIds) => new GrammarEngine(loadXGrammar, p.tokenizer, endIds)});
    http = await startHttpServer(app, {port: 0, host: "127.0.0.1", timeouts: {}, log: () => {}});
    client = new OpenAI({baseURL: `${http.url}/v1`, apiKey: "unused", maxRetries: 0});
    ids = (text) => pipeline.tokenizer.encode(text, {addBos: false, parseSpecial: true});
  });
  after(async () => {
    await http?.drain(async () => {}, 1000);
  });

  test("thinking on with a json_schema: the thought is free, the content is the JSON, whole and streamed", async () => {
    pipeline.script(`<|channel>thought\n${THOUGHT}<channel|>${ANSWER}`);
    const validate = new Ajv({strict: true}).compile(PLACE);
    const body = {model: "gemma4", messages, max_tokens: 64, temperature: 0, reasoning_effort: "high", response_format: jsonSchema(PLACE)};
    const r = await client.chat.completions.create(body);
    const {message} = r.choices[0];
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.equal(message.reasoning_content, THOUGHT);
    assert.ok(validate(JSON.parse(message.content)), message.content);
    assert.equal(message.content, ANSWER);
    assert.deepEqual(await streamed(await client.chat.completions.create({...body, stream: true})), {content: ANSWER, reasoning_content: THOUGHT});
  });

  test("without a channel the constraint takes the first token; channel markers never enter the JSON", async () => {
    pipeline.script(`${ANSWER}`);
    const body = {model: "gemma4", messages, max_tokens: 64, temperature: 0, response_format: jsonSchema(PLACE)};
    const r = await client.chat.completions.create(body);
    assert.equal(r.choices[0].message.content, ANSWER);
    assert.equal(r.choices[0].message.reasoning_content, undefined);
    // A model that writes a channel marker inside a JSON string: the marker is masked away.
    pipeline.script(`<|channel>thought\nhm<channel|>{"city": "Pa<channel|>ris<|channel>", "days": 3}`);
    const marked = (await client.chat.completions.create(body)).choices[0].message;
    assert.equal(marked.reasoning_content, "hm");
    assert.doesNotMatch(marked.content, /channel/);
    const place = JSON.parse(marked.content);
    assert.deepEqual(Object.keys(place), ["city", "days"]);
    // Each marker's position got another token: neither was written (and then dropped by the reader).
    assert.match(place.city, /^Pa.+ris.+$/);
  });

  test("a thinking budget closes the channel after N thought tokens; the answer goes on", async () => {
    const script = ids(`<|channel>thought\n${THOUGHT}<channel|>Done.`);
    pipeline.script(`<|channel>thought\n${THOUGHT}<channel|>Done.`);
    for (const [field, n] of [["thinking_budget_tokens", 6], ["reasoning_budget_tokens", 1]]) {
      const body = {model: "gemma4", messages, max_tokens: 64, temperature: 0, reasoning_effort: "high", [field]: n};
      const r = await client.chat.completions.create(body);
      // The n tokens after <|channel>thought: the first is the newline the reader drops.
      const thought = pipeline.tokenizer.decode(script.slice(2, 2 + n));
      assert.equal(r.choices[0].message.reasoning_content ?? "", thought.replace(/^\n/, ""), `${field} ${n}`);
      // The forced <channel|> took the script's next position; the script then goes on in content.
      const rest = pipeline.tokenizer.decode(script.slice(3 + n)).replace("<channel|>", "");
      assert.equal(r.choices[0].message.content, rest);
      assert.equal(r.usage.completion_tokens, script.length + 1, "one token per script position, the end of turn included");
      assert.deepEqual(await streamed(await client.chat.completions.create({...body, stream: true})),
        {content: rest, reasoning_content: thought.replace(/^\n/, "")});
    }
    // A budget the thought fits in changes nothing.
    const r = await client.chat.completions.create({model: "gemma4", messages, max_tokens: 64, temperature: 0, thinking_budget_tokens: 1000});
    assert.deepEqual([r.choices[0].message.reasoning_content, r.choices[0].message.content], [THOUGHT, "Done."]);
  });

  test("a budget with its message and a json_schema: the message and <channel|> forced, then the JSON", async () => {
    const script = ids(`<|channel>thought\n${THOUGHT}<channel|>${ANSWER}`);
    pipeline.script(`<|channel>thought\n${THOUGHT}<channel|>${ANSWER}`);
    const r = await client.chat.completions.create({
      model: "gemma4", messages, max_tokens: 64, temperature: 0, reasoning_effort: "high", thinking_budget_tokens: 3,
      reasoning_budget_message: " Time is up.<|tool_call>", response_format: jsonSchema(FLAG),
    });
    const {message} = r.choices[0];
    // The message is text, a marker's text in it too: forced as text tokens, read as reasoning.
    assert.equal(message.reasoning_content, `${pipeline.tokenizer.decode(script.slice(2, 5)).replace(/^\n/, "")} Time is up.<|tool_call>`);
    assert.ok(new Ajv({strict: true}).compile(FLAG)(JSON.parse(message.content)), message.content);
    assert.equal(r.choices[0].finish_reason, "stop");
  });

  test("bad budget values are a 400 naming the field", async () => {
    const refuses = async (extra, param) => {
      const error = await client.chat.completions.create({model: "gemma4", messages, ...extra}).then(() => null, (e) => e);
      assert.equal(error?.status, 400, JSON.stringify(extra));
      assert.equal(error.param, param);
    };
    await refuses({thinking_budget_tokens: -2}, "thinking_budget_tokens");
    await refuses({thinking_budget_tokens: 1.5}, "thinking_budget_tokens");
    await refuses({reasoning_budget_tokens: "64"}, "reasoning_budget_tokens");
    await refuses({reasoning_budget_tokens: 2 ** 31}, "reasoning_budget_tokens");
    await refuses({thinking_budget_tokens: 8, reasoning_budget_message: 7}, "reasoning_budget_message");
    await refuses({thinking_budget_tokens: 8, reasoning_budget_message: "Done.<channel|>"}, "reasoning_budget_message");
  });
});

test("drafts: none while the next token is still to be decided, within the budget in a thought, no marker in the answer", async () => {
  const [open, close, label] = [100, 101, 45518];
  // A constraint that allows any draft: what is cut is the channel's doing.
  const constraint = {validPrefix: async (draft) => draft.length, accept: async () => true, mask: async () => {}, close: () => {}};
  const channel = new ThoughtChannel({open, close, label}, {constraint, budget: 3});
  const draft = [7, 8, close, 9, open, 10];
  assert.equal(await channel.validPrefix(draft), 0, "the first token");
  await channel.accept(open);
  assert.equal(await channel.validPrefix(draft), 0, "the label");
  await channel.accept(label);
  assert.equal(await channel.validPrefix(draft), 3, "the budget's 3 tokens");
  await channel.accept(7);
  await channel.accept(8);
  assert.equal(await channel.validPrefix(draft), 1);
  await channel.accept(9);
  assert.equal(await channel.validPrefix(draft), 0, "the forced <channel|>");
  assert.equal(await channel.accept(10), false, "only <channel|> is taken while it is forced");
  assert.ok(await channel.accept(close));
  assert.equal(await channel.validPrefix(draft), 2, "cut at the answer's first marker");
});
