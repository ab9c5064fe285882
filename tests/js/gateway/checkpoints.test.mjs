// Checkpoints through the gateway: a chat whose earlier message is edited after the sliding rings
// have moved on continues its kept session from the checkpoint taken where an earlier turn opened
// the model's reply, with the bytes of a cold gateway; without checkpoints the same cut is refused
// and the request starts cold. On local nodes and on remote ones (`layerfold serve` processes).
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {gemmaVocab, startGateway} from "../support/gateway_fixture.mjs";
import {startServer} from "../support/server_process.mjs";

// The tiny model's rings hold window 4 + attn_chunk 64 - 1 = 67 positions: each message alone
// is longer than that, so a cut back into the second message is deeper than any ring allows.
const first = "The quick brown fox jumps over the lazy dog. ".repeat(10);
const second = "Pack my box with five dozen liquor jugs, said the sphinx. ".repeat(7);
const options = {model: "tiny", max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3};

// Two turns, then the second message edited: the three answers.
async function conversation(client) {
  const ask = (messages) => client.chat.completions.create({...options, messages});
  const u1 = {role: "user", content: first};
  const a1 = (await ask([u1])).choices[0].message;
  await ask([u1, a1, {role: "user", content: second}]);
  return ask([u1, a1, {role: "user", content: `Edited: ${second}`}]);
}

async function checkEditedChat(t, nodes) {
  const warm = await startGateway(t, {file: gemmaVocab(), nodes});
  const cold = await startGateway(t, {file: gemmaVocab(), nodes, maxCachedSessions: 0});
  const none = await startGateway(t, {file: gemmaVocab(), nodes, checkpoints: 0});
  const [w, c, n] = [await conversation(warm.client), await conversation(cold.client), await conversation(none.client)];
  assert.deepEqual(w.choices, c.choices, "text, tokens and every logprob those of a cold gateway");
  assert.deepEqual(n.choices, c.choices);
  assert.equal(c.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(n.usage.prompt_tokens_details.cached_tokens, 0, "without checkpoints the cut is refused and the request starts cold");
  const cached = w.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 100 && cached < w.usage.prompt_tokens, `${cached} of ${w.usage.prompt_tokens} prompt tokens came from the kept session`);
}

describe("gateway checkpoints", () => {
  test("an edited earlier message continues from a checkpoint, with a cold gateway's bytes (local nodes)", async (t) => {
    await checkEditedChat(t, "local:0-0,local:1-1");
  });

  test("an edited earlier message continues from a checkpoint, with a cold gateway's bytes (remote nodes)", async (t) => {
    const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", gemmaVocab(), "--layers", layers]})));
    await checkEditedChat(t, servers.map((s) => s.url).join(","));
  });
});
