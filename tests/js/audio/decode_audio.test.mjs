// Audio files into the audio encoder's samples (js-glue/src/audio/decode_audio.js), against
// llama.cpp's own decoding (the vendored miniaudio as mtmd-helper configures it:
// support/llama_audio_decode.mjs): WAV and FLAC sample for sample, MP3 within the bound that two
// different MP3 decoders leave; and files that are empty, foreign, truncated, corrupt, too long
// or out of range refused by what is wrong, the decoder still working after.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {before, describe, test} from "node:test";

import {AudioError, decodeAudio, useAudioDecoders} from "../../../js-glue/src/audio/decode_audio.js";
import {llamaDecodeAudio} from "../support/llama_audio_decode.mjs";

useAudioDecoders();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-audio-test-"));

// A deterministic test signal in [-0.9, 0.9] for channel c at time t (seconds): two tones, a
// chirp through the band the resampler's filter cuts, and LCG noise, so that filtering,
// interpolation and mixing all have something to get wrong.
function signal(frames, rate, channels) {
  let seed = 12345;
  const noise = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5);
  const out = Array.from({length: channels}, () => new Float64Array(frames));
  for (let i = 0; i < frames; i++) {
    const t = i / rate;
    for (let c = 0; c < channels; c++) {
      out[c][i] = 0.4 * Math.sin(2 * Math.PI * (300 + 150 * c) * t) + 0.2 * Math.sin(2 * Math.PI * 3700 * t + c)
        + 0.15 * Math.sin(2 * Math.PI * (500 + 9000 * t) * t) + 0.15 * noise();
    }
  }
  return out;
}

// A RIFF/WAVE file of the signal: PCM of `bits` (8 unsigned, 16, 24, 32) or IEEE float (float: 32 or 64).
function wav({rate, channels, seconds = 0.5, bits = 16, float = false, formatTag = float ? 3 : 1, transform = null}) {
  const frames = Math.round(rate * seconds);
  const data = signal(frames, rate, channels);
  if (transform) transform(data);
  const bytesPer = bits / 8, blockAlign = channels * bytesPer;
  const out = Buffer.alloc(44 + frames * blockAlign);
  out.write("RIFF", 0);
  out.writeUInt32LE(36 + frames * blockAlign, 4);
  out.write("WAVEfmt ", 8);
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(formatTag, 20);
  out.writeUInt16LE(channels, 22);
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(rate * blockAlign, 28);
  out.writeUInt16LE(blockAlign, 32);
  out.writeUInt16LE(bits, 34);
  out.write("data", 36);
  out.writeUInt32LE(frames * blockAlign, 40);
  for (let i = 0, at = 44; i < frames; i++) {
    for (let c = 0; c < channels; c++, at += bytesPer) {
      const v = data[c][i];
      if (float && bits === 32) out.writeFloatLE(v, at);
      else if (float) out.writeDoubleLE(v, at);
      else if (bits === 8) out.writeUInt8(Math.round(v * 127) + 128, at);
      else if (bits === 16) out.writeInt16LE(Math.round(v * 32767), at);
      else if (bits === 24) out.writeIntLE(Math.round(v * 8388607), at, 3);
      else out.writeInt32LE(Math.round(v * 2147483647), at);
    }
  }
  return out;
}

// A file encoded by a Debian tool (flac, lame) from a WAV of the signal.
function encoded(tool, args, wavBytes, ext) {
  const input = path.join(tmp, `in-${process.hrtime.bigint()}.wav`), output = `${input}.${ext}`;
  fs.writeFileSync(input, wavBytes);
  execFileSync(tool, [...args, input, ...(tool === "lame" ? [output] : ["-o", output])], {stdio: "ignore"});
  return fs.readFileSync(output);
}
const flac = (options, args = []) => encoded("flac", ["-s", "-f", ...args], wav(options), "flac");
const mp3 = (options, args = []) => encoded("lame", ["--quiet", ...args], wav(options), "mp3");

