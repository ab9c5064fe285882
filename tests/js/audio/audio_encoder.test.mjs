// The audio encoder through the WASM modules (js-glue/src/audio/encoder.js over lf_audio_*): the
// same soft-token embeddings, byte for byte, as the native build's lf_audio at every thread count
// and in the single-thread module, and clips the engine cannot take refused by what is wrong.
import assert from "node:assert/strict";
import fs from "node:fs";
import {after, before, describe, test} from "node:test";

import {AudioEncoder} from "../../../js-glue/src/audio/encoder.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {lfAudioRun, pcmClip, SAMPLE_RATE} from "../support/llama_audio.mjs";
import {model} from "../support/models.mjs";

const projector = () => model("mmproj-e2b-audio-1", "e2b-shape", ["--mmproj", "--vision-layers", "1", "--audio", "--audio-layers", "1"]);

const bits = (floats) => new Uint32Array(Float32Array.from(floats).buffer);
const samplesOf = (file) => new Float32Array(new Uint8Array(fs.readFileSync(file)).buffer);

describe("audio encoder in WASM", () => {
  const modules = [];
  before(async () => {
    modules.push({name: "threaded, 1 thread", lf: await loadThreadedModule({threads: 2}), threads: 1});
    modules.push({name: "threaded, 2 threads", lf: modules[0].lf, threads: 2});
    modules.push({name: "single thread", lf: await loadSingleThreadModule(), threads: 1});
  });
  after(() => {
    modules[0].lf.close();
    modules[2].lf.close();
  });

  test("the embeddings are the native build's, byte for byte, in every module and thread count", async () => {
    const file = projector();
    // One token (llama.cpp's single-column products), half a second, and a clip 400 samples past
    // a whole number of hops.
    const clips = [pcmClip(800, {seed: 2}), pcmClip(SAMPLE_RATE / 2), pcmClip(2 * SAMPLE_RATE + 400, {seed: 3})];
    const refs = clips.map((clip) => lfAudioRun(file, clip, {threads: 2}));
    for (const {name, lf, threads} of modules) {
      const audio = await AudioEncoder.open(lf, await openSource(file), {threads});
      try {
        assert.equal(audio.nEmbdText, 1536);
        for (const [i, clip] of clips.entries()) {
          const ref = refs[i].chunks[0];
          const samples = samplesOf(clip);
          assert.deepEqual(audio.tokens(samples.length), [ref.n_tokens], `${name}: chunk tokens`);
          const ours = await audio.encode(samples);
          assert.equal(ours.tokens, ref.n_tokens);
          assert.deepEqual(ours.chunks, [ref.n_tokens]);
          assert.deepEqual(bits(ours.embd), bits(ref.embd), `${name}, clip ${i}: the embeddings differ from lf_audio's`);
        }
      } finally {
        audio.close();
      }
    }
  });

  test("clips it cannot take are refused by what is wrong, and the encoder still works", async () => {
    const {lf} = modules[0];
    const audio = await AudioEncoder.open(lf, await openSource(projector()), {threads: 2});
    try {
      const samples = samplesOf(pcmClip(SAMPLE_RATE / 4));
      assert.throws(() => audio.tokens(0), /sample count must be a whole number from 1 to 1e9/);
      assert.throws(() => audio.tokens(1), /1 samples, is too short for one 20 ms frame/);
      // 30 s and one sample: the last piece gives no frame, which llama.cpp refuses too.
      assert.throws(() => audio.tokens(30 * SAMPLE_RATE + 1), /last 30 s piece, 1 samples, is too short/);
      assert.deepEqual(audio.tokens(31 * SAMPLE_RATE), [750, 25]);
      const bad = samples.slice();
      bad[77] = NaN;
      await assert.rejects(audio.encode(bad), /sample 77 of the clip is not a finite number/);
      await assert.rejects(audio.encode([0.5, 0.25]), /a clip is a Float32Array of 16 kHz samples/);
      // Asked for at once, two clips are encoded in turn, each the bytes it gives alone.
      const [once, twice] = await Promise.all([audio.encode(samples), audio.encode(samples)]);
      assert.deepEqual(bits(twice.embd), bits(once.embd));
      assert.ok(once.embd.every(Number.isFinite));
    } finally {
      audio.close();
    }
    await assert.rejects(AudioEncoder.open(lf, await openSource(model("mmproj-tiny", "tiny", ["--mmproj", "--vision-tower", "tiny"]))),
      /projector .*mmproj-tiny\.gguf: the projector has no audio encoder \(clip\.has_audio_encoder\)/);
  });
});
