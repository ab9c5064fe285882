// The decoding loop with MTP drafts the sampler does not take (generation/decode.js over a fake
// pipeline step): at temperature 1 over near-uniform logits the sampled token is seldom the
// argmax the drafts assume, so they are dropped; the policy counts them as rejected and soon
// stops asking the last node for drafts, probing one now and then.
// Run: node --test tests/js/generation/mtp_drafts.test.mjs
import assert from "node:assert/strict";
import {test} from "node:test";

import {generate} from "../../../js-glue/src/generation/decode.js";

const N_VOCAB = 16;

test("drafts dropped by the sampler stop the asking", async () => {
  const asked = [];
  // Row logits nearly uniform, the argmax at token 0: the drafts assume 0 is sampled.
  const step = async (tokens, allRows, draft) => {
    asked.push(draft);
    const rows = allRows ? tokens.length : 1;
    const logits = new Float32Array(rows * N_VOCAB);
    for (let r = 0; r < rows; r++) logits[r * N_VOCAB] = 0.01;
    return {logits, draft: draft > 0 ? {after: 0, token: 0, ids: Array.from({length: draft}, (_, i) => 1 + i)} : null};
  };
  const job = generate({
    step, cut: async () => {}, mtp: {maxDraft: 4}, tokenizer: {decode: () => ""}, prompt: [3, 4, 5], reused: 0, endIds: new Set(),
    request: {sampling: {temperature: 1, seed: 3}, stop: [], logprobs: false}, maxTokens: 60,
  });
  let tokens = 0;
  for await (const {token} of job) if (token) tokens++;
  assert.equal(tokens, 60);
  const asking = asked.slice(1).filter((k) => k > 0).length;  // after the prompt's step
  assert.ok(asking > 0 && asking <= 6, `drafts asked at ${asking} of ${asked.length - 1} decoding steps: ${asked}`);
});
