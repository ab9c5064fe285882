// Structured output and forced tool calls in workerd (miniflare): edge/gateway_worker.js bundled
// with the grammar engine's module beside it (edge/xgrammar_bundle.js), over two `layerfold serve`
// nodes of a random-weight model with the real Gemma vocabulary; the openai client's seeded answers
// under the schema of the Node tests all validate with ajv, and a schema the engine cannot take is
// a 400 naming its keyword, as in Node; with Google's Gemma 4 template, tool_choice "required"
// answers calls whose arguments validate.
import assert from "node:assert/strict";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {loadSingleThreadModule} from "../../../js-glue/src/wasm/load_node.js";
import {gemmaVocab} from "../support/gateway_fixture.mjs";
import {llamaSourceFile} from "../support/llama_source.mjs";
import {model as makeModel, root} from "../support/models.mjs";
import {ORDER_SCHEMA} from "../support/order_schema.mjs";
import {startServer} from "../support/server_process.mjs";
import {openTokenizer} from "../support/vocab_tokens.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {Miniflare} = require("miniflare");
const {default: OpenAI} = require("openai");
const {default: Ajv} = require("ajv");

const messages = [{role: "user", content: "an order as JSON"}];
const jsonSchema = (schema) => ({type: "json_schema", json_schema: {name: "order", schema, strict: true}});

// The bundled gateway in workerd over two nodes serving `model` -> an openai client of it.
async function edgeGateway(t, model) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-grammar-edge-"));
  t.after(() => fs.rmSync(tmp, {recursive: true, force: true}));
  await bundleEdgeWorker(tmp, {entry: path.join(root, "js-glue", "edge", "gateway_worker.js"), relaxed: false});
  assert.ok(fs.statSync(path.join(tmp, "xgrammar.wasm")).size > 0);
  assert.ok(!fs.readFileSync(path.join(tmp, "worker.js"), "utf8").includes("data:application/octet-stream;base64,AGFzbQ"), "the engine's module is still inlined");
  const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", model, "--layers", layers]})));
  const mf = new Miniflare({
    modules: true, modulesRoot: tmp, scriptPath: path.join(tmp, "worker.js"),
    modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}],
    r2Buckets: ["MODEL"], compatibilityDate: "2025-01-01",
    bindings: {MODEL_KEY: "tiny.gguf", NODES: servers.map((s) => s.url).join(",")},
  });
  t.after(() => mf.dispose());
  await (await mf.getR2Bucket("MODEL")).put("tiny.gguf", fs.readFileSync(model));
  return new OpenAI({baseURL: new URL("/v1", await mf.ready).href, apiKey: "unused", maxRetries: 0});
}

test("the gateway in workerd constrains its answers to a JSON schema, whole and streamed", async (t) => {
  const client = await edgeGateway(t, gemmaVocab());
  const validate = new Ajv().compile(ORDER_SCHEMA);
  for (let seed = 0; seed < 10; seed++) {
    const r = await client.chat.completions.create({model: "tiny", messages, max_tokens: 200, temperature: 1, seed, response_format: jsonSchema(ORDER_SCHEMA)});
    const text = r.choices[0].message.content;
    assert.equal(r.choices[0].finish_reason, "stop", `seed ${seed}: ${text}`);
    assert.ok(validate(JSON.parse(text)), `seed ${seed}: ${text}: ${JSON.stringify(validate.errors)}`);
  }
  let streamed = "";
  for await (const chunk of await client.chat.completions.create({
    model: "tiny", messages, max_tokens: 200, temperature: 1, seed: 11, stream: true, response_format: jsonSchema(ORDER_SCHEMA),
  })) streamed += chunk.choices[0]?.delta.content ?? "";
  assert.ok(validate(JSON.parse(streamed)), streamed);
  const refused = await client.chat.completions.create({model: "tiny", messages, response_format: jsonSchema({not: {}})}).catch((e) => e);
  assert.equal(refused.status, 400);
  assert.equal(refused.param, "response_format.json_schema.schema");
  assert.match(refused.message, /"not"/);
});

test("the gateway in workerd answers tool_choice \"required\" with calls whose arguments fit the schema", async (t) => {
  const gemma4 = makeModel("gemma4-template", "gemma4-vocab", ["--vocab-gguf", llamaSourceFile("models/ggml-vocab-gemma-4.gguf"),
    "--chat-template", llamaSourceFile("models/templates/google-gemma-4-31B-it.jinja")]);
  const client = await edgeGateway(t, gemma4);
  const parameters = {type: "object", additionalProperties: false, required: ["city", "days"],
    properties: {city: {type: "string", maxLength: 10}, days: {type: "integer"}, unit: {type: "string", enum: ["c", "f"]}}};
  const validate = new Ajv().compile(parameters);
  const tools = [{type: "function", function: {name: "get_weather", parameters}}];
  // A random model would never close a thought channel it opened: banned, the calls being the point.
  const {tok} = openTokenizer(await loadSingleThreadModule(), gemma4);
  const channel = [...Array(tok.nVocab).keys()].find((id) => tok.piece(id) === "<|channel>");
  for (let seed = 0; seed < 5; seed++) {
    const r = await client.chat.completions.create({
      model: "tiny", messages: [{role: "user", content: "Weather in Paris?"}], tools, tool_choice: "required", max_tokens: 200, temperature: 1, seed,
      logit_bias: {[channel]: -100},
    });
    const message = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "tool_calls", `seed ${seed}: ${JSON.stringify(message)}`);
    for (const call of message.tool_calls) {
      assert.equal(call.function.name, "get_weather");
      assert.ok(validate(JSON.parse(call.function.arguments)), `seed ${seed}: ${call.function.arguments}`);
    }
  }
});
