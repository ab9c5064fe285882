// The gateway's requests over time, through the openai client: several at once (each the same
// as alone), a bounded line (429 with Retry-After), deadlines, cancellation (the generation stops
// at the next step and its sessions are freed on every node), a graceful drain, and prefix reuse
// (a continued request prefills only what its kept session lacks, cutting a kept session back to
// the prefix it shares with the prompt, with the bytes of a cold one).
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {gemmaVocab, greedy, handChatPrompt, nodeSessions, startGateway} from "../support/gateway_fixture.mjs";
import {sleep, until} from "../support/wait.mjs";

const chat = (content) => [{role: "user", content}];

describe("gateway sessions", () => {
  test("chats at once step through the pipeline together, and each answer is the one it gets alone", async (t) => {
    // The threaded build: a single-thread node's forward runs to its end in this thread, so no
    // other step could be seen under way meanwhile, whatever the coordinator did.
    const {client, pipeline} = await startGateway(t, {build: "threaded", threads: 1});
    const contents = ["hello", "once upon a time", "The capital of France is"];
    const expected = [];
    for (const content of contents) expected.push((await greedy(pipeline, handChatPrompt(pipeline.tokenizer, chat(content)), 6)).text);
    const body = (content) => ({model: "tiny", messages: chat(content), max_tokens: 6, temperature: 0});
    const sequential = [];
    for (const content of contents) sequential.push((await client.chat.completions.create(body(content))).choices[0].message.content);
    assert.deepEqual(sequential, expected);
    // Steps under way in the pipeline at once: one at a time would mean the requests took turns.
    const step = pipeline.step.bind(pipeline);
    let inFlight = 0;
    let most = 0;
    pipeline.step = async (...args) => {
      most = Math.max(most, ++inFlight);
      try {
        return await step(...args);
      } finally {
        inFlight--;
      }
    };
    const streams = await Promise.all(contents.map((content) => client.chat.completions.create({...body(content), stream: true})));
    const texts = await Promise.all(streams.map(async (stream) => {
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      return text;
    }));
    assert.deepEqual(texts, expected);
    assert.ok(most > 1, `at most ${most} step under way at once`);
  });

  test("a client that aborts a stream stops its generation at the next step and frees its sessions on every node", async (t) => {
    const {client, pipeline, gateway} = await startGateway(t);
    const stream = await client.chat.completions.create({model: "tiny", messages: chat("hello"), max_tokens: 400, temperature: 0, stream: true});
    let chunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content && ++chunks === 3) break;  // leaving the loop aborts the request
    }
    await until(() => nodeSessions(pipeline).every((n) => n === 0), "the sessions to be dropped");
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    assert.match(metrics, /layerfold_gateway_generations_total\{outcome="aborted"\} 1/);
    const tokens = Number(/layerfold_gateway_inter_token_latency_seconds_count (\d+)/.exec(metrics)[1]);
    assert.ok(tokens < 50, `${tokens + 1} tokens generated of 400: the generation went on after the abort`);
    await sleep(200);
    const later = await (await fetch(`${gateway.url}/metrics`)).text();
    assert.equal(Number(/layerfold_gateway_inter_token_latency_seconds_count (\d+)/.exec(later)[1]), tokens);
  });

  test("a whole (non-streamed) request whose client goes away stops too, its sessions freed", async (t) => {
    const {client, pipeline} = await startGateway(t);
    const controller = new AbortController();
    const request = client.chat.completions.create({model: "tiny", messages: chat("hello"), max_tokens: 400, temperature: 0}, {signal: controller.signal});
    await until(() => nodeSessions(pipeline).every((n) => n === 1), "the generation to start");
    controller.abort();
    await assert.rejects(request, (error) => error instanceof client.constructor.APIUserAbortError);
    await until(() => nodeSessions(pipeline).every((n) => n === 0), "the sessions to be dropped");
  });

  test("beyond the line's bound a request is refused at once with 429 and Retry-After", async (t) => {
    const {client, url} = await startGateway(t, {maxQueue: 0});
    const first = await client.chat.completions.create({model: "tiny", messages: chat("hello"), max_tokens: 200, temperature: 0, stream: true});
    const iterator = first[Symbol.asyncIterator]();
    await iterator.next();
    const refused = await fetch(`${url}/v1/chat/completions`, {method: "POST", headers: {"content-type": "application/json"},
      body: JSON.stringify({model: "tiny", messages: chat("hi"), max_tokens: 1})});
    assert.equal(refused.status, 429);
    assert.match(refused.headers.get("retry-after"), /^[1-9]\d*$/);
    assert.equal((await refused.json()).error.type, "rate_limit_exceeded");
    await assert.rejects(client.chat.completions.create({model: "tiny", messages: chat("hi"), max_tokens: 1}), (error) => error.status === 429);
    first.controller.abort();
    for (let i = 0; i < 50; i++) {
      const r = await client.chat.completions.create({model: "tiny", messages: chat("hi"), max_tokens: 1}).catch((error) => error);
      if (!(r instanceof Error)) return;
      assert.equal(r.status, 429);
      await sleep(50);
    }
    assert.fail("the line never had room again after the first request ended");
  });

  test("a request past its deadline ends with a 504 and frees its sessions", async (t) => {
    // 400 greedy tokens take well over 10 ms here (a step is a forward through two nodes and a
    // turn of the event loop), however quiet the machine.
    const {client, pipeline} = await startGateway(t, {requestTimeoutMs: 10});
    await assert.rejects(client.chat.completions.create({model: "tiny", messages: chat("hello"), max_tokens: 400, temperature: 0}),
      (error) => error.status === 504 && error.code === "deadline_exceeded");
    await until(() => nodeSessions(pipeline).every((n) => n === 0), "the sessions to be dropped");
  });

  test("a drain lets the stream under way finish while new requests are refused", async (t) => {
    const {client, pipeline, gateway, url} = await startGateway(t);
    const expected = (await greedy(pipeline, handChatPrompt(pipeline.tokenizer, chat("hello")), 12)).text;
    const stream = await client.chat.completions.create({model: "tiny", messages: chat("hello"), max_tokens: 12, temperature: 0, stream: true});
    let text = "";
    let drained = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (!drained) {
        drained = gateway.shutdown();
        const late = await fetch(`${url}/v1/models`).then((r) => r.status, (error) => error.cause?.code ?? error.message);
        assert.ok(late === 503 || late === "ECONNREFUSED" || late === "ECONNRESET", `a request during the drain: ${late}`);
      }
    }
    assert.equal(text, expected);
    assert.equal(await drained, 0);
  });

  test("a continued completion reuses its kept session, prefills only the rest, and answers the bytes of a cold one", async (t) => {
    const warm = await startGateway(t);
    const cold = await startGateway(t, {maxCachedSessions: 0});
    let prompt = "hello";
    let reused = 0;
    for (let turn = 0; turn < 4; turn++) {
      const body = {model: "tiny", prompt, max_tokens: 5, temperature: 0, logprobs: 5};
      const [w, c] = [await warm.client.completions.create(body), await cold.client.completions.create(body)];
      assert.deepEqual(w.choices, c.choices, `turn ${turn}: text, tokens and every logprob the same`);
      assert.equal(c.usage.prompt_tokens_details.cached_tokens, 0);
      reused += w.usage.prompt_tokens_details.cached_tokens;
      prompt += w.choices[0].text + " once";
    }
    assert.ok(reused > 0, "no turn reused its session");
    assert.deepEqual(nodeSessions(cold.pipeline), [0, 0]);
    assert.ok(nodeSessions(warm.pipeline).every((n) => n >= 1), "the warm gateway keeps its sessions");
  });

  test("a chat's later turns continue its session from the kept prefix, with the bytes of a cold gateway", async (t) => {
    const warm = await startGateway(t, {file: gemmaVocab()});
    const cold = await startGateway(t, {file: gemmaVocab(), maxCachedSessions: 0});
    let messages = [{role: "system", content: "You answer briefly."}, {role: "user", content: "Hello, how are you?"}];
    let previous = null;
    for (let turn = 0; turn < 4; turn++) {
      const body = {model: "tiny", messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 4};
      const [w, c] = [await warm.client.chat.completions.create(body), await cold.client.chat.completions.create(body)];
      assert.deepEqual(w.choices, c.choices, `turn ${turn}: text, tokens and every logprob the same`);
      assert.equal(c.usage.prompt_tokens_details.cached_tokens, 0);
      // The kept session holds the last prompt and every generated token but the last (never fed).
      const expectedCached = previous ? previous.usage.prompt_tokens + previous.usage.completion_tokens - 1 : 0;
      assert.equal(w.usage.prompt_tokens_details.cached_tokens, expectedCached, `turn ${turn}`);
      previous = w;
      messages = [...messages, {role: "assistant", content: w.choices[0].message.content}, {role: "user", content: `And point ${turn}?`}];
    }
  });

  test("a regenerated answer continues the kept session cut back to the shared prefix, with the bytes of a cold gateway", async (t) => {
    const warm = await startGateway(t);
    const cold = await startGateway(t, {maxCachedSessions: 0});
    const cuts = [];
    const truncate = warm.pipeline.truncate.bind(warm.pipeline);
    warm.pipeline.truncate = async (session, n) => {
      const result = await truncate(session, n);
      cuts.push(result);
      return result;
    };
    // A prompt longer than the answer: the session then keeps more than it loses.
    const body = {model: "tiny", prompt: "hello, once upon a time there was", max_tokens: 5, temperature: 0, logprobs: 5};
    const first = await warm.client.completions.create(body);
    const again = await warm.client.completions.create(body);
    const c = await cold.client.completions.create(body);
    assert.deepEqual(first.choices, c.choices);
    assert.deepEqual(again.choices, c.choices, "text, tokens and every logprob the same");
    // The kept history (prompt and every generated token but the last) goes past the prompt: it
    // is cut back to all of the prompt but its last token, which the first step feeds.
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1);
    assert.deepEqual(cuts, [{nPast: again.usage.prompt_tokens - 1, rebuilt: []}]);
    assert.deepEqual(nodeSessions(warm.pipeline), [1, 1], "one session, reused, not a second one");

    // A history that parts from the prompt more than attn_chunk positions back, past a wrapped
    // sliding ring (and keeps more than it loses, so it is taken): node 0 refuses the cut, and
    // the request starts cold, with the same bytes.
    const tokens = (text) => warm.pipeline.tokenizer.encode(text).length;
    let shared = "hello";
    while (tokens(shared) < 90) shared += " once upon a time";
    let rest = "";
    while (tokens(shared + rest) - tokens(shared) < 75) rest += " the end";
    const long = {...body, prompt: shared + rest, max_tokens: 2, logprobs: undefined};
    await warm.client.completions.create(long);
    const parted = {...long, prompt: `${shared} there`};
    const [w, cc] = [await warm.client.completions.create(parted), await cold.client.completions.create(parted)];
    assert.deepEqual(w.choices, cc.choices);
    assert.equal(cuts.length, 2, "the long session was taken");
    assert.equal(w.usage.prompt_tokens_details.cached_tokens, 0, "started cold");
    assert.deepEqual(cuts.at(-1).rebuilt, [0], "the sliding layer's node refused the cut");
  });

  test("kept sessions beyond --max-cached-sessions are dropped on the nodes, oldest first", async (t) => {
    const {client, pipeline} = await startGateway(t, {maxCachedSessions: 2});
    for (const content of ["a", "b", "c", "d"]) await client.chat.completions.create({model: "tiny", messages: chat(content), max_tokens: 2, temperature: 0});
    assert.deepEqual(nodeSessions(pipeline), [2, 2]);
  });
});