// Ours and llama.cpp's samples for one file; where they differ, by how much.
async function compare(bytes) {
  const ref = await llamaDecodeAudio(bytes);
  assert.equal(ref.ok, true, "miniaudio decodes the file");
  const ours = await decodeAudio(bytes);
  assert.equal(ours.samples.length, ref.samples.length, "as many samples as llama.cpp's");
  let maxDiff = 0, sumSquares = 0, differing = 0;
  for (let i = 0; i < ref.samples.length; i++) {
    const d = Math.abs(ours.samples[i] - ref.samples[i]);
    if (d > 0) differing++;
    maxDiff = Math.max(maxDiff, d);
    sumSquares += d * d;
  }
  return {ours, ref, maxDiff, rms: Math.sqrt(sumSquares / ref.samples.length), differing};
}

async function assertSameAsLlama(bytes, format) {
  const {ours, ref, maxDiff, differing} = await compare(bytes);
  assert.equal(ours.format, format);
  assert.equal(ours.sampleRate, 16000);
  assert.equal(ours.seconds, ref.samples.length / 16000);
  assert.equal(differing, 0, `every sample as llama.cpp's (largest difference ${maxDiff})`);
}

const refuses = async (bytes, pattern, options) => {
  await assert.rejects(decodeAudio(bytes, options), (error) => {
    assert.ok(error instanceof AudioError, `an AudioError, not ${error}`);
    assert.equal(error.code, "invalid_audio");
    assert.match(error.message, pattern);
    return true;
  });
};
// Each refusal leaves the decoders as they were: a good file of each format decodes after it.
const stillDecodes = async () => {
  for (const bytes of [wav({rate: 16000, channels: 1, seconds: 0.1}), goodFlac, goodMp3]) {
    assert.ok((await decodeAudio(bytes)).samples.length > 1000);
  }
};
let goodFlac, goodMp3;
before(() => {
  goodFlac = flac({rate: 44100, channels: 2});
  goodMp3 = mp3({rate: 44100, channels: 2});
});

describe("decodeAudio against llama.cpp's miniaudio", () => {
  test("WAV at 16 kHz mono: every PCM depth and float, sample for sample", async () => {
    for (const [bits, float] of [[8, false], [16, false], [24, false], [32, false], [32, true], [64, true]]) {
      await assertSameAsLlama(wav({rate: 16000, channels: 1, bits, float}), "WAV");
    }
  });

  test("WAV resampled and mixed: 44.1 and 48 kHz down, 8 kHz up, stereo and 3 channels, sample for sample", async () => {
    for (const options of [
      {rate: 44100, channels: 2, bits: 16}, {rate: 48000, channels: 1, bits: 24}, {rate: 48000, channels: 3, bits: 32, float: true},
      {rate: 8000, channels: 2, bits: 8}, {rate: 22050, channels: 1, bits: 16}, {rate: 16000, channels: 2, bits: 16},
    ]) {
      await assertSameAsLlama(wav(options), "WAV");
    }
  });

  test("a WAV of a length the resampler does not reach: the missing end is zeros, as mtmd's buffer", async () => {
    // miniaudio's length formula counts 334 frames for 999 at 48 kHz; its resampler, a frame
    // behind, makes 333 and mtmd's buffer keeps the last at 0
    const bytes = wav({rate: 48000, channels: 1, seconds: 999 / 48000});
    const {ref} = await compare(bytes);
    assert.equal(ref.framesRead, ref.frames - 1);
    assert.equal(ref.samples[ref.frames - 1], 0);
    await assertSameAsLlama(bytes, "WAV");
  });

  test("FLAC: 16 and 24 bits, mono and stereo, 16, 44.1 and 48 kHz, full scale, sample for sample", async () => {
    for (const options of [
      {rate: 16000, channels: 1, bits: 16}, {rate: 44100, channels: 2, bits: 16}, {rate: 48000, channels: 2, bits: 24},
      // every tenth sample at full scale, where taking the decoder's integers back is closest to failing
      {rate: 16000, channels: 1, bits: 24, transform: ([data]) => { for (let i = 0; i < data.length; i += 10) data[i] = i % 20 ? 1 : -1; }},
    ]) {
      await assertSameAsLlama(flac(options), "FLAC");
    }
  });

  test("MP3: within one 16-bit step of dr_mp3 where no resampling spreads it, a few steps after", async () => {
    // At 16 kHz the samples are dr_mp3's 16-bit steps both ways; mpg123's and minimp3's synthesis
    // round a few samples to the neighbouring step. Resampling mixes neighbouring samples through a
    // low-pass filter whose impulse response sums to under 2 in absolute value, so a step's
    // difference grows at most that much there.
    const cases = [
      [{rate: 16000, channels: 1, seconds: 1}, ["-b", "64"], 1 / 32768],
      [{rate: 44100, channels: 2, seconds: 1}, ["-b", "128"], 2 / 32768],
      [{rate: 48000, channels: 1, seconds: 1}, ["-b", "96"], 2 / 32768],
      [{rate: 22050, channels: 2, seconds: 1}, ["-b", "64", "-t"], 2 / 32768],  // no Info tag: no gapless trim on either side
    ];
    for (const [options, args, bound] of cases) {
      const {ours, maxDiff, rms, differing} = await compare(mp3(options, args));
      assert.equal(ours.format, "MP3");
      assert.ok(maxDiff <= bound, `${JSON.stringify(options)}: largest difference ${maxDiff} over ${bound}`);
      assert.ok(rms < 1e-5, `${JSON.stringify(options)}: RMS difference ${rms} (${differing} samples differ)`);
    }
  });
});

