// The gateway's prompts on the way in (js-glue/src/generation/prompt.js): a prompt whose bytes
// cannot fit the context is refused before it is tokenized; prompts are tokenized off the event
// loop, so /healthz answers quickly while long ones arrive; message text that holds the
// noncharacters chat.js marks it with is refused naming the message.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {model} from "../support/models.mjs";
import {startGateway} from "../support/gateway_fixture.mjs";

// The tiny model with the real Gemma vocabulary (tokens of up to ~90 bytes) and a 4096-token
// context: its longest prompt that may fit is a few hundred kilobytes, slow enough to tokenize
// that ten of them on the event loop would stall it for seconds.
const N_CTX = 4096;
const longContext = () => model("gemma-vocab-ctx4096", "gemma-vocab", ["--ctx", String(N_CTX)]);

async function post(url, path, body) {
  const response = await fetch(`${url}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
  return {status: response.status, body: await response.json()};
}

describe("gateway prompt limits", () => {
  test("/healthz answers in less than half of one prompt's tokenizing time while ten maximal prompts are tokenized", async (t) => {
    const {url, pipeline} = await startGateway(t, {file: longContext()});
    const {maxTokenBytes} = pipeline.tokenizer;
    assert.ok(maxTokenBytes > 1);
    // About the most bytes the gateway still tokenizes (the chat template adds a few).
    const text = "Hello world, ".repeat(Math.floor(((N_CTX - 2) * maxTokenBytes) / 13));
    const answers = Promise.all(Array.from({length: 10}, (_, i) => (i % 2
      ? post(url, "/v1/completions", {model: "tiny", prompt: text, max_tokens: 1})
      : post(url, "/v1/chat/completions", {model: "tiny", messages: [{role: "user", content: text}], max_tokens: 1}))));
    let done = false;
    answers.finally(() => { done = true; }).catch(() => {});
    const samples = [];
    const deadline = performance.now() + 50_000;
    while (!done && performance.now() < deadline) {
      const t0 = performance.now();
      const response = await fetch(`${url}/healthz`);
      await response.text();
      samples.push(performance.now() - t0);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const results = await answers;
    for (const {status, body} of results) {
      assert.equal(status, 400);
      assert.equal(body.error.code, "context_length_exceeded");
      assert.match(body.error.message, /tokens; this model's context is 4096 tokens/);
    }
    // Held against what one of these prompts costs on this thread now, so that a loaded machine
    // slows both sides: on the event loop, some /healthz would wait for a whole prompt.
    const t0 = performance.now();
    pipeline.tokenizer.encode(text);
    const onLoop = performance.now() - t0;
    // The 90th percentile, not the worst: on a busy machine one sample may lose the core for a
    // while; tokenizing on the event loop would hold up nearly every sample by a prompt's time.
    assert.ok(samples.length >= 5, `${samples.length} /healthz samples`);
    const p90 = [...samples].sort((a, b) => a - b)[Math.floor(samples.length * 0.9)];
    assert.ok(p90 < onLoop / 2,
      `/healthz took ${p90.toFixed(1)} ms at the 90th percentile of ${samples.length} samples (worst ${Math.max(...samples).toFixed(1)} ms); one prompt tokenized on the event loop takes ${onLoop.toFixed(1)} ms`);
  });

  test("a prompt whose bytes cannot fit is refused by its byte count, chat or completion", async (t) => {
    const {url, pipeline} = await startGateway(t, {file: longContext()});
    const bytes = N_CTX * pipeline.tokenizer.maxTokenBytes + 1;
    const text = "x".repeat(bytes);
    for (const [path, body] of [
      ["/v1/completions", {model: "tiny", prompt: text}],
      ["/v1/chat/completions", {model: "tiny", messages: [{role: "user", content: text}]}],
    ]) {
      const answer = await post(url, path, body);
      assert.equal(answer.status, 400, path);
      assert.equal(answer.body.error.code, "context_length_exceeded");
      assert.match(answer.body.error.message, /^the prompt is \d+ bytes, at least \d+ tokens/);
    }
  });

  test("message text holding U+FDD0 or U+FDD1 is a 400 naming the message", async (t) => {
    const {url} = await startGateway(t);
    for (const content of ["a\uFDD0b", "\uFDD1", [{type: "text", text: "x"}, {type: "text", text: "\uFDD0"}]]) {
      const answer = await post(url, "/v1/chat/completions", {model: "tiny", messages: [{role: "user", content: "hi"}, {role: "assistant", content: "ok"}, {role: "user", content}]});
      assert.equal(answer.status, 400);
      assert.equal(answer.body.error.param, "messages[2].content");
      assert.match(answer.body.error.message, /U\+FDD0 or U\+FDD1/);
    }
  });
});
