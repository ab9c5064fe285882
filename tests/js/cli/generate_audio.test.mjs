// layerfold generate --chat --audio FILE --mmproj PATH: refused by name where it cannot read the
// clip (the clip's answer against llama.cpp's is the gateway's test, tests/js/gateway/audio.test.mjs,
// over the same prompt code), and a clip through an E-model's projector answered.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {test} from "node:test";

import {audioProjector, eModel, gemma4, visionProjector} from "../support/encoder_node.mjs";
import {pcm16WavFile} from "../support/llama_audio.mjs";
import {cli} from "../support/server_process.mjs";

function generate(file, args) {
  const r = spawnSync(process.execPath, [cli, "generate", "--model", file, ...args], {encoding: "utf8", timeout: 120_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

// A mono 16 kHz 16-bit WAV of n samples of a tone.
const wavFile = (n) => pcm16WavFile(Float32Array.from({length: n}, (_, i) => 0.25 * Math.sin(i / 5)));

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
