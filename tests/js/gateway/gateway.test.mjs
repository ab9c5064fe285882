// The OpenAI-compatible gateway driven by the official openai client on loopback: models,
// chat and completions whole and streamed (the usage chunk included), stop sequences that
// cross token boundaries, seeded sampling, logprobs, and errors in OpenAI's shape. Expected
// outputs come from the Pipeline driven directly (gateway_fixture.mjs), not from gateway code.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {logSoftmax} from "../../../js-glue/src/tokens/logits.js";
import {Sampler} from "../../../js-glue/src/tokens/sampler.js";
import {greedy, handChatPrompt, startGateway} from "../support/gateway_fixture.mjs";

const hello = [{role: "user", content: "hello"}];

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

describe("gateway through the openai client", () => {
  test("GET /v1/models lists the one model the gateway serves, and says (as the log does) that its weights are synthetic", async (t) => {
    const lines = [];
    const {client} = await startGateway(t, {log: (severity, message, fields) => lines.push({severity, message, ...fields})});
    const models = [];
    for await (const m of client.models.list()) models.push(m);
    assert.deepEqual(models.map((m) => [m.id, m.object, m.owned_by, m.synthetic]), [["tiny", "model", "layerfold", true]]);
    const one = await client.models.retrieve("tiny");
    assert.deepEqual([one.id, one.synthetic], ["tiny", true]);
    const warning = lines.find((l) => l.severity === "WARNING" && /^synthetic model/.test(l.message));
    assert.ok(warning, JSON.stringify(lines));
    assert.match(warning.name, /^layerfold synthetic /);
    assert.equal(lines.find((l) => l.message === "ready").synthetic, true);
  });

  test("a chat completion is the model's greedy continuation of the templated prompt, with usage", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const prompt = handChatPrompt(pipeline.tokenizer, hello);
    const ref = await greedy(pipeline, prompt, 6);
    const r = await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 6, temperature: 0});
    assert.equal(r.object, "chat.completion");
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, "assistant");
    assert.equal(r.choices[0].message.content, ref.text);
    assert.equal(r.choices[0].finish_reason, ref.ids.length === 6 ? "length" : "stop");
    assert.deepEqual([r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens], [prompt.length, 6, prompt.length + 6]);
  });

  test("a streamed chat: role first, deltas that add up to the whole answer, finish_reason, then the usage chunk", async (t) => {
    // Nothing kept: the same request again would reuse the first one's session, cut back, and
    // its usage would count those cached tokens.
    const {client} = await startGateway(t, {maxCachedSessions: 0});
    const whole = await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 5, temperature: 0});
    const chunks = await collect(await client.chat.completions.create({
      model: "tiny", messages: hello, max_tokens: 5, temperature: 0, stream: true, stream_options: {include_usage: true},
    }));
    assert.deepEqual(chunks[0].choices[0].delta, {role: "assistant", content: "", refusal: null});
    assert.ok(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0].id));
    const text = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? "")).join("");
    assert.equal(text, whole.choices[0].message.content);
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage, whole.usage);
    assert.ok(chunks.slice(0, -1).every((c) => c.usage === null), "usage: null on every chunk before the usage chunk");
    assert.equal(chunks.at(-2).choices[0].finish_reason, whole.choices[0].finish_reason);
    assert.ok(chunks.slice(0, -2).every((c) => c.choices[0].finish_reason === null));
  });

  test("without stream_options the stream has no usage at all", async (t) => {
    const {client} = await startGateway(t);
    const chunks = await collect(await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 3, temperature: 0, stream: true}));
    assert.ok(chunks.every((c) => !("usage" in c) && c.choices.length === 1));
  });

  test("a completion, whole and streamed, is the greedy continuation of the text with BOS", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const ref = await greedy(pipeline, pipeline.tokenizer.encode("hello"), 4);
    const r = await client.completions.create({model: "tiny", prompt: "hello", max_tokens: 4, temperature: 0});
    assert.equal(r.object, "text_completion");
    assert.equal(r.choices[0].text, ref.text);
    const chunks = await collect(await client.completions.create({model: "tiny", prompt: "hello", max_tokens: 4, temperature: 0, stream: true}));
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? "").join(""), ref.text);
    const tokens = await client.completions.create({model: "tiny", prompt: pipeline.tokenizer.encode("hello"), max_tokens: 4, temperature: 0});
    assert.equal(tokens.choices[0].text, ref.text);
  });

  test("a stop sequence that spans two tokens ends the answer before it, and no piece of it is ever streamed", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const ref = await greedy(pipeline, pipeline.tokenizer.encode("hello"), 8);
    const pieces = ref.ids.map((id) => pipeline.tokenizer.decode([id]));
    assert.ok(pieces[1].length >= 2 && pieces[2].length >= 2, `pieces ${JSON.stringify(pieces)}`);
    const stop = pieces[1].slice(-2) + pieces[2].slice(0, 2);  // the end of token 1 and the start of token 2
    const expected = ref.text.slice(0, ref.text.indexOf(stop));
    const r = await client.completions.create({model: "tiny", prompt: "hello", max_tokens: 8, temperature: 0, stop: ["never there", stop]});
    assert.equal(r.choices[0].text, expected);
    assert.equal(r.choices[0].finish_reason, "stop");
    const chunks = await collect(await client.completions.create({model: "tiny", prompt: "hello", max_tokens: 8, temperature: 0, stop, stream: true}));
    const texts = chunks.map((c) => c.choices[0]?.text ?? "");
    assert.equal(texts.join(""), expected);
    assert.equal(chunks.at(-1).choices[0].finish_reason, "stop");
    const chat = await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 8, temperature: 0, stop: "\n\n"});
    assert.equal(chat.choices[0].message.content, (await greedy(pipeline, handChatPrompt(pipeline.tokenizer, hello), 8)).text.split("\n\n")[0]);
  });

  test("a seeded sampled request gives the same tokens every time, the ones the seeded sampler picks", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const ask = (seed) => client.completions.create({model: "tiny", prompt: "once upon a time", max_tokens: 12, temperature: 0.9, top_p: 0.95, top_k: 40, seed});
    const [a, b, other] = [await ask(7), await ask(7), await ask(8)];
    assert.equal(a.choices[0].text, b.choices[0].text);
    assert.notEqual(a.choices[0].text, other.choices[0].text);
    const sampler = new Sampler({temperature: 0.9, topP: 0.95, topK: 40, seed: 7});
    const ids = [];
    let input = pipeline.tokenizer.encode("once upon a time");
    while (ids.length < a.usage.completion_tokens) {
      const id = sampler.sample((await pipeline.step("seeded", input)).logits);
      ids.push(id);
      input = [id];
    }
    await pipeline.dropSession("seeded");
    assert.equal(a.choices[0].text, pipeline.tokenizer.decode(ids.filter((id) => id !== pipeline.tokenizer.eos)));
  });

  test("logprobs: each token's log-probability under the model and its best alternatives, best first", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const ref = await greedy(pipeline, handChatPrompt(pipeline.tokenizer, hello), 4);
    const r = await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3});
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, ref.ids.length);
    content.forEach((entry, i) => {
      const lp = logSoftmax(ref.logits[i]);
      assert.equal(entry.token, pipeline.tokenizer.decode([ref.ids[i]]));
      assert.ok(Math.abs(entry.logprob - lp[ref.ids[i]]) < 1e-9);
      assert.deepEqual(entry.bytes, [...Buffer.from(entry.token)]);
      assert.equal(entry.top_logprobs.length, 3);
      const best = [...lp].sort((x, y) => y - x).slice(0, 3);
      entry.top_logprobs.forEach((alt, k) => assert.ok(Math.abs(alt.logprob - best[k]) < 1e-9, `token ${i} alternative ${k}`));
      assert.equal(entry.top_logprobs[0].logprob, entry.logprob, "greedy: the token is its own best alternative");
    });
    const c = await client.completions.create({model: "tiny", prompt: "hello", max_tokens: 3, temperature: 0, logprobs: 2});
    assert.equal(c.choices[0].logprobs.tokens.join(""), c.choices[0].text);
    const {tokens, text_offset: offsets} = c.choices[0].logprobs;
    assert.deepEqual(offsets, tokens.map((_, i) => tokens.slice(0, i).join("").length));
  });

  test("errors come in OpenAI's shape with the status its client maps to the right exception", async (t) => {
    const {client, url} = await startGateway(t);
    const refuses = (promise, Class, status, param) => assert.rejects(promise, (error) => {
      assert.ok(error instanceof Class, `${error.constructor.name}: ${error.message}`);
      assert.equal(error.status, status);
      if (param !== undefined) assert.equal(error.param, param);
      assert.equal(typeof error.error.message, "string");
      return true;
    });
    const OpenAI = client.constructor;
    await refuses(client.chat.completions.create({model: "gpt-4o", messages: hello}), OpenAI.NotFoundError, 404, "model");
    await refuses(client.chat.completions.create({model: "tiny", messages: hello, temperature: 5}), OpenAI.BadRequestError, 400, "temperature");
    await refuses(client.chat.completions.create({model: "tiny", messages: hello, n: 9}), OpenAI.BadRequestError, 400, "n");
    await refuses(client.chat.completions.create({model: "tiny", messages: []}), OpenAI.BadRequestError, 400, "messages");
    await refuses(client.chat.completions.create({model: "tiny", messages: [{role: "function", content: "x"}]}), OpenAI.BadRequestError, 400, "messages[0].role");
    await refuses(client.chat.completions.create({model: "tiny", messages: hello, top_logprobs: 2}), OpenAI.BadRequestError, 400, "top_logprobs");
    await refuses(client.completions.create({model: "tiny", prompt: [5000], max_tokens: 2}), OpenAI.BadRequestError, 400, "prompt");
    await refuses(client.completions.create({model: "tiny", prompt: "x".repeat(4000)}), OpenAI.BadRequestError, 400);
    const notJson = await fetch(`${url}/v1/chat/completions`, {method: "POST", headers: {"content-type": "application/json"}, body: "{"});
    assert.equal(notJson.status, 400);
    assert.equal((await notJson.json()).error.type, "invalid_request_error");
    // What a page on another site can send without a preflight is not read, however JSON it looks.
    const body = JSON.stringify({model: "tiny", messages: hello, max_tokens: 1});
    for (const headers of [{"content-type": "text/plain"}, {"content-type": "application/x-www-form-urlencoded"}, {}]) {
      const drive = await fetch(`${url}/v1/chat/completions`, {method: "POST", headers, body: headers["content-type"] ? body : new Blob([body])});
      assert.equal(drive.status, 415, JSON.stringify(headers));
      assert.equal((await drive.json()).error.code, "unsupported_media_type");
    }
    const noRoute = await fetch(`${url}/v1/embeddings`, {method: "POST"});
    assert.equal(noRoute.status, 404);
    assert.deepEqual(Object.keys((await noRoute.json()).error), ["message", "type", "param", "code"]);
  });

  test("with a token, a missing or wrong API key is a 401 and the right one is served", async (t) => {
    const {client, url} = await startGateway(t, {authToken: "s3cret-token"});
    assert.equal((await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 1})).choices.length, 1);
    const Wrong = client.constructor;
    const wrong = new Wrong({baseURL: `${url}/v1`, apiKey: "not-it", maxRetries: 0});
    await assert.rejects(wrong.models.list(), (error) => error instanceof Wrong.AuthenticationError && error.code === "invalid_api_key");
    assert.equal((await fetch(`${url}/metrics`)).status, 401);
  });
});
