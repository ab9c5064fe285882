// Audio in chat requests (docs/audio.md, "Audio through the gateway"): a WAV sent as an input_audio
// part between two text parts gives llama.cpp's answer to the same chat (its own template rendering
// with a media marker, then mtmd with the same samples: llama_vision_prompt) on an E-model of Gemma
// 4's vocabulary and template over two local nodes, where our arithmetic mirrors llama.cpp's (a
// prompt under 64 rows: its one-chunk attention over the f16 cache), and the same answer when
// the first node is a served one (the clip's per-layer inputs computed there: POST
// /v1/per-layer-inputs); the next turn reuses the session through the clip; parts the gateway
// cannot read refused with a 400 naming them; an E-model whose first node is a tensor-parallel
// group refused media at open.
import assert from "node:assert/strict";
import fs from "node:fs";
import {describe, test} from "node:test";

import {audioProjector as projector, eModel} from "../support/encoder_node.mjs";
import {floatWav, pcmClip, SAMPLE_RATE} from "../support/llama_audio.mjs";
import {mirroredImageChat} from "../support/llama_vision_prompt.mjs";
import {startServer, waitReady} from "../support/server_process.mjs";
import {mediaChat as chat, mediaGateway} from "../support/media_gateway.mjs";

const audioPart = (bytes, format = "wav") => ({type: "input_audio", input_audio: {data: Buffer.from(bytes).toString("base64"), format}});
const audioChat = (part) => [{role: "user", content: [{type: "text", text: "Listen:"}, part, {type: "text", text: " What is it?"}]}];

const gateway = (t, options) => mediaGateway(t, {model: eModel(), ...options});

describe("audio in chat requests", () => {
  test("a WAV between text parts gives llama.cpp's answer to the same chat; the next turn reuses the session through it", async (t) => {
    const clip = pcmClip(SAMPLE_RATE, {seed: 4});
    const ref = await mirroredImageChat(projector(), clip, 0, 0,
      [{type: "text", text: "Listen:"}, {type: "media_marker", text: "<__media__>"}, {type: "text", text: " What is it?"}],
      {file: eModel(), cache: "f16"});
    if (!ref) {
      t.skip("llama.cpp's kernels on this host are not the engine's for this model and cache");
      return;
    }
    assert.deepEqual(ref.chunks.map((c) => c.type), ["text", "audio", "text"]);
    assert.equal(ref.chunks[1].non_causal, false, "mtmd decodes audio causally");
    const gw = await gateway(t, {nodes: "local:0-0,local:1-1", images: {mmproj: projector()}});
    const tokenizer = gw.state.node.tokenizer;
    const messages = audioChat(audioPart(floatWav(new Float32Array(new Uint8Array(fs.readFileSync(clip)).buffer))));
    const first = await chat(gw, messages);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const ends = new Set([tokenizer.eos, ...tokenizer.encode("<turn|>", {addBos: false, parseSpecial: true})]);
    const stop = ref.greedy.findIndex((id) => ends.has(id));
    const answer = tokenizer.decode(stop < 0 ? ref.greedy : ref.greedy.slice(0, stop));
    assert.equal(first.body.choices[0].message.content, answer);

    // The first node served: the clip's rows go to it for their per-layer inputs (it takes the
    // image spans of the default budget too, which this synthetic width attends both ways).
    const node = await startServer(t, {args: ["--model", eModel(), "--layers", "0-0", "--max-span", "280"]});
    await waitReady(node.url);
    const remoteFirst = await gateway(t, {nodes: `${node.url},local:1-1`, images: {mmproj: projector()}});
    const served = await chat(remoteFirst, messages);
    assert.equal(served.status, 200, JSON.stringify(served.body));
    assert.equal(served.body.choices[0].message.content, answer, "a served first node gives llama.cpp's answer too");
    assert.equal(served.body.usage.completion_tokens, first.body.usage.completion_tokens);
    assert.ok(node.logs.some((line) => line.message === "request" && line.route === "/v1/per-layer-inputs" && line.status === 200),
      "the clip's per-layer inputs came from the served node");
    const audioTokens = ref.chunks[1].n_tokens;
    const promptTokens = ref.chunks.reduce((n, c) => n + (c.type === "text" ? c.tokens.length : c.n_tokens), 0);
    assert.equal(first.body.usage.prompt_tokens, promptTokens, "the clip counts its soft tokens, as llama.cpp counts them");

    const next = await chat(gw, [...messages, first.body.choices[0].message, {role: "user", content: "And now?"}]);
    assert.equal(next.status, 200, JSON.stringify(next.body));
    assert.ok(next.body.usage.prompt_tokens_details.cached_tokens > audioTokens,
      `the second turn reused the first one's session past the clip: ${JSON.stringify(next.body.usage)}`);
  });

  test("audio parts it cannot read are refused by name, and the gateway still answers", async (t) => {
    const gw = await gateway(t, {nodes: "local:0-1", images: {mmproj: projector()}});
    const wav = floatWav(new Float32Array(SAMPLE_RATE / 10).fill(0.25));
    for (const [part, param, message] of [
      [{type: "input_audio", input_audio: {data: "@@@@", format: "wav"}}, "messages[0].content[1].input_audio.data", /not valid base64/],
      [{type: "input_audio", input_audio: {data: "AAAA", format: "ogg"}}, "messages[0].content[1].input_audio.format", /must be wav, mp3, flac/],
      [audioPart(Buffer.from("certainly not audio at all")), "messages[0].content[1].input_audio.data", /input_audio\.data: /],
      [audioPart(wav.subarray(0, 60)), "messages[0].content[1].input_audio.data", /WAV/],
      [audioPart(floatWav(new Float32Array([0.5]))), "messages[0].content[1].input_audio.data", /too short for one 20 ms frame/],
    ]) {
      const r = await chat(gw, audioChat(part));
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error.param, param);
      assert.match(r.body.error.message, message);
    }
    const ok = await chat(gw, audioChat(audioPart(wav)));
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const plain = await gateway(t, {nodes: "local:0-1"});
    const r = await chat(plain, audioChat(audioPart(wav)));
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /this gateway reads no audio \(start it with --mmproj\)/);
    // A media item's per-layer inputs come from its rows, which a group's members are never sent.
    await assert.rejects(gateway(t, {nodes: "tp(local:0-0*2),local:1-1", images: {mmproj: projector()}}),
      /node 0 is a tensor-parallel group: an E-model's first node computes media rows' per-layer inputs from the rows/);
  });
});
