// layerfold validate --image FILE / --audio FILE --mmproj PATH: the media before the prompt's text
// in a chat message give llama.cpp's next-token distribution for the same chat (its template
// rendering with a media marker, then mtmd: llama_vision_prompt), top-1 and top-k log-probs, with a
// q8_0 cache where our arithmetic mirrors llama.cpp's; llama.cpp is not asked in the report (no
// mtmd in node-llama-cpp), which says so; the exit code of a synthetic model says whether the
// media moved the answer; what it cannot read is refused by name.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {logSoftmax, topK} from "../../../js-glue/src/tokens/logits.js";
import {audioProjector, eModel, gemma4, visionProjector as projector} from "../support/encoder_node.mjs";
import {importHostPackage} from "../support/host_package.mjs";
import {rgbImage} from "../support/llama_vision.mjs";
import {mirroredImageChat} from "../support/llama_vision_prompt.mjs";
import {pcm16WavFile} from "../support/llama_audio.mjs";
import {llamaKernels, MIRRORED_BOUND} from "../support/oracle_judge.mjs";
import {cli} from "../support/server_process.mjs";

const {encode: encodePng} = await importHostPackage("fast-png");
const [WIDTH, HEIGHT] = [37, 23];
const TOP = 10;
// Where llama.cpp runs its AVX-512 kernels our encoder's rows are mtmd's bit for bit (docs/vision.md,
// "Agreement") and the whole is judged as the text oracle judges; elsewhere the tower's sums part
// from mtmd's, which moved ln p by 1.5e-2 when this host's did too: a bound of three times that.
const logProbBound = async () => ((await llamaKernels()).avx512 ? MIRRORED_BOUND : 5e-2);

function validate(file, args) {
  const r = spawnSync(process.execPath, [cli, "validate", "--model", file, ...args], {encoding: "utf8", timeout: 180_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

const png = () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lf-validate-")), "image.png");
  fs.writeFileSync(file, encodePng({width: WIDTH, height: HEIGHT, data: fs.readFileSync(rgbImage(WIDTH, HEIGHT)), channels: 3}));
  return file;
};

// A mono 16 kHz 16-bit WAV of n samples of a tone.
const wavFile = (n) => pcm16WavFile(Float32Array.from({length: n}, (_, i) => 0.25 * Math.sin(i / 5)));

test("validate --image: llama.cpp's next-token distribution for the same chat, top-1 and top-k log-probs", async (t) => {
  const ref = await mirroredImageChat(projector(), rgbImage(WIDTH, HEIGHT), WIDTH, HEIGHT,
    [{type: "media_marker", text: "<__media__>"}, {type: "text", text: "What is it?"}], {greedy: 1});
  if (!ref) {
    t.skip("llama.cpp's kernels on this host are not the engine's for this model and cache");
    return;
  }
  const r = validate(gemma4(), ["--image", png(), "--mmproj", projector(), "--image-max-tokens", "128", "--prompt", "What is it?",
    "--top-k", String(TOP), "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  const theirs = logSoftmax(Float32Array.from(ref.logits));
  assert.equal(result.top[0].id, topK(theirs, 1)[0], "llama.cpp's top-1");
  assert.deepEqual(result.top.map((e) => e.id).sort(), topK(theirs, TOP).sort(), `llama.cpp's top ${TOP}`);
  const bound = await logProbBound();
  for (const {id, probability} of result.top) {
    const diff = Math.abs(Math.log(probability) - theirs[id]);
    assert.ok(diff <= bound, `token ${id}: |Δ ln p| = ${diff} (bound ${bound})`);
  }
  const image = ref.chunks.find((c) => c.type === "image");
  assert.deepEqual(result.media, [{kind: "image", tokens: image.n_tokens}]);
  assert.equal(result.tokens.length, ref.chunks.reduce((n, c) => n + (c.type === "text" ? c.tokens.length : c.n_tokens), 0));
  assert.ok(result.timings.mediaMs > 0);
  assert.equal(result.llamaCpp, null);
  assert.match(result.llamaCppSkipped, /node-llama-cpp runs no mtmd/);
  assert.equal(result.mediaMovesAnswer, true);
});

test("validate --audio on an E-model: the report gives the encode time and says why llama.cpp is not asked", () => {
  const r = validate(eModel(), ["--audio", wavFile(16000), "--mmproj", audioProjector(), "--prompt", "What is it?"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^prompt  audio \(\d+ soft tokens\) then "What is it\?" in a chat message -> \d+ tokens$/m);
  assert.match(r.stdout, /^  media \d+\.\d ms \(read, decoded and encoded\)$/m);
  assert.match(r.stdout, /no llama\.cpp comparison: node-llama-cpp runs no mtmd, so it cannot read the prompt's images or audio/);
  assert.match(r.stdout, /without the media the next-token distribution is another/);
});

test("validate --image / --audio refuses what it cannot do, by name", () => {
  const image = png();
  for (const [args, message] of [
    [["--image", image], /--image needs --mmproj PATH\|URL/],
    [["--audio", wavFile(1600)], /--audio needs --mmproj PATH\|URL/],
    [["--image", "/nonexistent/a.png", "--mmproj", projector()], /--image \/nonexistent\/a\.png: no such file/],
    [["--audio", wavFile(1600), "--mmproj", projector()], /--audio .*clip\.wav: the projector \(--mmproj\) has no audio encoder to read it with/],
  ]) {
    const r = validate(gemma4(), args);
    assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});