describe("decodeAudio refuses", () => {
  test("nothing, foreign data and formats it does not read, by what it found", async () => {
    await refuses(new Uint8Array(0), /the audio file is empty/);
    const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
    await refuses(png, /not an audio file this engine reads \(WAV, MP3 or FLAC\): found a PNG image/);
    await refuses(Buffer.from("OggS\0\x02\0\0\0\0\0\0\0\0"), /found an Ogg stream/);
    await refuses(Buffer.from("hello, this is text"), /found none of them/);
    await refuses(wav({rate: 16000, channels: 1, formatTag: 2}), /WAV MS ADPCM is not supported/);
    await refuses(wav({rate: 16000, channels: 1, bits: 16, formatTag: 3}), /WAV float of 16 bits per sample is not supported/);
    await stillDecodes();
  });

  test("truncated files of each format, naming the format and what is missing", async () => {
    const good = wav({rate: 16000, channels: 1});
    await refuses(good.subarray(0, 1000), /the WAV file is truncated: its data chunk says 16000 bytes, 956 are there/);
    await refuses(good.subarray(0, 30), /the WAV file's fmt chunk is 16 bytes, 10 are there/);
    await refuses(goodFlac.subarray(0, Math.floor(goodFlac.length / 2)), /the FLAC file is truncated or corrupt: its header says 22050 frames, \d+ decoded/);
    await refuses(goodFlac.subarray(0, 30), /the FLAC file has no STREAMINFO block/);
    await refuses(goodMp3.subarray(0, Math.floor(goodMp3.length / 2)), /the MP3 file is truncated: its Xing\/Info tag says \d+ bytes/);
    // llama.cpp takes the truncated WAV as the shorter file it would be (dr_wav counts the bytes
    // that are there); refusing tells the caller instead
    const ref = await llamaDecodeAudio(good.subarray(0, 1000));
    assert.equal(ref.ok, true);
    assert.equal(ref.frames, (1000 - 44) / 2);
    await stillDecodes();
  });

  test("flipped bytes: header values out of range, a FLAC frame's CRC, an MP3 frame sync", async () => {
    const rate = wav({rate: 16000, channels: 1});
    rate[27] ^= 0x40;  // the sample rate's high byte
    await refuses(rate, /the WAV file's sample rate is 1073757824 Hz; 1000 to 192000 Hz are read/);
    await refuses(wav({rate: 16000, channels: 9}), /the WAV file has 9 channels; 1 to 8 are read/);
    const align = wav({rate: 16000, channels: 2});
    align[32] ^= 0x01;
    await refuses(align, /the WAV file's block align is 5 bytes, 2 channels of 16 bits take 4/);
    const frame = Uint8Array.from(goodFlac);
    frame[frame.length - 100] ^= 0x10;
    await refuses(frame, /the FLAC file is (truncated or )?corrupt/);
    const streamInfo = Uint8Array.from(goodFlac);
    streamInfo[20] ^= 0x0e;  // the channel count
    await refuses(streamInfo, /the FLAC file's frames are 2 channels at 44100 Hz of 16 bits, its header says \d channels at 44100 Hz of 16 bits/);
    const sync = Uint8Array.from(goodMp3);
    sync[sync.indexOf(0xff)] = 0x7f;
    await refuses(sync, /not an audio file|the MP3 file/);
    await stillDecodes();
  });

  test("too long by the header before decoding, too long while decoding, too many bytes", async () => {
    const second = {rate: 16000, channels: 1, seconds: 1};
    await refuses(wav(second), /the WAV audio is 1\.0 s, over the limit of 0\.5 s/, {maxSeconds: 0.5});
    await refuses(flac(second), /the FLAC audio is 1\.0 s, over the limit of 0\.5 s/, {maxSeconds: 0.5});
    await refuses(mp3(second, ["-b", "64"]), /the MP3 audio is 1\.\d s, over the limit of 0\.5 s/, {maxSeconds: 0.5});
    // with no length in the header (no Info tag), the limit stops the decoding
    await refuses(mp3(second, ["-b", "64", "-t"]), /the MP3 audio is longer than the limit of 0\.5 s/, {maxSeconds: 0.5});
    const unknownLength = flac(second);
    unknownLength[21] &= 0xf0;  // STREAMINFO's 36-bit total sample count, 0: not known
    unknownLength.fill(0, 22, 26);
    await refuses(unknownLength, /the FLAC audio is longer than the limit of 8000 frames/, {maxSeconds: 0.5});
    await refuses(wav(second), /the audio file is 32044 bytes, over the limit of 32000/, {maxBytes: 32000});
    await stillDecodes();
  });

  test("samples that are not finite, and a file of no samples", async () => {
    const nan = wav({rate: 16000, channels: 1, bits: 32, float: true, transform: (data) => { data[0][100] = NaN; }});
    await refuses(nan, /the WAV file's samples are not all finite numbers/);
    const inf = wav({rate: 44100, channels: 2, bits: 64, float: true, transform: (data) => { data[1][7] = Infinity; }});
    await refuses(inf, /the WAV file's samples are not all finite numbers/);
    await refuses(wav({rate: 16000, channels: 1, seconds: 0}), /the WAV file holds no samples/);
    await stillDecodes();
  });

  test("damaged files: decoded to finite samples or refused with an AudioError, never another error or a hang", async () => {
    let seed = 7;
    const random = (n) => ((seed = (seed * 1103515245 + 12345) >>> 0) % n);
    for (const good of [wav({rate: 44100, channels: 2, seconds: 0.2}), goodFlac, goodMp3]) {
      for (let trial = 0; trial < 40; trial++) {
        const bytes = Uint8Array.from(good.subarray(0, trial % 4 === 0 ? random(good.length) : good.length));
        for (let k = 0; k < 1 + random(8); k++) bytes[random(Math.min(bytes.length, trial % 2 ? 64 : bytes.length))] = random(256);
        try {
          const {samples} = await decodeAudio(bytes, {maxSeconds: 5});
          assert.ok(samples.every(Number.isFinite));
        } catch (error) {
          assert.ok(error instanceof AudioError, `trial ${trial}: ${error.stack}`);
        }
      }
    }
    await stillDecodes();
  });
});
