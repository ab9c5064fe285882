// The edge gateway in workerd (miniflare) with an encoder node (ENCODER_URL; docs/gateway.md, "In
// the edge runtime"): media sent with the openai client go through a pipeline of two remote
// `layerfold serve` nodes, their rows from an encoder node (`serve --mmproj`, behind the nodes'
// token), and get the answer and prompt count of the Node gateway reading the projector itself
// over the same nodes: a PNG and a WebP image on a model without per-layer embeddings (the
// image's rows one span), and a FLAC clip on an E-model (the clip's per-layer inputs from the
// remote first node), each decoded in the isolate by the decoders' modules the bundle carries.
import assert from "node:assert/strict";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {execFileSync} from "node:child_process";
import {pathToFileURL} from "node:url";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {serveGateway} from "../../../js-glue/src/gateway/host.js";
import {audioProjector, eModel, gemma4, visionProjector} from "../support/encoder_node.mjs";
import {SAMPLE_RATE, pcm16WavFile, pcmClip} from "../support/llama_audio.mjs";
import {importHostPackage} from "../support/host_package.mjs";
import {rgbImage} from "../support/llama_vision.mjs";
import {root} from "../support/models.mjs";
import {startServer, waitReady} from "../support/server_process.mjs";
import {startWorkerd} from "../support/workerd.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {default: OpenAI} = require("openai");
const {encode: encodePng} = await importHostPackage("fast-png");

const TOKEN = "nodes-secret";
const MAX_TOKENS = 128;
const [WIDTH, HEIGHT] = [200, 120];

const webpPackage = path.join(root, "js-glue", "node_modules", "@jsquash", "webp");
const {init: initWebpEncoder, default: encodeWebp} = await import(pathToFileURL(path.join(webpPackage, "encode.js")).href);
await initWebpEncoder(await WebAssembly.compile(fs.readFileSync(path.join(webpPackage, "codec", "enc", "webp_enc.wasm"))));

// The image as a PNG and as a lossless WebP: the same pixels.
async function imageUrls() {
  const rgb = fs.readFileSync(rgbImage(WIDTH, HEIGHT));
  const rgba = new Uint8ClampedArray(WIDTH * HEIGHT * 4);
  for (let i = 0; i < WIDTH * HEIGHT; i++) rgba.set([rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2], 255], 4 * i);
  const webp = await encodeWebp({width: WIDTH, height: HEIGHT, data: rgba, colorSpace: "srgb"}, {lossless: 1});
  return [`data:image/png;base64,${Buffer.from(encodePng({width: WIDTH, height: HEIGHT, data: rgb, channels: 3})).toString("base64")}`,
    `data:image/webp;base64,${Buffer.from(webp).toString("base64")}`];
}

// A second of the test clip as 16-bit PCM, FLAC-encoded (flac, which scripts/setup installs).
function flacClip() {
  const wav = pcm16WavFile(new Float32Array(new Uint8Array(fs.readFileSync(pcmClip(SAMPLE_RATE, {seed: 4}))).buffer));
  execFileSync("flac", ["-s", "-f", wav, "-o", `${wav}.flac`]);
  return fs.readFileSync(`${wav}.flac`);
}

// The edge gateway bundled into a folder of its own and run in workerd with these settings, the
// model in its R2 bucket: an openai client of it.
async function edgeGateway(t, file, bindings) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-gateway-encoder-"));
  t.after(() => fs.rmSync(tmp, {recursive: true, force: true}));
  await bundleEdgeWorker(tmp, {entry: path.join(root, "js-glue", "edge", "gateway_worker.js"), relaxed: false});
  const mf = await startWorkerd(t, tmp, {bindings: {MODEL_KEY: "g.gguf", NODES_AUTH_TOKEN: TOKEN, ...bindings}, objects: {"g.gguf": file}});
  return new OpenAI({baseURL: new URL("/v1", await mf.ready).href, apiKey: "none", maxRetries: 0});
}

const mediaChat = (part) => [{role: "user", content: [{type: "text", text: "Look:"}, part, {type: "text", text: " What is it?"}]}];

test("images (PNG, WebP) through the edge gateway's encoder node and two remote nodes: the Node gateway's answers", async (t) => {
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
  const edge = await edgeGateway(t, gemma4(), {NODES: nodes, ENCODER_URL: encoder.url, IMAGE_MAX_TOKENS: String(MAX_TOKENS)});
  for (const url of await imageUrls()) {
    const request = {model: "g", messages: mediaChat({type: "image_url", image_url: {url}}), max_tokens: 8, temperature: 0};
    const want = await node.chat.completions.create(request);
    const got = await edge.chat.completions.create(request);
    assert.equal(got.choices[0].message.content, want.choices[0].message.content, url.slice(0, 16));
    assert.equal(got.usage.prompt_tokens, want.usage.prompt_tokens);
    assert.ok(got.usage.prompt_tokens > 77, `the image counts its soft tokens: ${JSON.stringify(got.usage)}`);
  }
});

test("a FLAC clip on an E-model through the edge gateway's encoder node and two remote nodes: the Node gateway's answer", async (t) => {
  // (this synthetic width attends an image both ways, so the nodes take a budget's span)
  const servers = await Promise.all(["0-0", "1-1"].map((layers) =>
    startServer(t, {args: ["--model", eModel(), "--layers", layers, "--max-span", String(MAX_TOKENS)]})));
  const encoder = await startServer(t, {args: ["--model", eModel(), "--layers", "0-0", "--mmproj", audioProjector()], env: {AUTH_TOKEN: TOKEN}});
  await Promise.all([...servers, encoder].map((s) => waitReady(s.url)));
  const nodes = servers.map((s) => s.url).join(",");

  const gw = await serveGateway({model: eModel(), modelId: "g", nodes, port: 0, host: "127.0.0.1", log: () => {},
    images: {mmproj: audioProjector(), maxTokens: MAX_TOKENS}});
  t.after(() => gw.shutdown());
  await gw.opened;
  const node = new OpenAI({baseURL: `${gw.url}/v1`, apiKey: "none", maxRetries: 0});
  const edge = await edgeGateway(t, eModel(), {NODES: nodes, ENCODER_URL: encoder.url, IMAGE_MAX_TOKENS: String(MAX_TOKENS)});
  const part = {type: "input_audio", input_audio: {format: "flac", data: flacClip().toString("base64")}};
  const request = {model: "g", messages: mediaChat(part), max_tokens: 8, temperature: 0};
  const want = await node.chat.completions.create(request);
  const got = await edge.chat.completions.create(request);
  assert.equal(got.choices[0].message.content, want.choices[0].message.content);
  assert.equal(got.usage.prompt_tokens, want.usage.prompt_tokens);
  assert.ok(got.usage.prompt_tokens > 25, `the clip counts its soft tokens: ${JSON.stringify(got.usage)}`);
});
