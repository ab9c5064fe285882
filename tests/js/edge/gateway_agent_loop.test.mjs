// The agent loop of tests/js/gateway/agent_loop.test.mjs in workerd (miniflare): the gateway
// worker over two `layerfold serve` nodes, the head node's logits steered by a proxy so random
// weights write the call and then the answer, by the official openai client, whole and streamed.
import assert from "node:assert/strict";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {assertAgentLoop} from "../support/agent_loop.mjs";
import {gemma4} from "../support/gateway_fixture.mjs";
import {root} from "../support/models.mjs";
import {scriptedGemma4Pipeline} from "../support/scripted_pipeline.mjs";
import {startServer} from "../support/server_process.mjs";
import {startSteeringProxy} from "../support/steering_proxy.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {Miniflare} = require("miniflare");
const {default: OpenAI} = require("openai");

test("the gateway in workerd runs a two-round agent loop over remote nodes, whole and streamed", async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-agent-edge-"));
  t.after(() => fs.rmSync(tmp, {recursive: true, force: true}));
  await bundleEdgeWorker(tmp, {entry: path.join(root, "js-glue", "edge", "gateway_worker.js"), relaxed: false});
  const file = gemma4();
  const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", file, "--layers", layers]})));
  const proxy = await startSteeringProxy(t, servers[1].url);
  const mf = new Miniflare({
    modules: true, modulesRoot: tmp, scriptPath: path.join(tmp, "worker.js"),
    modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}],
    r2Buckets: ["MODEL"], compatibilityDate: "2025-01-01",
    // Drafts would ask the head for several rows a step; the proxy steers one.
    bindings: {MODEL_KEY: "tiny.gguf", NODES: `${servers[0].url},${proxy.url}`, SPECULATIVE: "off"},
    // workerd's own messages (an isolate it ended, a request it dropped) into the test's output
    handleRuntimeStdio(stdout, stderr) { for (const s of [stdout, stderr]) s.on("data", (d) => process.stderr.write(`workerd: ${d}`)); },
  });
  t.after(() => mf.dispose());
  await (await mf.getR2Bucket("MODEL")).put("tiny.gguf", fs.readFileSync(file));
  const client = new OpenAI({baseURL: new URL("/v1", await mf.ready).href, apiKey: "unused", maxRetries: 0});
  const {tokenizer} = await scriptedGemma4Pipeline();
  for (const stream of [false, true]) await assertAgentLoop(client, proxy, tokenizer, {stream});
  assert.ok(proxy.steered > 0);
});
