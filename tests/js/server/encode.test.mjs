// An encoder node's calls (docs/http-api.md, "Encoding media"): a node served with --mmproj
// answers an image's or a clip's rows with the bytes the in-process towers give; /v1/info says
// what it encodes; every bad request is refused by name before anything is encoded, and only
// with the node's token.
import assert from "node:assert/strict";
import fs from "node:fs";
import {describe, test} from "node:test";

import {openProjectorModule} from "../../../js-glue/src/generation/open_projector.js";
import {audioProjector, eModel, gemma4, startEncoderNode, visionProjector} from "../support/encoder_node.mjs";
import {pcmClip, SAMPLE_RATE} from "../support/llama_audio.mjs";
import {rgbImage} from "../support/llama_vision.mjs";

const TOKEN = "encoder-secret";
const AUTH = {authorization: `Bearer ${TOKEN}`};
const OCTETS = {"content-type": "application/octet-stream"};

async function towers(t, mmproj) {
  const projector = await openProjectorModule(mmproj, {threads: 1});
  t.after(() => projector.close());
  return projector;
}

const post = (node, path, body, headers = {}) => fetch(`${node.url}${path}`, {method: "POST", headers: {...AUTH, ...OCTETS, ...headers}, body});
const floats = async (response) => new Float32Array(await response.arrayBuffer());
const bytesOf = (array) => Buffer.from(array.buffer, array.byteOffset, array.byteLength);

describe("encoder node: images", () => {
  test("an image's rows are the in-process tower's bytes; /v1/info says what the node encodes", async (t) => {
    const node = await startEncoderNode(t, {file: gemma4(), mmproj: visionProjector(), authToken: TOKEN});
    const {vision} = await towers(t, visionProjector());
    const info = await (await fetch(`${node.url}/v1/info`, {headers: AUTH})).json();
    assert.deepEqual(info.encoder, {
      vision: {patch_size: 16, n_merge: 3, pos_size: 96, min_tokens: 70, max_tokens: 1120, n_embd_text: 64, max_pixels: 50_000_000},
      audio: null,
    });
    for (const [width, height, maxTokens] of [[37, 23, 80], [200, 120, 70], [640, 480, 0]]) {
      const rgb = fs.readFileSync(rgbImage(width, height));
      const want = await vision.encode(rgb, width, height, {maxTokens});
      const response = await post(node, `/v1/encode/image?width=${width}&height=${height}&max_tokens=${maxTokens}`, rgb);
      assert.equal(response.status, 200, await response.clone().text());
      assert.equal(response.headers.get("x-layerfold-tokens"), String(want.tokens));
      assert.ok(bytesOf(await floats(response)).equals(bytesOf(want.embd)), `${width} x ${height} at ${maxTokens}: the in-process bytes`);
    }
  });

  test("bad requests are refused by name, before the body is read or anything encoded", async (t) => {
    const node = await startEncoderNode(t, {file: gemma4(), mmproj: visionProjector(), authToken: TOKEN});
    const rgb = fs.readFileSync(rgbImage(37, 23));
    const cases = [
      ["no token", "/v1/encode/image?width=37&height=23", rgb, {authorization: ""}, 401, "unauthorized", /bearer token/],
      ["a wrong token", "/v1/encode/image?width=37&height=23", rgb, {authorization: "Bearer nope"}, 401, "unauthorized", /bearer token/],
      ["no width", "/v1/encode/image?height=23", rgb, {}, 400, "bad_parameter", /width=.*non-negative integer/],
      ["a width of letters", "/v1/encode/image?width=3x&height=23", rgb, {}, 400, "bad_parameter", /width="3x"/],
      ["a side of 0", "/v1/encode/image?width=0&height=23", new Uint8Array(0), {}, 400, "bad_parameter", /each side must be 1 to 46000 pixels/],
      ["a budget below 70", "/v1/encode/image?width=37&height=23&max_tokens=69", rgb, {}, 400, "bad_parameter", /token budget must be 70 to 1120, not 69/],
      ["more pixels than the node takes", "/v1/encode/image?width=40000&height=40000", rgb, {}, 400, "bad_parameter", /1600000000 pixels: this node encodes at most 50000000/],
      ["another content type", "/v1/encode/image?width=37&height=23", rgb, {"content-type": "image/png"}, 415, "bad_content_type", /expected application\/octet-stream/],
      ["a short body", "/v1/encode/image?width=37&height=23", rgb.subarray(1), {}, 400, "bad_length", /2552 bytes: an image of 37 x 23 is 2553 RGB bytes/],
      ["a long body", "/v1/encode/image?width=37&height=23", Buffer.concat([rgb, Buffer.alloc(1)]), {}, 413, "too_large", /an image of 37 x 23 is 2553 RGB bytes/],
      ["audio on a node without an audio encoder", "/v1/encode/audio", new Float32Array(800), {}, 404, "not_found", /no audio encoder/],
    ];
    for (const [name, path, body, headers, status, code, message] of cases) {
      const response = await post(node, path, body, headers);
      const error = (await response.json()).error;
      assert.equal(response.status, status, `${name}: ${JSON.stringify(error)}`);
      assert.equal(error.code, code, name);
      assert.match(error.message, message, name);
    }
    const get = await fetch(`${node.url}/v1/encode/image`, {headers: AUTH});
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST");
  });

  test("a node without a projector encodes nothing and says so", async (t) => {
    const node = await startEncoderNode(t, {file: gemma4()});
    assert.equal((await (await fetch(`${node.url}/v1/info`)).json()).encoder, null);
    const response = await post(node, "/v1/encode/image?width=37&height=23", fs.readFileSync(rgbImage(37, 23)));
    assert.equal(response.status, 404);
    assert.match((await response.json()).error.message, /encodes no images: serve it with --mmproj/);
  });
});

