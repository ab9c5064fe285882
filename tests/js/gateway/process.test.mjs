// `layerfold gateway` as a process: options from the environment, the openai client served with
// the token from AUTH_TOKEN, JSON log lines that never carry the token, and SIGTERM draining a
// stream under way before exiting 0.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {describe, test} from "node:test";

import {tiny} from "../support/gateway_fixture.mjs";
import {root} from "../support/models.mjs";
import {cli, startServer, waitReady} from "../support/server_process.mjs";

const {default: OpenAI} = createRequire(path.join(root, "js-glue", "package.json"))("openai");
const TOKEN = "sk-process-test-7f3c9a";

describe("layerfold gateway, the process", () => {
  test("configured from the environment, it serves the client, drains a stream on SIGTERM and exits 0, logging no secret", async (t) => {
    const server = await startServer(t, {
      argv: [cli, "gateway", "--port", "0", "--build", "single"],
      env: {MODEL_URL: tiny(), NODES: "local:0-0,local:1-1", MODEL_ID: "tiny-from-env", AUTH_TOKEN: TOKEN, MAX_QUEUE: "4"},
    });
    await waitReady(server.url);
    const client = new OpenAI({baseURL: `${server.url}/v1`, apiKey: TOKEN, maxRetries: 0});
    assert.deepEqual((await client.models.list()).data.map((m) => m.id), ["tiny-from-env"]);
    const wrong = new OpenAI({baseURL: `${server.url}/v1`, apiKey: `${TOKEN}-not`, maxRetries: 0});
    await assert.rejects(wrong.models.list(), (error) => error.status === 401);

    const stream = await client.chat.completions.create({model: "tiny-from-env", messages: [{role: "user", content: "hello"}], max_tokens: 24, temperature: 0, stream: true,
      stream_options: {include_usage: true}});
    let usage = null;
    let signalled = false;
    for await (const chunk of stream) {
      if (!signalled) {
        signalled = true;
        server.child.kill("SIGTERM");
      }
      usage = chunk.usage ?? usage;
    }
    assert.equal(usage.completion_tokens, 24, "the stream under way ran to its end");
    assert.deepEqual(await server.exited, {code: 0, signal: null});
    const messages = server.logs.map((l) => l.message);
    for (const expected of ["starting", "listening", "ready", "generation finished", "shutting down", "stopped"]) assert.ok(messages.includes(expected), `no "${expected}" line`);
    assert.equal(server.logs.at(-1).abandoned, 0);
    assert.ok(server.logs.every((l) => typeof l.severity === "string" && typeof l.time === "string"));
    const all = JSON.stringify(server.logs) + server.stderr();
    assert.ok(!all.includes(TOKEN), "the token appears in the logs");
  });
});
