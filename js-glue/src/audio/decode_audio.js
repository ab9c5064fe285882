// An audio file's bytes as the samples Gemma 4's audio encoder reads: mono f32 at 16 kHz, as
// llama.cpp's mtmd-helper gets them from the miniaudio it vendors (ma_decoder asked for f32, one
// channel, the model's rate). The steps are miniaudio's: each format's samples to f32 as its
// decoder scales them (wav_reader.js, flac_reader.js, mp3_reader.js), the channels averaged in
// f32 (miniaudio's mono-out path: the sum in channel order over the count, every channel alike),
// then its linear resampler with its low-pass filter (resample_linear.js). The files mtmd takes
// are the ones it sniffs: RIFF/WAVE, MP3 (an ID3 tag or a frame sync) and FLAC. Everything a
// header says is checked before decoding (channels, rate, length against maxSeconds); every
// format is decoded in pieces, each mixed and resampled as it comes and the limit checked as
// they go, so what is held is the file and its 16 kHz samples, and neither a lying header nor a
// stream that expands without bound costs more than the limit. The MP3 and
// FLAC decoders are WASM the host makes available (useAudioDecoders): a Node host lets the
// packages compile their own, a worker hands over the compiled modules.
import { MPEGDecoder } from 'mpg123-decoder';

import { decodeFlac, readFlacHeader, useFlacModule } from './flac_reader.js';
import { decodeMp3, readMp3Tag } from './mp3_reader.js';
import { LinearResampler, outputLength } from './resample_linear.js';
import { readWavHeader, readWavSamples } from './wav_reader.js';

/** The rate Gemma 4's audio encoder takes (mtmd_get_audio_sample_rate). */
export const AUDIO_SAMPLE_RATE = 16000;
/** Seconds of audio a file may hold unless the caller says otherwise. */
export const DEFAULT_MAX_AUDIO_SECONDS = 600;
/** Bytes a file may have unless the caller says otherwise: ten minutes of 48 kHz 8-channel 24-bit WAV fit. */
export const DEFAULT_MAX_AUDIO_BYTES = 256 * 1024 * 1024;
/** The most channels a file may have (miniaudio's channel maps go further; no speech file does). */
export const MAX_AUDIO_CHANNELS = 8;
/** The sample rates a file may have, in Hz: every recording rate up to 192 kHz (the work of a decode grows with the rate). */
export const MIN_AUDIO_RATE = 1000, MAX_AUDIO_RATE = 192000;

const f32 = Math.fround;
let compressed = false;  // whether the host made the MP3 and FLAC decoders available

/** An audio file the engine cannot read: `message` says why, for a 400. */
export class AudioError extends Error {
  constructor(message) {
    super(message);
    this.name = 'AudioError';
    this.code = 'invalid_audio';
  }
}
const fail = (message) => new AudioError(message);

/**
 * Makes MP3 and FLAC decode. A host that may compile WASM at run time (Node) calls it with no
 * modules and the packages compile the decoders they embed; one that may not (workerd) passes
 * the compiled modules of mpg123-decoder's and @wasm-audio-decoders/flac's WASM.
 * @example useAudioDecoders();  // Node
 * @example useAudioDecoders({ mp3: mpg123Module, flac: flacModule });  // a worker's imported .wasm
 */
export function useAudioDecoders({ mp3 = null, flac = null } = {}) {
  if (mp3) MPEGDecoder.module = mp3;
  if (flac) useFlacModule(flac);
  compressed = true;
}

/**
 * bytes (a WAV, MP3 or FLAC file) -> { samples: Float32Array (mono, 16 kHz), sampleRate, seconds,
 * format: 'WAV' | 'MP3' | 'FLAC' }; rejects with AudioError naming what is wrong: not audio,
 * a format or variant it does not read, header values out of range, over the limits (from the
 * header before decoding when it says the length), truncated or corrupt, no samples, samples
 * that are not finite.
 * @example const { samples, seconds } = await decodeAudio(fs.readFileSync('speech.wav'));
 */
export async function decodeAudio(bytes, { maxSeconds = DEFAULT_MAX_AUDIO_SECONDS, maxBytes = DEFAULT_MAX_AUDIO_BYTES } = {}) {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (view.length === 0) throw fail('the audio file is empty');
  if (view.length > maxBytes) throw fail(`the audio file is ${view.length} bytes, over the limit of ${maxBytes}`);
  const format = sniff(view);
  if (format !== 'WAV' && !compressed) throw fail(`this host has no ${format} decoder (useAudioDecoders)`);
  const mixer = new MonoMixer();
  let sampleRate, frames;
  try {
    ({ sampleRate, frames } = format === 'WAV' ? readWav(view, maxSeconds, mixer)
      : format === 'FLAC' ? await readFlac(view, maxSeconds, mixer) : await readMp3(view, maxSeconds, mixer));
  } catch (error) {
    if (error instanceof AudioError) throw error;
    throw fail(`the ${format} file could not be decoded: ${error.message}`);  // a decoder's own exception
  }
  if (frames === 0) throw fail(`the ${format} file holds no samples`);
  const samples = mixer.finish(outputLength(frames, sampleRate, AUDIO_SAMPLE_RATE));
  for (let i = 0; i < samples.length; i++) {
    if (!Number.isFinite(samples[i])) throw fail(`the ${format} file's samples are not all finite numbers`);
  }
  return { samples, sampleRate: AUDIO_SAMPLE_RATE, seconds: samples.length / AUDIO_SAMPLE_RATE, format };
}

