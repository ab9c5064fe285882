// RemoteNode.perLayerInputs (js-glue/src/pipeline/remote_node.js) against a stand-in first node
// over node:http: the inputs an embed answered come back without a call; rows of no token are
// sent to POST /v1/per-layer-inputs as they are, and its answer is taken only at exactly the
// size asked for and with every value finite and within bounds (a hostile node's answer is
// refused naming the call); rows with token ids other than the padding token are refused before
// anything is sent.
import assert from "node:assert/strict";
import http from "node:http";
import {describe, test} from "node:test";

import {RemoteNode} from "../../../js-glue/src/pipeline/remote_node.js";

const [N_LAYER, N_EMBD, N_PL] = [3, 8, 4];
const INFO = {layers: [0, 1], n_layer: N_LAYER, n_embd: N_EMBD, n_vocab: 16, has_embed: true, has_head: false, kv_rows_in: [], kv_rows_out: []};
const perLayerOf = (n) => Float32Array.from({length: N_LAYER * n * N_PL}, (_, i) => i / 16 - 1);
const bytes = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

// A stand-in node whose per-layer inputs answer is what `spoil` makes of the right one (by default
// itself); it records the bodies sent to it.
async function fakeNode(t) {
  const node = {spoil: (answer) => ({body: answer}), bodies: [], calls: 0};
  const server = http.createServer(async (req, res) => {
    if (req.url === "/readyz") return res.writeHead(200).end("{}");
    if (req.url === "/v1/info") return res.writeHead(200, {"content-type": "application/json"}).end(JSON.stringify(INFO));
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    node.calls++;
    if (req.url === "/v1/embed") {
      const n = JSON.parse(body).tokens.length;
      return res.writeHead(200).end(Buffer.concat([Buffer.alloc(4 * n * N_EMBD), bytes(perLayerOf(n))]));
    }
    node.bodies.push({url: req.url, type: req.headers["content-type"], body});
    const {body: answer, headers = {}} = node.spoil(bytes(perLayerOf(body.length / (4 * N_EMBD))));
    res.writeHead(200, {"content-type": "application/octet-stream", ...headers}).end(answer);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(resolve);
  }));
  node.url = `http://127.0.0.1:${server.address().port}`;
  return node;
}

const rows = (n) => Float32Array.from({length: n * N_EMBD}, (_, i) => Math.cos(i));
const withValue = (buffer, at, value) => {
  const out = Buffer.from(buffer);
  out.writeFloatLE(value, 4 * at);
  return out;
};

describe("a remote first node's per-layer inputs", () => {
  test("an embed's come with it; a media item's rows are sent as they are and the answer is taken as sent", async (t) => {
    const fake = await fakeNode(t);
    const node = await RemoteNode.open(fake.url);
    const hidden = await node.embed([2, 5], {nEmbdPerLayer: N_PL});
    const calls = fake.calls;
    assert.deepEqual(await node.perLayerInputs([2, 5], hidden, {nEmbdPerLayer: N_PL}), perLayerOf(2));
    assert.equal(fake.calls, calls, "no call for an embed's inputs");

    const media = rows(3);
    const perLayer = await node.perLayerInputs([0, 0, 0], media, {nEmbdPerLayer: N_PL});
    assert.deepEqual(perLayer, perLayerOf(3));
    assert.deepEqual(fake.bodies.map((b) => [b.url, b.type]), [["/v1/per-layer-inputs", "application/octet-stream"]]);
    assert.ok(fake.bodies[0].body.equals(bytes(media)), "the rows' bytes are the body");
  });

  test("rows with token ids other than the padding token, or without the model's width, are refused before anything is sent", async (t) => {
    const fake = await fakeNode(t);
    const node = await RemoteNode.open(fake.url);
    for (const [tokens, options, message] of [
      [[0, 7], {nEmbdPerLayer: N_PL}, /rows that did not come from embed\(\) stand for no token: expected 2 padding tokens \(0\) .* got tokens \[0,7\]/],
      [[0], {nEmbdPerLayer: N_PL}, /expected 2 padding tokens/],
      [[0, 0], {}, /nEmbdPerLayer 0/],
    ]) {
      await assert.rejects(node.perLayerInputs(tokens, rows(2), options), (error) => error.code === "invalid_argument" && message.test(error.message));
    }
    assert.equal(fake.calls, 0);
  });

  test("a hostile node's answer is refused naming the call and what is wrong", async (t) => {
    const fake = await fakeNode(t);
    const node = await RemoteNode.open(fake.url);
    const what = "POST /v1/per-layer-inputs";
    const ANSWER = N_LAYER * 2 * N_PL * 4;  // two rows' inputs
    for (const [name, spoil, message] of [
      ["a NaN", (a) => ({body: withValue(a, 2 * N_PL + 1, NaN)}), `${what}: value NaN at row 2, column 1 is not finite`],
      ["an infinity", (a) => ({body: withValue(a, 0, Infinity)}), `${what}: value Infinity at row 0, column 0 is not finite`],
      ["a huge value", (a) => ({body: withValue(a, 5, -1e30)}), `${what}: value -1.0000000150474662e+30 at row 1, column 1 is beyond ±1000000000000000`],
      ["a short answer", (a) => ({body: a.subarray(4)}), `${what}: the answer ended after ${ANSWER - 4} bytes, expected ${ANSWER}`],
      ["a long answer", (a) => ({body: Buffer.concat([a, a])}), `${what}: the answer runs past the ${ANSWER} bytes expected`],
      ["a Content-Length of one row", (a) => ({body: a.subarray(0, a.length / 2), headers: {"content-length": String(a.length / 2)}}),
        `${what}: the answer declares ${ANSWER / 2} bytes (Content-Length), expected ${ANSWER}`],
    ]) {
      fake.spoil = spoil;
      await assert.rejects(node.perLayerInputs([0, 0], rows(2), {nEmbdPerLayer: N_PL}),
        (error) => error.code === "bad_response" && error.message === message, name);
    }
  });
});
