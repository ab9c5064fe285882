// A gateway whose images and audio an encoder node encodes (gateway --encoder URL; docs/gateway.md):
// the same answers as the same gateway reading the projector itself (--mmproj), the same prompt
// counts; and the encoder node held to what every remote node is held to: its config checked at
// open (a projector of another width refused), each answer's length and values checked, a slow
// one cut at its deadline.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import {describe, test} from "node:test";

import {RemoteEncoder} from "../../../js-glue/src/generation/remote_encoder.js";
import {importHostPackage} from "../support/host_package.mjs";
import {audioProjector, eModel, gemma4, startEncoderNode, visionProjector} from "../support/encoder_node.mjs";
import {floatWav, pcmClip, SAMPLE_RATE} from "../support/llama_audio.mjs";
import {rgbImage} from "../support/llama_vision.mjs";
import {mediaChat as chat, mediaGateway as gateway} from "../support/media_gateway.mjs";

const {encode: encodePng} = await importHostPackage("fast-png");

const TOKEN = "nodes-secret";
const [WIDTH, HEIGHT] = [37, 23];
const MAX_TOKENS = 128;

const png = () => Buffer.from(encodePng({width: WIDTH, height: HEIGHT, data: fs.readFileSync(rgbImage(WIDTH, HEIGHT)), channels: 3}));
const imagePart = () => ({type: "image_url", image_url: {url: `data:image/png;base64,${png().toString("base64")}`}});
const audioPart = () => ({type: "input_audio", input_audio: {format: "wav",
  data: floatWav(new Float32Array(new Uint8Array(fs.readFileSync(pcmClip(SAMPLE_RATE, {seed: 4}))).buffer)).toString("base64")}});
const mediaChat = (part) => [{role: "user", content: [{type: "text", text: "Look:"}, part, {type: "text", text: " What is it?"}]}];


// A server that answers /readyz, /v1/info with `info` and every encode with encode(request, response).
async function fakeEncoder(t, info, encode) {
  const server = http.createServer((request, response) => {
    if (request.url === "/readyz") return response.end("{\"ready\":true}");
    if (request.url === "/v1/info") return response.end(JSON.stringify(info));
    request.resume();
    encode(request, response);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${server.address().port}`;
}

const tinyInfo = (vision = {}) => ({encoder: {vision: {patch_size: 16, n_merge: 3, pos_size: 96, min_tokens: 70, max_tokens: 1120,
  n_embd_text: 64, max_pixels: 50_000_000, ...vision}, audio: null}});

describe("a gateway with an encoder node", () => {
  test("an image: the answer and the prompt's count of the gateway that reads the projector itself", async (t) => {
    const encoder = await startEncoderNode(t, {file: gemma4(), mmproj: visionProjector(), authToken: TOKEN});
    const local = await gateway(t, {model: gemma4(), nodes: "local:0-1", images: {mmproj: visionProjector(), maxTokens: MAX_TOKENS}});
    const remote = await gateway(t, {model: gemma4(), nodes: "local:0-1", nodesAuthToken: TOKEN, images: {encoder: encoder.url, maxTokens: MAX_TOKENS}});
    const want = await chat(local, mediaChat(imagePart()));
    const got = await chat(remote, mediaChat(imagePart()));
    assert.equal(want.status, 200, JSON.stringify(want.body));
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.equal(got.body.choices[0].message.content, want.body.choices[0].message.content);
    assert.equal(got.body.usage.prompt_tokens, want.body.usage.prompt_tokens);
  });

  test("an audio clip on an E-model: the same answer and count", async (t) => {
    const encoder = await startEncoderNode(t, {file: eModel(), mmproj: audioProjector(), authToken: TOKEN});
    const local = await gateway(t, {model: eModel(), nodes: "local:0-0,local:1-1", images: {mmproj: audioProjector()}});
    const remote = await gateway(t, {model: eModel(), nodes: "local:0-0,local:1-1", nodesAuthToken: TOKEN, images: {encoder: encoder.url}});
    const want = await chat(local, mediaChat(audioPart()));
    const got = await chat(remote, mediaChat(audioPart()));
    assert.equal(want.status, 200, JSON.stringify(want.body));
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.equal(got.body.choices[0].message.content, want.body.choices[0].message.content);
    assert.equal(got.body.usage.prompt_tokens, want.body.usage.prompt_tokens);
  });

  test("refused at open: an encoder of another width, one that encodes nothing, a wrong token", async (t) => {
    const encoder = await startEncoderNode(t, {file: gemma4(), mmproj: visionProjector(), authToken: TOKEN});
    await assert.rejects(gateway(t, {model: gemma4(), nodes: "local:0-1", images: {encoder: encoder.url}}), /GET \/v1\/info: HTTP 401/);
    const wide = await fakeEncoder(t, tinyInfo({n_embd_text: 32}), () => {});
    await assert.rejects(gateway(t, {model: gemma4(), nodes: "local:0-1", images: {encoder: wide}}),
      /--encoder: the projector gives rows of 32 values, this model's width is 64: a projector of another model/);
    const none = await fakeEncoder(t, {encoder: null}, () => {});
    await assert.rejects(RemoteEncoder.open(none), /encodes no media \(serve --mmproj\)/);
    const broken = await fakeEncoder(t, tinyInfo({patch_size: -16}), () => {});
    await assert.rejects(RemoteEncoder.open(broken), /encoder\.vision\.patch_size is -16, not a positive integer/);
  });

  test("hostile answers: a wrong length, a NaN, a slow answer are errors naming them", async (t) => {
    const rgb = fs.readFileSync(rgbImage(WIDTH, HEIGHT));
    const rows = 77 * 64 * 4;  // 37 x 23 is scaled up to the least budget, 77 soft tokens of 64
    const answer = (bytes) => (request, response) => response.end(bytes);
    const nan = new Float32Array(rows / 4);
    nan[70] = NaN;
    for (const [name, encode, message] of [
      ["short", answer(Buffer.alloc(rows - 4)), new RegExp(`declares ${rows - 4} bytes \\(Content-Length\\), expected ${rows}`)],
      ["long", answer(Buffer.alloc(rows + 4)), new RegExp(`declares ${rows + 4} bytes \\(Content-Length\\), expected ${rows}`)],
      ["NaN", answer(Buffer.from(nan.buffer)), /value NaN at row 1, column 6 is not finite/],
      ["headers, then nothing", (request, response) => response.writeHead(200, {"content-length": String(rows)}).flushHeaders(),
        /answer broke off after 0 bytes \(no answer in time\)/],
      ["never", () => {}, /failed twice: no answer within 300 ms/],
    ]) {
      const {vision} = await RemoteEncoder.open(await fakeEncoder(t, tinyInfo(), encode), {timeoutMs: 300});
      assert.equal(vision.tokens(WIDTH, HEIGHT, {maxTokens: 80}).tokens, 77);
      await assert.rejects(vision.encode(rgb, WIDTH, HEIGHT, {maxTokens: 80}), message, name);
    }
  });
});
