// Structured output through the official openai client: response_format json_schema and
// json_object enforced by constrained decoding (js-glue/src/tokens/grammar/) on a random-weight
// model with the real Gemma vocabulary, whose free text would almost never parse. Every answer is
// checked with ajv, a validator the gateway does not use.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {describe, test} from "node:test";

import {gemmaVocab, nodeSessions, startGateway} from "../support/gateway_fixture.mjs";
import {root} from "../support/models.mjs";
import {ORDER_SCHEMA} from "../support/order_schema.mjs";
import {until} from "../support/wait.mjs";

const {default: Ajv} = createRequire(path.join(root, "js-glue", "package.json"))("ajv");

const messages = [{role: "user", content: "an order as JSON"}];
const jsonSchema = (schema) => ({type: "json_schema", json_schema: {name: "order", schema, strict: true}});

describe("structured output by constrained decoding", () => {
  test("100 seeded generations under a schema all parse and validate", async (t) => {
    const {client} = await startGateway(t, {file: gemmaVocab(), maxCachedSessions: 0});
    const validate = new Ajv({strict: true}).compile(ORDER_SCHEMA);
    const texts = new Set();
    // Ten requests at a time: the gateway steps them together, each with a grammar of its own.
    for (let first = 0; first < 100; first += 10) {
      const seeds = Array.from({length: 10}, (_, i) => first + i);
      const answers = await Promise.all(seeds.map((seed) => client.chat.completions.create({
        model: "tiny", messages, max_tokens: 200, temperature: 1, seed, response_format: jsonSchema(ORDER_SCHEMA),
      })));
      for (const [i, r] of answers.entries()) {
        const text = r.choices[0].message.content;
        assert.equal(r.choices[0].finish_reason, "stop", `seed ${seeds[i]}: ended before the JSON did: ${text}`);
        const value = JSON.parse(text);
        assert.ok(validate(value), `seed ${seeds[i]}: ${text}: ${JSON.stringify(validate.errors)}`);
        texts.add(text);
      }
    }
    assert.ok(texts.size > 50, `the seeds gave only ${texts.size} different answers`);
  });

  test("a streamed answer validates with prompt-lookup drafts on, a json_object answer is an object", async (t) => {
    const {client} = await startGateway(t, {file: gemmaVocab(), speculative: {maxDraft: 8, minNgram: 1}});
    const validate = new Ajv().compile(ORDER_SCHEMA);
    const stream = await client.chat.completions.create({
      model: "tiny", messages, max_tokens: 200, temperature: 1, seed: 7, stream: true, response_format: jsonSchema(ORDER_SCHEMA),
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.ok(validate(JSON.parse(text)), text);
    // Any object: its strings are unbounded, so a random model may not close one within the
    // tokens given; what it wrote is then the start of an object
    // (tests/js/tokens/grammar/constraint.test.mjs).
    const object = await client.chat.completions.create({model: "tiny", messages, max_tokens: 40, temperature: 1, seed: 3, response_format: {type: "json_object"}});
    const content = object.choices[0].message.content;
    assert.match(content, /^\{/);
    if (object.choices[0].finish_reason === "stop") assert.equal(Object.getPrototypeOf(JSON.parse(content)), Object.prototype);
  });

  test("n choices on one prefill each keep to the schema, with a grammar state of their own", async (t) => {
    const {client} = await startGateway(t, {file: gemmaVocab()});
    const validate = new Ajv().compile(ORDER_SCHEMA);
    const r = await client.chat.completions.create({model: "tiny", messages, max_tokens: 200, temperature: 1, seed: 5, n: 3, response_format: jsonSchema(ORDER_SCHEMA)});
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    for (const choice of r.choices) {
      assert.equal(choice.finish_reason, "stop", choice.message.content);
      assert.ok(validate(JSON.parse(choice.message.content)), choice.message.content);
    }
    assert.equal(new Set(r.choices.map((c) => c.message.content)).size, 3);
  });

  test("logprobs are the model's, not the mask's: the forced opening brace is far from certain", async (t) => {
    const {client} = await startGateway(t, {file: gemmaVocab()});
    const r = await client.chat.completions.create({
      model: "tiny", messages, max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 3, response_format: {type: "json_object"},
    });
    const [first] = r.choices[0].logprobs.content;
    assert.equal(first.token, "{");
    // Under the mask only "{" and tokens starting '{"' are left (about -1 each); the random model
    // spreads its mass over all 262144.
    assert.ok(first.logprob < -5, `"{" at ${first.logprob}`);
    assert.equal(first.top_logprobs.length, 3);
  });

  test("a request killed mid-grammar frees its sessions, and the next one is constrained as before", async (t) => {
    const {client, pipeline} = await startGateway(t, {file: gemmaVocab()});
    const free = {type: "object", properties: {text: {type: "string"}}, required: ["text"], additionalProperties: false};
    const stream = await client.chat.completions.create({
      model: "tiny", messages, max_tokens: 400, temperature: 1, seed: 1, stream: true, response_format: jsonSchema(free),
    });
    let chunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content && ++chunks === 5) break;  // leaving the loop aborts the request
    }
    await until(() => nodeSessions(pipeline).every((n) => n === 0), "the sessions to be dropped");
    const r = await client.chat.completions.create({model: "tiny", messages, max_tokens: 200, temperature: 1, seed: 2, response_format: jsonSchema(ORDER_SCHEMA)});
    assert.ok(new Ajv().compile(ORDER_SCHEMA)(JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
  });

  test("a schema the engine cannot take is a 400 naming the keyword, and the engine goes on", async (t) => {
    const {client} = await startGateway(t, {file: gemmaVocab()});
    const refused = async (schema, keyword, code) => {
      const error = await client.chat.completions.create({model: "tiny", messages, max_tokens: 8, response_format: jsonSchema(schema)}).then(
        () => assert.fail(`${JSON.stringify(schema)} was taken`), (e) => e);
      assert.ok(error instanceof client.constructor.BadRequestError, String(error));
      assert.equal(error.param, "response_format.json_schema.schema");
      assert.equal(error.code, code);
      assert.ok(error.message.includes(keyword), `${error.message} does not name ${keyword}`);
    };
    await refused({type: "object", properties: {a: {not: {type: "string"}}}}, "not", "unsupported_schema");
    await refused({type: "string", pattern: "(?<=a)b"}, "pattern", "unsupported_schema");
    await refused({type: "string", format: "date-time"}, "format", "unsupported_schema");
    await refused({type: "strng"}, "type", "invalid_schema");
    await refused({$ref: "#/$defs/missing"}, "$ref", "invalid_schema");
    await refused({enum: Array.from({length: 5000}, (_, i) => i)}, "enum", "schema_too_large");
    const bad = await client.chat.completions.create({model: "tiny", messages, response_format: {type: "xml"}}).catch((e) => e);
    assert.equal(bad.status, 400);
    assert.equal(bad.param, "response_format.type");
    const r = await client.chat.completions.create({model: "tiny", messages, max_tokens: 200, temperature: 1, seed: 3, response_format: jsonSchema(ORDER_SCHEMA)});
    assert.ok(new Ajv().compile(ORDER_SCHEMA)(JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
  });
});
