// An agent loop (call → tool result → answer) through a 2-node pipeline: the gateway's first node
// in process (local:0-0) and a `layerfold serve` node holding the second layer and the head, by
// the official openai client, whole and streamed. Random weights would call no tool, so the head
// node's logits are steered (support/steering_proxy.mjs); both nodes compute every step. The
// second round's prompt is llama.cpp's rendering of the conversation, token for token.
import assert from "node:assert/strict";
import {test} from "node:test";

import {assertAgentLoop} from "../support/agent_loop.mjs";
import {gemma4, startGateway} from "../support/gateway_fixture.mjs";
import {recordPrompts} from "../support/prompt_recorder.mjs";
import {startServer} from "../support/server_process.mjs";
import {startSteeringProxy} from "../support/steering_proxy.mjs";

for (const stream of [false, true]) test(`a two-round agent loop over local:0-0 and a remote node, ${stream ? "streamed" : "whole"}`, async (t) => {
  const file = gemma4();
  const server = await startServer(t, {args: ["--model", file, "--layers", "1-1"]});
  const proxy = await startSteeringProxy(t, server.url);
  // Drafts would ask the head for several rows a step; the proxy steers one.
  const {client, pipeline} = await startGateway(t, {file, nodes: `local:0-0,${proxy.url}`, speculative: null});
  await assertAgentLoop(client, proxy, pipeline.tokenizer, {stream, prompts: recordPrompts(pipeline)});
  assert.ok(proxy.steered > 0);
});
