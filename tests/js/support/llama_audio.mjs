// llama.cpp's Gemma 4 audio encoder (llama_programs/llama_audio.cpp, mtmd compiled against the
// oracle's libggml) and ours (build/native/lf_audio) on a projector and raw 16 kHz PCM, and the
// deterministic clips they are run on.
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import {llamaBins, llamaMtmdProgram} from "./llama_source.mjs";
import {root} from "./models.mjs";
import {runChecked} from "./run_async.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_audio.cpp");

export const SAMPLE_RATE = 16000;

// mulberry32: a seeded uniform in [0, 1), so a clip's noise is the same on every machine.
function uniforms(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A deterministic clip of nSamples at 16 kHz: two steady tones, a chirp sweeping 100 Hz to
 * 6 kHz, seeded noise, and a silent stretch (its mel bins fall to the floor), so the mel bins
 * and the frames differ from one another; written as little-endian f32 to a temporary file: its
 * path.
 * @example const clip = pcmClip(3 * SAMPLE_RATE);
 */
export function pcmClip(nSamples, {seed = 1} = {}) {
  const random = uniforms(seed);
  const samples = new Float32Array(nSamples);
  const seconds = nSamples / SAMPLE_RATE;
  for (let i = 0; i < nSamples; i++) {
    const t = i / SAMPLE_RATE;
    // The chirp's phase: 2π ∫ f, with f going linearly from 100 Hz to 6 kHz over the clip.
    const phase = 2 * Math.PI * (100 * t + ((6000 - 100) / (2 * Math.max(seconds, 1e-3))) * t * t);
    const silent = t % 2 > 1.6;  // 0.4 s of silence every 2 s
    samples[i] = silent ? 0 :
      0.2 * Math.sin(2 * Math.PI * 220 * t) + 0.1 * Math.sin(2 * Math.PI * 1375 * t) + 0.15 * Math.sin(phase) +
      0.05 * (2 * random() - 1);
  }
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lf-audio-")), `${nSamples}.f32`);
  fs.writeFileSync(file, Buffer.from(samples.buffer));
  return file;
}

/**
 * llama.cpp's log-mel chunks and embeddings for a clip: {n_mel, preprocess_ms, chunks: [{n_frames,
 * mel (n_mel·n_frames, mel[m·n_frames + t]), n_tokens, n_embd, encode_ms (the fastest of reps),
 * embd (n_tokens·n_embd)}]}, one chunk per 30 s of the clip as mtmd encodes it.
 * @example const ref = await llamaAudio(mmproj, pcmClip(8000), {threads: 2});
 */
export async function llamaAudio(mmproj, pcm, {threads = 2, reps = 1} = {}) {
  const args = [mmproj, pcm, llamaBins, String(threads), String(reps)];
  return JSON.parse(await runChecked(await llamaMtmdProgram(source), args));
}

const lfAudio = path.join(root, "build", "native", "lf_audio");

/**
 * The engine's features and embeddings for the same projector and clip, in llamaAudio's shape
 * (without the timings), with its raw stdout (for byte comparisons across threads).
 * @example const ours = lfAudioRun(mmproj, pcmClip(8000), {threads: 3});
 */
export function lfAudioRun(mmproj, pcm, {threads = 1} = {}) {
  const raw = execFileSync(lfAudio, [mmproj, pcm, "--threads", String(threads)], {encoding: "utf8", maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "pipe"]});
  return {...JSON.parse(raw), raw};
}

// A mono 16 kHz WAV header for `dataBytes` bytes of samples in `format` (1: integer PCM, 3: IEEE
// float) of `bits` bits.
function wavHeader(dataBytes, format, bits) {
  const head = Buffer.alloc(44);
  head.write("RIFF", 0);
  head.writeUInt32LE(36 + dataBytes, 4);
  head.write("WAVEfmt ", 8);
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(format, 20);
  head.writeUInt16LE(1, 22);
  head.writeUInt32LE(SAMPLE_RATE, 24);
  head.writeUInt32LE(SAMPLE_RATE * bits / 8, 28);
  head.writeUInt16LE(bits / 8, 32);
  head.writeUInt16LE(bits, 34);
  head.write("data", 36);
  head.writeUInt32LE(dataBytes, 40);
  return head;
}

/**
 * A mono 16 kHz 32-bit float WAV of the samples: decoded, exactly the samples llama.cpp is given.
 * @example const wav = floatWav(new Float32Array(1600));
 */
export function floatWav(samples) {
  const data = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
  return Buffer.concat([wavHeader(data.length, 3, 32), data]);
}

/**
 * A mono 16 kHz 16-bit WAV of the samples (in [-1, 1], rounded to 16 bits), written to a
 * temporary file: its path (the format flac and lame encode from).
 * @example const file = pcm16WavFile(Float32Array.from({length: 16000}, (_, i) => 0.25 * Math.sin(i / 5)));
 */
export function pcm16WavFile(samples) {
  const data = Buffer.alloc(2 * samples.length);
  samples.forEach((x, i) => data.writeInt16LE(Math.round(Math.max(-1, Math.min(1, x)) * 32767), 2 * i));
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lf-wav-")), "clip.wav");
  fs.writeFileSync(file, Buffer.concat([wavHeader(data.length, 1, 16), data]));
  return file;
}
