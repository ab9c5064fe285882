// Images in chat requests (docs/vision.md, "Images through the gateway"): a PNG sent as a data:
// URL between two text parts gives llama.cpp's answer to the same chat (its own template
// rendering with a media marker, then mtmd: llama_vision_prompt), over a remote node with a q8_0
// cache where our arithmetic mirrors llama.cpp's; a second turn with the same image reuses the
// first one's session through the image; image URLs fetched only when allowed and within their
// limits; an image part's detail its budget (low: 70 soft tokens, as llama.cpp counts them at that
// budget; high refused where the nodes take shorter spans); parts the gateway cannot read refused
// with a 400 naming them.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import {describe, test} from "node:test";

import {visionProjector as projector} from "../support/encoder_node.mjs";
import {gemma4} from "../support/gateway_fixture.mjs";
import {importHostPackage} from "../support/host_package.mjs";
import {llamaVision, rgbImage} from "../support/llama_vision.mjs";
import {mirroredImageChat} from "../support/llama_vision_prompt.mjs";
import {startServer, waitReady} from "../support/server_process.mjs";
import {mediaChat as chat, mediaGateway} from "../support/media_gateway.mjs";

const {encode: encodePng} = await importHostPackage("fast-png");

const [WIDTH, HEIGHT] = [37, 23];
const MAX_TOKENS = 128;
const CACHE = ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"];

const png = () => Buffer.from(encodePng({width: WIDTH, height: HEIGHT, data: fs.readFileSync(rgbImage(WIDTH, HEIGHT)), channels: 3}));
const dataUrl = (bytes, type = "image/png") => `data:${type};base64,${Buffer.from(bytes).toString("base64")}`;
const imageChat = (url) => [{role: "user", content: [{type: "text", text: "Look:"}, {type: "image_url", image_url: {url}}, {type: "text", text: " What is it?"}]}];

const gateway = (t, options) => mediaGateway(t, {model: gemma4(), ...options});

