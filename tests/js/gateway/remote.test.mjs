// The gateway in front of remote layer nodes (`layerfold serve` processes on loopback): a node
// killed and restarted in the middle of a stream gets its session rebuilt by the pipeline's
// replay, and the streamed text is the text of an undisturbed run, token for token; also while
// prompt lookup drafts, whose cut-back positions the replay must not bring back.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {greedy, handChatPrompt, startGateway, tiny} from "../support/gateway_fixture.mjs";
import {startServer} from "../support/server_process.mjs";

const hello = [{role: "user", content: "hello"}];

const CASES = [
  {name: "plain decoding", messages: hello, speculative: null},
  {name: "prompt lookup drafting", messages: [{role: "user", content: "What is the capital of France?"}], speculative: {maxDraft: 4, minNgram: 1}},
];

describe("gateway over remote nodes", () => {
  for (const {name, messages, speculative} of CASES) test(`a node restarted mid-stream, ${name}: the stream goes on with the tokens an undisturbed run streams`, async (t) => {
    const local = await Pipeline.open({model: tiny(), build: "single"});
    let expected;
    try {
      expected = await greedy(local, handChatPrompt(local.tokenizer, messages), 12);
    } finally {
      await local.close();
    }
    const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", tiny(), "--layers", layers]})));
    const port = new URL(servers[1].url).port;
    const {client, pipeline} = await startGateway(t, {nodes: servers.map((s) => s.url).join(","), speculative});
    const stream = await client.chat.completions.create({model: "tiny", messages, max_tokens: 12, temperature: 0, stream: true, logprobs: true,
      stream_options: {include_usage: true}});
    const ids = [];
    let text = "";
    let restarted = false;
    let usage = null;
    for await (const chunk of stream) {
      usage = chunk.usage ?? usage;
      const choice = chunk.choices[0];
      text += choice?.delta.content ?? "";
      for (const entry of choice?.logprobs?.content ?? []) ids.push(entry.token);
      if (!restarted && ids.length >= 3) {
        restarted = true;
        await servers[1].stop("SIGKILL");
        await startServer(t, {args: ["--model", tiny(), "--layers", "1-1", "--port", port]});
      }
    }
    assert.ok(restarted);
    assert.equal(pipeline.replays, 1);
    assert.equal(text, expected.text);
    assert.deepEqual(ids, expected.ids.map((id) => pipeline.tokenizer.decode([id])));
    if (speculative) assert.ok(usage.completion_tokens_details.rejected_prediction_tokens > 0, JSON.stringify(usage));
  });
});
