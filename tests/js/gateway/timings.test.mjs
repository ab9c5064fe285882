// js-glue/src/generation/timings.js: llama.cpp's server `timings` object, its figures worked out by
// hand from the counts and times given; then the gateway's answers through the openai client,
// their timings held against their usage as llama.cpp defines both.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {timings} from "../../../js-glue/src/generation/timings.js";
import {startGateway} from "../support/gateway_fixture.mjs";

test("per-token and per-second figures; the predicted ones over the tokens after the first", () => {
  assert.deepEqual(timings({cachedTokens: 3, promptTokens: 8, promptMs: 40, predictedTokens: 5, predictedMs: 20}), {
    cache_n: 3, prompt_n: 8, prompt_ms: 40, prompt_per_token_ms: 5, prompt_per_second: 200,
    predicted_n: 5, predicted_ms: 20, predicted_per_token_ms: 5, predicted_per_second: 200,
  });
});

test("drafted tokens add draft_n and draft_n_accepted; a rate without a divisor is 0", () => {
  const t = timings({cachedTokens: 0, promptTokens: 0, promptMs: 0, predictedTokens: 1, predictedMs: 0, drafted: 6, accepted: 4});
  assert.deepEqual([t.prompt_per_token_ms, t.prompt_per_second, t.predicted_per_token_ms, t.predicted_per_second], [0, 0, 0, 0]);
  assert.deepEqual([t.draft_n, t.draft_n_accepted], [6, 4]);
  assert.equal("draft_n" in timings({cachedTokens: 0, promptTokens: 1, promptMs: 1, predictedTokens: 1, predictedMs: 0}), false);
});

// A timings object as llama.cpp's server defines it, held against the response's usage: every
// figure finite and not negative, the counts those of usage, the rates those of the counts and times.
function checkTimings(timings, usage) {
  assert.ok(timings, "the response carries timings");
  for (const [name, value] of Object.entries(timings)) assert.ok(Number.isFinite(value) && value >= 0, `${name}: ${value}`);
  assert.equal(timings.prompt_n + timings.cache_n, usage.prompt_tokens);
  assert.equal(timings.cache_n, usage.prompt_tokens_details.cached_tokens);
  assert.equal(timings.predicted_n, usage.completion_tokens);
  const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);
  assert.ok(timings.prompt_n > 0 && timings.prompt_ms > 0);
  close(timings.prompt_per_token_ms, timings.prompt_ms / timings.prompt_n, "prompt_per_token_ms");
  close(timings.prompt_per_second, (1000 * timings.prompt_n) / timings.prompt_ms, "prompt_per_second");
  const steps = timings.predicted_n - 1;
  assert.ok(steps > 0 && timings.predicted_ms > 0, "several tokens, so a predicted time");
  close(timings.predicted_per_token_ms, timings.predicted_ms / steps, "predicted_per_token_ms");
  close(timings.predicted_per_second, (1000 * steps) / timings.predicted_ms, "predicted_per_second");
  const drafted = usage.completion_tokens_details.accepted_prediction_tokens + usage.completion_tokens_details.rejected_prediction_tokens;
  if (drafted === 0) assert.deepEqual(["draft_n", "draft_n_accepted"].filter((k) => k in timings), []);
  else assert.deepEqual([timings.draft_n, timings.draft_n_accepted], [drafted, usage.completion_tokens_details.accepted_prediction_tokens]);
}

async function chunksOf(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

describe("the gateway's timings through the openai client", () => {
  const hello = [{role: "user", content: "hello"}];

  test("whole chat and completion answers carry timings that agree with their usage; a continued chat counts its cache", async (t) => {
    const {client} = await startGateway(t);
    const first = await client.chat.completions.create({model: "tiny", messages: hello, max_tokens: 6, temperature: 0});
    checkTimings(first.timings, first.usage);
    assert.equal(first.timings.cache_n, 0);
    const next = [...hello, first.choices[0].message, {role: "user", content: "and then?"}];
    const second = await client.chat.completions.create({model: "tiny", messages: next, max_tokens: 6, temperature: 0});
    checkTimings(second.timings, second.usage);
    assert.ok(second.timings.cache_n > 0, "the second turn continues the first one's session");
    const completion = await client.completions.create({model: "tiny", prompt: "once upon a time", n: 2, max_tokens: 5, temperature: 0.9, seed: 1});
    checkTimings(completion.timings, completion.usage);
  });

  test("a stream's timings ride on its last chunk: the usage chunk, or without one the last choice's finish", async (t) => {
    const {client} = await startGateway(t, {maxCachedSessions: 0});
    const withUsage = await chunksOf(await client.chat.completions.create({
      model: "tiny", messages: hello, max_tokens: 6, temperature: 0, stream: true, stream_options: {include_usage: true},
    }));
    assert.deepEqual(withUsage.map((c) => "timings" in c).lastIndexOf(true), withUsage.length - 1);
    assert.equal(withUsage.filter((c) => "timings" in c).length, 1);
    checkTimings(withUsage.at(-1).timings, withUsage.at(-1).usage);

    const body = {model: "tiny", prompt: "once upon a time", n: 2, max_tokens: 6, temperature: 0.9, seed: 1};
    const whole = await client.completions.create(body);
    const plain = await chunksOf(await client.completions.create({...body, stream: true}));
    const carrying = plain.filter((c) => "timings" in c);
    assert.equal(carrying.length, 1);
    assert.equal(carrying[0], plain.at(-1));
    assert.deepEqual([carrying[0].choices[0].index, carrying[0].choices[0].finish_reason], [1, whole.choices[1].finish_reason]);
    checkTimings(carrying[0].timings, whole.usage);
  });

  test("drafted tokens: draft_n and draft_n_accepted are the usage's predictions", async (t) => {
    const {client} = await startGateway(t, {speculative: {maxDraft: 6, minNgram: 1}, maxCachedSessions: 0});
    const r = await client.completions.create({model: "tiny", prompt: "one two three one two three one two three", max_tokens: 40, temperature: 0});
    assert.ok(r.timings.draft_n > 0, "prompt lookup drafted");
    checkTimings(r.timings, r.usage);
  });
});