describe("encoder node: audio", () => {
  test("a clip's rows are the in-process encoder's bytes; bad samples are refused by name", async (t) => {
    const node = await startEncoderNode(t, {file: eModel(), mmproj: audioProjector(), authToken: TOKEN});
    const {audio} = await towers(t, audioProjector());
    const info = await (await fetch(`${node.url}/v1/info`, {headers: AUTH})).json();
    assert.deepEqual(info.encoder.audio, {n_embd_text: 64, max_seconds: 600});
    const samples = new Float32Array(new Uint8Array(fs.readFileSync(pcmClip(SAMPLE_RATE, {seed: 4}))).buffer);
    const want = await audio.encode(samples);
    const response = await post(node, "/v1/encode/audio", bytesOf(samples));
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(response.headers.get("x-layerfold-tokens"), "25");
    assert.ok(bytesOf(await floats(response)).equals(bytesOf(want.embd)), "the in-process bytes");

    const nan = samples.slice(0, 1600);
    nan[700] = NaN;
    for (const [name, body, status, code, message] of [
      ["a NaN sample", bytesOf(nan), 400, "not_finite", /value NaN at row 700.*samples must be finite/],
      ["a body not of whole samples", Buffer.alloc(6), 400, "bad_length", /positive multiple of 4 bytes/],
      ["an empty body", Buffer.alloc(0), 400, "bad_length", /body of 0 bytes/],
      ["a clip too short for a frame", bytesOf(new Float32Array(1)), 400, "bad_parameter", /too short for one 20 ms frame/],
    ]) {
      const refused = await post(node, "/v1/encode/audio", body);
      const error = (await refused.json()).error;
      assert.equal(refused.status, status, `${name}: ${JSON.stringify(error)}`);
      assert.equal(error.code, code, name);
      assert.match(error.message, message, name);
    }
    // A declared length over ten minutes of samples: refused before a byte is read.
    const declared = await node.app.fetch(new Request("http://node/v1/encode/audio", {method: "POST", body: bytesOf(samples),
      headers: {...AUTH, ...OCTETS, "content-length": String(600 * SAMPLE_RATE * 4 + 4)}}));
    assert.equal(declared.status, 413);
    assert.match((await declared.json()).error.message, /clips of at most 600 s/);
  });
});
