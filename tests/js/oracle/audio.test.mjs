// Gemma 4's audio encoder on llama.cpp's side (docs/audio.md): a synthetic E2B-shape projector
// with the audio tower (make-model --mmproj --audio, 2 of its 12 blocks) and deterministic clips
// of a few lengths through mtmd (support/llama_audio.mjs). What llama.cpp gives must be what the
// facts say it gives: one chunk per 30 s, the frame and token counts of each chunk's length, mel
// values at or above the floor, and embeddings of the language model's width, finite, at unit
// scale and differing from token to token. The engine's encoder (build/native/lf_audio) must give
// the same chunks, frames and tokens, mel features equal bit for bit, embeddings equal bit for bit
// where llama.cpp runs its AVX-512 kernels (whose sums the encoder mirrors) and within a bound
// elsewhere, and the same bytes at 1, 2 and 3 threads.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {SAMPLE_RATE, lfAudioRun, llamaAudio, pcmClip} from "../support/llama_audio.mjs";
import {model} from "../support/models.mjs";
import {llamaKernels} from "../support/oracle_judge.mjs";

const PROJECTORS = [
  {name: "mmproj-e2b-audio-2", preset: "e2b-shape", extra: ["--mmproj", "--vision-layers", "1", "--audio", "--audio-layers", "2"],
    n_embd: 1536},
];

// Clip lengths in samples: a few frames, one short chunk, and past 30 s (two chunks).
const CLIPS = [800, SAMPLE_RATE / 2, 3 * SAMPLE_RATE, 31 * SAMPLE_RATE];

const N_MEL = 128;
const CHUNK_SAMPLES = 30 * SAMPLE_RATE;
const MEL_FLOOR = Math.log(1e-3);

// A chunk's frames: mtmd pads 160 samples (half the 320-sample window) on the left and frames
// it as Hugging Face's unfold of 321 samples every 160 does (integer division, as in C++).
const framesOf = (n) => Math.trunc((n + 160 - 321) / 160) + 1;
// Two stride-2, pad-1, kernel-3 convolutions over time.
const tokensOf = (frames) => [0, 1].reduce((t) => Math.floor((t - 1) / 2) + 1, frames);

// The chunk lengths mtmd cuts a clip of n samples into.
function chunkLengths(n) {
  const lengths = [];
  for (let off = 0; off < n; off += CHUNK_SAMPLES) lengths.push(Math.min(CHUNK_SAMPLES, n - off));
  return lengths;
}

function stats(values) {
  let min = Infinity, max = -Infinity, sum = 0, sq = 0;
  for (const v of values) {
    assert.ok(Number.isFinite(v), `not finite: ${v}`);
    min = Math.min(min, v);
    max = Math.max(max, v);
    sum += v;
    sq += v * v;
  }
  const mean = sum / values.length;
  return {min, max, mean, std: Math.sqrt(Math.max(0, sq / values.length - mean * mean))};
}

// What llama.cpp's reference for a clip of n samples must satisfy whatever the weights.
function checkReference(ref, n, nEmbd) {
  const lengths = chunkLengths(n);
  assert.equal(ref.n_mel, N_MEL);
  assert.equal(ref.chunks.length, lengths.length, "chunks");
  ref.chunks.forEach((chunk, c) => {
    const frames = framesOf(lengths[c]);
    assert.equal(chunk.n_frames, frames, `chunk ${c}: frames`);
    assert.equal(chunk.mel.length, N_MEL * frames, `chunk ${c}: mel values`);
    const mel = stats(chunk.mel);
    assert.ok(mel.min >= MEL_FLOOR - 1e-4, `chunk ${c}: mel ${mel.min} under the floor`);
    assert.ok(mel.max > MEL_FLOOR + 3, `chunk ${c}: mel all near the floor (max ${mel.max})`);
    assert.equal(chunk.n_tokens, tokensOf(frames), `chunk ${c}: tokens`);
    assert.equal(chunk.n_embd, nEmbd, `chunk ${c}: width`);
    assert.equal(chunk.embd.length, chunk.n_tokens * nEmbd, `chunk ${c}: embedding values`);
    // The embedder RMS-normalizes, then projects with unit-scale weights: values near unit scale.
    const e = stats(chunk.embd);
    assert.ok(e.std > 0.3 && e.std < 3, `chunk ${c}: embedding scale ${e.std}`);
    // Tokens differ: the first and last rows (one row when the chunk has one token: its values differ).
    const first = chunk.embd.slice(0, nEmbd), last = chunk.embd.slice((chunk.n_tokens - 1) * nEmbd);
    if (chunk.n_tokens > 1) assert.ok(first.some((v, i) => Math.abs(v - last[i]) > 1e-3), `chunk ${c}: first and last tokens equal`);
    assert.ok(stats(first).std > 0.1, `chunk ${c}: a token's values all equal`);
  });
}

// max |ours - ref| / max |ref| over a chunk's embeddings where llama.cpp's kernels are not its
// AVX-512 ones (8 lanes where ours take 16: docs/audio.md, "Agreement"); before the encoder
// mirrored any of the sums, 8.6e-4 to 1.2e-3 on these clips.
const EMBD_BOUND = 2e-3;

function relativeDiff(ours, ref) {
  let diff = 0, scale = 0;
  for (let i = 0; i < ref.length; i++) {
    diff = Math.max(diff, Math.abs(ours[i] - ref[i]));
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return diff / scale;
}

// The engine against llama.cpp's reference for the same clip; `mirrored`: the embeddings must be
// llama.cpp's bit for bit.
function checkOurs(ours, ref, mirrored) {
  assert.equal(ours.n_mel, ref.n_mel);
  assert.equal(ours.chunks.length, ref.chunks.length, "chunks");
  return ref.chunks.map((r, c) => {
    const o = ours.chunks[c];
    assert.deepEqual([o.n_frames, o.n_tokens, o.n_embd], [r.n_frames, r.n_tokens, r.n_embd], `chunk ${c}: frames, tokens, width`);
    const mel = new Uint32Array(Float32Array.from(o.mel).buffer), refMel = new Uint32Array(Float32Array.from(r.mel).buffer);
    assert.deepEqual(mel, refMel, `chunk ${c}: the mel features differ from mtmd's`);
    const d = relativeDiff(o.embd, r.embd);
    assert.ok(d <= (mirrored ? 0 : EMBD_BOUND), `chunk ${c}: embeddings ${d.toExponential(2)} from llama.cpp's (bound ${mirrored ? 0 : EMBD_BOUND})`);
    return d;
  });
}

describe("audio encoder: llama.cpp's reference", () => {
  for (const p of PROJECTORS) {
    for (const n of CLIPS) {
      test(`${p.name} ${(n / SAMPLE_RATE).toFixed(2)} s`, async () => {
        const mmproj = model(p.name, p.preset, p.extra);
        const clip = pcmClip(n);
        const ref = await llamaAudio(mmproj, clip);
        checkReference(ref, n, p.n_embd);
        const ours = lfAudioRun(mmproj, clip, {threads: 2});
        const diffs = checkOurs(ours, ref, (await llamaKernels()).avx512);
        for (const threads of [1, 3]) {
          assert.equal(lfAudioRun(mmproj, clip, {threads}).raw, ours.raw, `${threads} threads give other bytes than 2`);
        }
        const summary = ref.chunks.map((c, i) => `${c.n_frames} frames -> ${c.n_tokens} tokens in ${c.encode_ms.toFixed(0)} ms, ours ${diffs[i].toExponential(2)} away`);
        console.log(`${p.name} ${n} samples: ${summary.join(", ")}`);
      });
    }
  }
});