describe("images in chat requests", () => {
  test("a PNG between text parts gives llama.cpp's answer to the same chat; the next turn reuses the session through it", async (t) => {
    const ref = await mirroredImageChat(projector(), rgbImage(WIDTH, HEIGHT), WIDTH, HEIGHT,
      [{type: "text", text: "Look:"}, {type: "media_marker", text: "<__media__>"}, {type: "text", text: " What is it?"}], {maxTokens: MAX_TOKENS});
    if (!ref) {
      t.skip("llama.cpp's kernels on this host are not the engine's for this model and cache");
      return;
    }
    const file = gemma4();
    const node = await startServer(t, {args: ["--model", file, ...CACHE, "--max-span", String(MAX_TOKENS)]});
    await waitReady(node.url);
    const gw = await gateway(t, {nodes: node.url, images: {mmproj: projector(), maxTokens: MAX_TOKENS}});
    const tokenizer = gw.state.node.tokenizer;
    const messages = imageChat(dataUrl(png()));
    const first = await chat(gw, messages);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const ends = new Set([tokenizer.eos, ...tokenizer.encode("<turn|>", {addBos: false, parseSpecial: true})]);
    const stop = ref.greedy.findIndex((id) => ends.has(id));
    assert.equal(first.body.choices[0].message.content, tokenizer.decode(stop < 0 ? ref.greedy : ref.greedy.slice(0, stop)));
    const imageTokens = ref.chunks.find((c) => c.type === "image").n_tokens;
    const promptTokens = ref.chunks.reduce((n, c) => n + (c.type === "text" ? c.tokens.length : c.n_tokens), 0);
    assert.equal(first.body.usage.prompt_tokens, promptTokens, "the image counts its soft tokens, as llama.cpp counts them");

    const next = await chat(gw, [...messages, first.body.choices[0].message, {role: "user", content: "And now?"}]);
    assert.equal(next.status, 200, JSON.stringify(next.body));
    assert.ok(next.body.usage.prompt_tokens_details.cached_tokens > imageTokens,
      `the second turn reused the first one's session past the image: ${JSON.stringify(next.body.usage)}`);
  });

  test("image URLs: fetched only when allowed, within their type, size and time", async (t) => {
    const served = new Map([["/ok.png", ["image/png", png()]], ["/text", ["text/plain", Buffer.from("hello")]],
      ["/big.png", ["image/png", Buffer.alloc(5000, 1)]]]);
    const server = http.createServer((request, response) => {
      if (request.url === "/slow.png") return;  // never answered: the fetch's own time runs out
      const [type, body] = served.get(request.url) ?? ["text/plain", Buffer.from("no")];
      response.writeHead(served.has(request.url) ? 200 : 404, {"content-type": type});
      response.end(body);
    });
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const at = (p) => `http://127.0.0.1:${server.address().port}${p}`;
    const images = {mmproj: projector(), maxTokens: MAX_TOKENS, maxBytes: 4096, fetchTimeoutMs: 2000};
    const closed = await gateway(t, {nodes: "local:0-1", images});
    const refused = await chat(closed, imageChat(at("/ok.png")));
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /messages\[0\]\.content\[1\]\.image_url\.url: this gateway fetches no image URLs/);

    const open = await gateway(t, {nodes: "local:0-1", images: {...images, fetchUrls: true}});
    const fetched = await chat(open, imageChat(at("/ok.png")));
    const sent = await chat(open, imageChat(dataUrl(png())));
    assert.equal(fetched.status, 200, JSON.stringify(fetched.body));
    assert.equal(fetched.body.choices[0].message.content, sent.body.choices[0].message.content, "a fetched image reads as the same image sent");
    for (const [p, message] of [["/text", /is text\/plain, not an image/], ["/big.png", /more than 4096/], ["/slow.png", /within 2000 ms/],
      ["/missing.png", /answered 404/]]) {
      const r = await chat(open, imageChat(at(p)));
      assert.equal(r.status, 400, p);
      assert.equal(r.body.error.param, "messages[0].content[1].image_url.url");
      assert.match(r.body.error.message, message);
    }
  });

  test("parts the gateway cannot read are refused by name, and a gateway without a projector refuses images", async (t) => {
    const gw = await gateway(t, {nodes: "local:0-1", images: {mmproj: projector(), maxTokens: MAX_TOKENS, maxBytes: 8192}});
    for (const [content, param, message] of [
      [[{type: "image_url", image_url: {url: "data:image/png;base64,@@@"}}], "messages[0].content[0].image_url.url", /not valid base64/],
      [[{type: "image_url", image_url: {url: dataUrl(Buffer.from("not a picture"))}}], "messages[0].content[0].image_url.url", /image/i],
      [[{type: "image_url", image_url: {url: dataUrl(Buffer.alloc(9000, 7))}}], "messages[0].content[0].image_url.url", /more than 8192 bytes/],
      [[{type: "image_url", image_url: {url: "ftp://example.com/a.png"}}], "messages[0].content[0].image_url.url", /must be a data: or http\(s\) URL/],
      [[{type: "image_url", image_url: {}}], "messages[0].content[0].image_url.url", /must be a non-empty string/],
      [[{type: "input_audio", input_audio: {data: "AAAA", format: "wav"}}], "messages[0].content[0].input_audio.data",
        /the projector \(--mmproj\) has no audio encoder to read it with/],
    ]) {
      const r = await chat(gw, [{role: "user", content}]);
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error.param, param);
      assert.match(r.body.error.message, message);
    }
    // Seven images of 77 soft tokens cannot fit the fixture's context of 512: refused before any is encoded.
    const many = await chat(gw, [{role: "user", content: Array.from({length: 7}, () => ({type: "image_url", image_url: {url: dataUrl(png())}}))}]);
    assert.equal(many.status, 400);
    assert.equal(many.body.error.code, "context_length_exceeded");
    assert.match(many.body.error.message, /at least \d+ tokens, its 7 media items' included; this model's context is 512 tokens/);
    const plain = await gateway(t, {nodes: "local:0-1"});
    const r = await chat(plain, imageChat(dataUrl(png())));
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /this gateway reads no images \(start it with --mmproj\)/);
  });

  test("an image part's detail is its budget: low 70 soft tokens, auto the gateway's, high within the nodes' spans", async (t) => {
    const [w, h] = [1000, 700];
    const rgb = rgbImage(w, h);
    const url = dataUrl(Buffer.from(encodePng({width: w, height: h, data: fs.readFileSync(rgb), channels: 3})));
    const part = (detail) => ({type: "image_url", image_url: detail === undefined ? {url} : {url, detail}});
    const gw = await gateway(t, {nodes: "local:0-1", images: {mmproj: projector(), maxTokens: MAX_TOKENS}});
    const asked = async (detail) => chat(gw, [{role: "user", content: [{type: "text", text: "Look:"}, part(detail)]}], {max_tokens: 1});
    const [low, auto, plain] = [await asked("low"), await asked("auto"), await asked(undefined)];
    for (const r of [low, auto, plain]) assert.equal(r.status, 200, JSON.stringify(r.body));
    const [at70, atDefault] = [await llamaVision(projector(), rgb, w, h, {maxTokens: 70}), await llamaVision(projector(), rgb, w, h, {maxTokens: MAX_TOKENS})];
    assert.ok(at70.n_tokens < atDefault.n_tokens, `llama.cpp's counts: ${at70.n_tokens} at 70, ${atDefault.n_tokens} at ${MAX_TOKENS}`);
    assert.equal(auto.body.usage.prompt_tokens - low.body.usage.prompt_tokens, atDefault.n_tokens - at70.n_tokens);
    assert.equal(plain.body.usage.prompt_tokens, auto.body.usage.prompt_tokens);
    const high = await asked("high");
    assert.equal(high.status, 400, JSON.stringify(high.body));
    assert.equal(high.body.error.param, "messages[0].content[1].image_url.url");
    assert.match(high.body.error.message, /soft tokens at detail "high"; this gateway's nodes take images of up to 128 \(serve --max-span\)/);
    const other = await asked("medium");
    assert.equal(other.status, 400);
    assert.equal(other.body.error.param, "messages[0].content[1].image_url.detail");
    assert.match(other.body.error.message, /must be auto, low, high, not "medium"/);
  });
});
