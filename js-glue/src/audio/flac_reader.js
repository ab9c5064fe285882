// A FLAC file's samples as f32, per channel, as miniaudio's dr_flac gives them to mtmd-helper
// (ma_dr_flac_read_pcm_frames_f32: the integer sample shifted to 32 bits, over 2^31, so x / 2^(b−1)).
// Decoded by libFLAC as @wasm-audio-decoders/flac builds it to WASM (a frame that fails its CRC is
// an error or is dropped, and then the count falls short of STREAMINFO's), fed in pieces so a
// stream that decodes to far more than its bytes is stopped at the length limit. That decoder
// scales by 2^(b−1) − 1; its integers are taken back (exact to 24 bits: an f32 of x / (2^(b−1) − 1)
// times 2^(b−1) − 1 is within half of x) and scaled as dr_flac scales them. STREAMINFO is read
// here first for the checks made before anything is decoded.
import { FLACDecoder } from '@wasm-audio-decoders/flac';

// A frame of a few bytes can hold 65535 samples a channel: pieces this small keep what one call
// decodes to some megabytes whatever the stream.
const PIECE = 1024;

let compiledModule = null;  // the decoder's WASM as the host compiled it, if it did

/**
 * Has FLAC decoded by `module` (the decoder's WASM compiled by the host) rather than by the WASM
 * the package compiles at run time, which workerd forbids.
 * @example useFlacModule(flacWasmModule);
 */
export function useFlacModule(module) {
  compiledModule = module;
}

/**
 * STREAMINFO of a FLAC file: { channels, sampleRate, bitsPerSample, frames } (frames 0: the
 * encoder did not say); throws fail(message) when the header is not there whole.
 * @example const { sampleRate, frames } = readFlacHeader(bytes, (m) => new Error(m));
 */
export function readFlacHeader(bytes, fail) {
  if (bytes.length < 42 || (bytes[4] & 0x7f) !== 0) throw fail('the FLAC file has no STREAMINFO block (truncated?)');
  const length = bytes[5] << 16 | bytes[6] << 8 | bytes[7];
  if (length !== 34) throw fail(`the FLAC file's STREAMINFO block is ${length} bytes, not 34`);
  const b = bytes.subarray(8);
  return {
    sampleRate: b[10] << 12 | b[11] << 4 | b[12] >> 4,
    channels: ((b[12] >> 1) & 7) + 1,
    bitsPerSample: ((b[12] & 1) << 4 | b[13] >> 4) + 1,
    frames: (b[13] & 0xf) * 2 ** 32 + ((b[14] << 24 | b[15] << 16 | b[16] << 8 | b[17]) >>> 0),
  };
}

/**
 * bytes, header (readFlacHeader's) -> onPiece(channels: Float32Array [piece] per channel,
 * dr_flac's f32) for each piece decoded, in order; resolves to the number of frames. Throws
 * fail(message) on a decoding error, a stream that disagrees with its header, or one longer
 * than maxFrames.
 * @example const frames = await decodeFlac(bytes, header, 16000 * 600, fail, (channels) => mixer.push(channels));
 */
export async function decodeFlac(bytes, header, maxFrames, fail, onPiece) {
  const decoder = newDecoder();
  try {
    await decoder.ready;
    let frames = 0;
    const take = ({ channelData, samplesDecoded, sampleRate, bitDepth, errors }) => {
      if (errors.length) throw fail(`the FLAC file is corrupt: ${errors[0].message ?? errors[0].error}`);
      if (samplesDecoded === 0) return;
      if (channelData.length !== header.channels || sampleRate !== header.sampleRate || bitDepth !== header.bitsPerSample) {
        throw fail(`the FLAC file's frames are ${channelData.length} channels at ${sampleRate} Hz of ${bitDepth} bits, its header says ${header.channels} channels at ${header.sampleRate} Hz of ${header.bitsPerSample} bits`);
      }
      frames += samplesDecoded;
      if (frames > maxFrames) throw fail(`the FLAC audio is longer than the limit of ${maxFrames} frames`);
      onPiece(channelData.map((data) => rescale(data, bitDepth)));
    };
    for (let at = 0; at < bytes.length; at += PIECE) take(await decoder.decode(bytes.subarray(at, at + PIECE)));
    take(await decoder.flush());
    if (header.frames !== 0 && frames !== header.frames) {
      throw fail(`the FLAC file is truncated or corrupt: its header says ${header.frames} frames, ${frames} decoded`);
    }
    return frames;
  } finally {
    decoder.free();
  }
}

// @wasm-audio-decoders/flac takes a compiled module only as a static of its inner decoder class,
// which it does not export (mpg123-decoder takes it on the class it exports): the class is
// reached through a first instance's _decoder (the package is pinned to the version this was
// read from), and that instance, already compiling the package's own WASM, is dropped.
function newDecoder() {
  const decoder = new FLACDecoder();
  const inner = decoder._decoder.constructor;
  if (!compiledModule || inner.module === compiledModule) return decoder;
  inner.module = compiledModule;
  return new FLACDecoder();
}

// The decoder's x / (2^(b−1) − 1) as dr_flac's x / 2^(b−1).
function rescale(data, bits) {
  const max = 2 ** (bits - 1) - 1, full = 2 ** (bits - 1);
  const out = new Float32Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = Math.round(data[i] * max) / full;
  return out;
}
