// The edge gateway in workerd (miniflare) with an encoder node (ENCODER_URL; docs/gateway.md, "In
// the edge runtime"): an image sent with the openai client goes through a pipeline of two remote
// `layerfold serve` nodes, its rows from an encoder node (`serve --mmproj`, behind the nodes'
// token), and gets the answer and prompt count of the Node gateway reading the projector itself
// over the same nodes. A model without per-layer embeddings, so the image's rows go in as one
// span.
import assert from "node:assert/strict";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {serveGateway} from "../../../js-glue/src/gateway/host.js";
import {gemma4, visionProjector} from "../support/encoder_node.mjs";
import {importHostPackage} from "../support/host_package.mjs";
import {rgbImage} from "../support/llama_vision.mjs";
import {root} from "../support/models.mjs";
import {startServer, waitReady} from "../support/server_process.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {Miniflare} = require("miniflare");
const {default: OpenAI} = require("openai");
const {encode: encodePng} = await importHostPackage("fast-png");

const TOKEN = "nodes-secret";
const MAX_TOKENS = 128;
const [WIDTH, HEIGHT] = [200, 120];

test("an image through the edge gateway's encoder node and two remote nodes: the Node gateway's answer", async (t) => {
  const rgb = fs.readFileSync(rgbImage(WIDTH, HEIGHT));
  const url = `data:image/png;base64,${Buffer.from(encodePng({width: WIDTH, height: HEIGHT, data: rgb, channels: 3})).toString("base64")}`;
  const messages = [{role: "user", content: [{type: "text", text: "Look:"}, {type: "image_url", image_url: {url}}, {type: "text", text: " What is it?"}]}];
  const request = {model: "g", messages, max_tokens: 8, temperature: 0};

  const servers = await Promise.all(["0-0", "1-1"].map((layers) =>
    startServer(t, {args: ["--model", gemma4(), "--layers", layers, "--max-span", String(MAX_TOKENS)]})));
  const encoder = await startServer(t, {args: ["--model", gemma4(), "--layers", "0-0", "--mmproj", visionProjector()], env: {AUTH_TOKEN: TOKEN}});
  await Promise.all([...servers, encoder].map((s) => waitReady(s.url)));
  const nodes = servers.map((s) => s.url).join(",");

  const gw = await serveGateway({model: gemma4(), modelId: "g", nodes, port: 0, host: "127.0.0.1", log: () => {},
    images: {mmproj: visionProjector(), maxTokens: MAX_TOKENS}});
  t.after(() => gw.shutdown());
  await gw.opened;
  const node = new OpenAI({baseURL: `${gw.url}/v1`, apiKey: "none", maxRetries: 0});
  const want = await node.chat.completions.create(request);

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-gateway-encoder-"));
  t.after(() => fs.rmSync(tmp, {recursive: true, force: true}));
  await bundleEdgeWorker(tmp, {entry: path.join(root, "js-glue", "edge", "gateway_worker.js"), relaxed: false});
  const mf = new Miniflare({
    modules: true, modulesRoot: tmp, scriptPath: path.join(tmp, "worker.js"),
    modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}],
    r2Buckets: ["MODEL"], compatibilityDate: "2025-01-01",
    bindings: {MODEL_KEY: "g.gguf", NODES: nodes, ENCODER_URL: encoder.url, IMAGE_MAX_TOKENS: String(MAX_TOKENS), NODES_AUTH_TOKEN: TOKEN},
  });
  t.after(() => mf.dispose());
  await (await mf.getR2Bucket("MODEL")).put("g.gguf", fs.readFileSync(gemma4()));
  const edge = new OpenAI({baseURL: new URL("/v1", await mf.ready).href, apiKey: "none", maxRetries: 0});
  const got = await edge.chat.completions.create(request);
  assert.equal(got.choices[0].message.content, want.choices[0].message.content);
  assert.equal(got.usage.prompt_tokens, want.usage.prompt_tokens);
  assert.ok(got.usage.prompt_tokens > 77, `the image counts its soft tokens: ${JSON.stringify(got.usage)}`);
});
