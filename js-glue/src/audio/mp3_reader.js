// An MP3 file's samples as f32, per channel, close to what miniaudio's dr_mp3 gives mtmd-helper.
// Decoded by mpg123 as mpg123-decoder builds it to WASM, fed in pieces so the length limit stops
// a long stream early. dr_mp3 (minimp3) is another decoder: it synthesizes to 16-bit integers
// (its rounding: x + 0.5 truncated, then one less below 0) that miniaudio scales by 1/32768, so
// mpg123's floats are put through the same rounding; what is left between the two is where the
// decoders' arithmetic differs, a step of 1/32768 here and there. Both skip the encoder's delay
// and padding that LAME's Info tag records. The Xing/Info tag also gives the length and the byte
// count before decoding: a file shorter than its tag says is refused as truncated.
import { MPEGDecoder } from 'mpg123-decoder';

const f32 = Math.fround;
const PIECE = 1 << 14;

/**
 * The Xing/Info tag of the first frame, when there is one: { frames, bytes, samplesPerFrame,
 * sampleRate } (frames or bytes null when the tag leaves them out), offset the first frame's.
 * @example const tag = readMp3Tag(bytes); if (tag?.frames) seconds = tag.frames * tag.samplesPerFrame / tag.sampleRate;
 */
export function readMp3Tag(bytes) {
  let at = 0;
  if (bytes[0] === 0x49 && bytes[1] === 0x44 && bytes[2] === 0x33 && bytes.length >= 10) {  // ID3v2, its size in 7-bit bytes
    at = 10 + (bytes[6] << 21 | bytes[7] << 14 | bytes[8] << 7 | bytes[9]) + (bytes[5] & 0x10 ? 10 : 0);
  }
  if (at + 4 > bytes.length || bytes[at] !== 0xff || (bytes[at + 1] & 0xe0) !== 0xe0) return null;
  const version = (bytes[at + 1] >> 3) & 3;  // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
  const layer = (bytes[at + 1] >> 1) & 3;    // 1: layer III
  const rateIndex = (bytes[at + 2] >> 2) & 3;
  if (version === 1 || layer !== 1 || rateIndex === 3) return null;
  const sampleRate = [44100, 48000, 32000][rateIndex] / (version === 3 ? 1 : version === 2 ? 2 : 4);
  const mono = (bytes[at + 3] >> 6) === 3;
  const sideInfo = version === 3 ? (mono ? 17 : 32) : (mono ? 9 : 17);
  const tag = at + 4 + sideInfo + (bytes[at + 1] & 1 ? 0 : 2);  // a CRC after the header when the protection bit is 0
  if (tag + 16 > bytes.length) return null;
  const id = String.fromCharCode(...bytes.subarray(tag, tag + 4));
  if (id !== 'Xing' && id !== 'Info') return null;
  const flags = bytes[tag + 7];
  const word = (k) => (bytes[k] << 24 | bytes[k + 1] << 16 | bytes[k + 2] << 8 | bytes[k + 3]) >>> 0;
  let field = tag + 8;
  const frames = flags & 1 ? word(field) : null;
  if (flags & 1) field += 4;
  const total = flags & 2 ? word(field) : null;
  return { frames, bytes: total, offset: at, samplesPerFrame: version === 3 ? 1152 : 576, sampleRate };
}

/**
 * bytes -> onPiece(channels: Float32Array [piece] per channel, dr_mp3's 16-bit steps,
 * sampleRate) for each piece decoded, in order; resolves to { sampleRate, channels, frames }.
 * Throws fail(message) when mpg123 reports an error, finds no frame, the stream changes its
 * rate or channels, or it is longer than maxSeconds.
 * @example const { sampleRate } = await decodeMp3(bytes, 600, fail, (channels, rate) => mixer.push(channels, rate));
 */
export async function decodeMp3(bytes, maxSeconds, fail, onPiece) {
  const decoder = new MPEGDecoder();
  try {
    await decoder.ready;
    let frames = 0, sampleRate = 0, channels = 0;
    for (let at = 0; at < bytes.length; at += PIECE) {
      const { channelData, samplesDecoded, sampleRate: rate, errors } = decoder.decode(bytes.subarray(at, at + PIECE));
      if (errors.length) throw fail(`the MP3 file is corrupt: ${errors[0].message}`);
      if (samplesDecoded === 0) continue;
      if (sampleRate && (rate !== sampleRate || channelData.length !== channels)) {
        throw fail(`the MP3 stream changes from ${channels} channels at ${sampleRate} Hz to ${channelData.length} at ${rate} Hz`);
      }
      sampleRate = rate;
      channels = channelData.length;
      frames += samplesDecoded;
      if (frames > maxSeconds * sampleRate) throw fail(`the MP3 audio is longer than the limit of ${maxSeconds} s`);
      onPiece(channelData.map(toDrMp3Steps), sampleRate);
    }
    if (frames === 0) throw fail('the MP3 file has no frame that decodes');
    return { sampleRate, channels, frames };
  } finally {
    decoder.free();
  }
}

// mpg123's float (full scale 1) as dr_mp3's 16-bit sample over 32768 (ma_dr_mp3d_scale_pcm,
// then ma_dr_mp3_s16_to_f32).
function toDrMp3Steps(data) {
  const out = new Float32Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const x = f32(data[i] * 32768);
    let s;
    if (x >= 32766.5) s = 32767;
    else if (x <= -32767.5) s = -32768;
    else {
      s = Math.trunc(f32(x + 0.5));
      if (s < 0) s -= 1;
    }
    out[i] = s / 32768;
  }
  return out;
}
