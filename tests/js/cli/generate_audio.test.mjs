// layerfold generate --chat --audio FILE --mmproj PATH: refused by name where it cannot read the
// clip (the clip's answer against llama.cpp's is the gateway's test, tests/js/gateway/audio.test.mjs,
// over the same prompt code), and a clip through an E-model's projector answered.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {GEMMA4_TEMPLATE, GEMMA4_VOCAB, gemma4} from "../support/gateway_fixture.mjs";
import {model} from "../support/models.mjs";
import {cli} from "../support/server_process.mjs";

const E_MODEL = () => ["--vocab-gguf", GEMMA4_VOCAB(), "--chat-template", GEMMA4_TEMPLATE(), "--n-embd-per-layer", "32"];
const eModel = () => model("gemma4-e-template", "gemma4-vocab", E_MODEL());
const audioProjector = () => model("mmproj-gemma4-e-audio", "gemma4-vocab",
  [...E_MODEL(), "--mmproj", "--vision-tower", "tiny", "--audio", "--audio-layers", "1"]);
const visionProjector = () => model("mmproj-tiny", "tiny", ["--mmproj", "--vision-tower", "tiny"]);

function generate(file, args) {
  const r = spawnSync(process.execPath, [cli, "generate", "--model", file, ...args], {encoding: "utf8", timeout: 120_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

// A mono 16 kHz 16-bit WAV of n samples of a tone.
function wavFile(n) {
  const data = Buffer.alloc(2 * n);
  for (let i = 0; i < n; i++) data.writeInt16LE(Math.round(8000 * Math.sin(i / 5)), 2 * i);
  const head = Buffer.alloc(44);
  head.write("RIFF", 0);
  head.writeUInt32LE(36 + data.length, 4);
  head.write("WAVEfmt ", 8);
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20);
  head.writeUInt16LE(1, 22);
  head.writeUInt32LE(16000, 24);
  head.writeUInt32LE(32000, 28);
  head.writeUInt16LE(2, 32);
  head.writeUInt16LE(16, 34);
  head.write("data", 36);
  head.writeUInt32LE(data.length, 40);
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lf-audio-")), "clip.wav");
  fs.writeFileSync(file, Buffer.concat([head, data]));
  return file;
}

test("generate --audio: a clip through an E-model's projector, its soft tokens in the prompt", () => {
  const r = generate(eModel(), ["--chat", "--audio", wavFile(16000), "--mmproj", audioProjector(), "--prompt", "What is it?",
    "--max-tokens", "3", "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout.trim().split("\n").at(-1));
  assert.ok(result.tokens.length > 0);
  // One second: 99 frames, 25 soft tokens, between <|audio> and <audio|>, beside the chat's text.
  assert.ok(result.timings.prompt_n > 25 + 2, JSON.stringify(result.timings));
});

test("generate --audio refuses what it cannot do, by name", () => {
  const clip = wavFile(8000);
  for (const [file, args, message] of [
    [eModel(), ["--audio", clip, "--prompt", "x"], /--audio goes with --chat/],
    [eModel(), ["--chat", "--audio", clip, "--prompt", "x"], /--audio needs --mmproj PATH\|URL/],
    [eModel(), ["--chat", "--audio", "/nonexistent/a.wav", "--mmproj", audioProjector(), "--prompt", "x"], /--audio \/nonexistent\/a\.wav: no such file/],
    [eModel(), ["--chat", "--audio", visionProjector(), "--mmproj", audioProjector(), "--prompt", "x"], /--audio .*mmproj-tiny\.gguf: /],
    [gemma4(), ["--chat", "--audio", clip, "--mmproj", visionProjector(), "--prompt", "x"], /--audio .*: the projector \(--mmproj\) has no audio encoder to read it with/],
  ]) {
    const r = generate(file, args);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, message);
  }
});