// The format by the bytes mtmd-helper's is_audio_file looks at; anything else is named if it
// is a common kind of file, so a caller learns what it sent.
function sniff(b) {
  const text = (at, n) => String.fromCharCode(...b.subarray(at, at + n));
  if (b.length >= 12) {
    if (text(0, 4) === 'RIFF' && text(8, 4) === 'WAVE') return 'WAV';
    if (text(0, 3) === 'ID3' || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0)) return 'MP3';
    if (text(0, 4) === 'fLaC') return 'FLAC';
  }
  const found = text(1, 3) === 'PNG' ? 'a PNG image' : b[0] === 0xff && b[1] === 0xd8 ? 'a JPEG image'
    : text(0, 4) === 'RIFF' && text(8, 4) === 'WEBP' ? 'a WebP image' : text(0, 4) === 'OggS' ? 'an Ogg stream (Vorbis or Opus)'
      : text(4, 4) === 'ftyp' ? 'an MP4/M4A file' : b.length < 12 ? `${b.length} bytes` : 'none of them';
  throw fail(`the data is not an audio file this engine reads (WAV, MP3 or FLAC): found ${found}`);
}

function checkHeader(format, channels, sampleRate) {
  if (!(channels >= 1 && channels <= MAX_AUDIO_CHANNELS)) throw fail(`the ${format} file has ${channels} channels; 1 to ${MAX_AUDIO_CHANNELS} are read`);
  if (!(sampleRate >= MIN_AUDIO_RATE && sampleRate <= MAX_AUDIO_RATE)) {
    throw fail(`the ${format} file's sample rate is ${sampleRate} Hz; ${MIN_AUDIO_RATE} to ${MAX_AUDIO_RATE} Hz are read`);
  }
}

function checkLength(format, frames, sampleRate, maxSeconds) {
  if (frames > maxSeconds * sampleRate) {
    throw fail(`the ${format} audio is ${(frames / sampleRate).toFixed(1)} s, over the limit of ${maxSeconds} s`);
  }
}

function readWav(bytes, maxSeconds, mixer) {
  const header = readWavHeader(bytes, fail);
  checkHeader('WAV', header.channels, header.sampleRate);
  checkLength('WAV', header.frames, header.sampleRate, maxSeconds);
  readWavSamples(bytes, header, (channels) => mixer.push(channels, header.sampleRate));
  return { sampleRate: header.sampleRate, frames: header.frames };
}

async function readFlac(bytes, maxSeconds, mixer) {
  const header = readFlacHeader(bytes, fail);
  checkHeader('FLAC', header.channels, header.sampleRate);
  if (header.bitsPerSample < 4 || header.bitsPerSample > 24) {
    throw fail(`FLAC of ${header.bitsPerSample} bits per sample is not supported: 4 to 24 are`);
  }
  checkLength('FLAC', header.frames, header.sampleRate, maxSeconds);
  const maxFrames = Math.floor(maxSeconds * header.sampleRate);
  const frames = await decodeFlac(bytes, header, maxFrames, fail, (channels) => mixer.push(channels, header.sampleRate));
  return { sampleRate: header.sampleRate, frames };
}

async function readMp3(bytes, maxSeconds, mixer) {
  const tag = readMp3Tag(bytes);
  if (tag?.frames != null) checkLength('MP3', tag.frames * tag.samplesPerFrame, tag.sampleRate, maxSeconds);
  if (tag?.bytes != null && bytes.length - tag.offset < tag.bytes) {
    throw fail(`the MP3 file is truncated: its Xing/Info tag says ${tag.bytes} bytes, ${bytes.length - tag.offset} are there`);
  }
  const { sampleRate, frames } = await decodeMp3(bytes, maxSeconds, fail, (piece, rate) => {
    checkHeader('MP3', piece.length, rate);
    mixer.push(piece, rate);
  });
  return { sampleRate, frames };
}

// Pieces of channels [c][frames] mixed to one as miniaudio's mono-out channel converter mixes
// f32 frames, then resampled to 16 kHz; finish(length) -> the 16 kHz samples, `length` of them.
class MonoMixer {
  constructor() {
    this.resampler = null;
    this.pieces = [];
  }

  push(channels, sampleRate) {
    this.resampler ??= new LinearResampler(sampleRate, AUDIO_SAMPLE_RATE);
    this.pieces.push(this.resampler.push(mono(channels)));
  }

  finish(length) {
    const out = new Float32Array(length);
    let at = 0;
    for (const piece of this.pieces) {
      if (at >= length) break;
      out.set(piece.subarray(0, length - at), at);
      at += piece.length;
    }
    return out;
  }
}

// Channels [c][frames] -> one: the sum in channel order over the count, in f32.
function mono(channels) {
  if (channels.length === 1) return channels[0];
  const out = new Float32Array(channels[0].length);
  for (let i = 0; i < out.length; i++) {
    let sum = 0;
    for (const channel of channels) sum = f32(sum + channel[i]);
    out[i] = f32(sum / channels.length);
  }
  return out;
}
