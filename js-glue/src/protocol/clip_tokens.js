// The soft tokens of an audio clip of a given length, counted as the engine counts them
// (src/audio/log_mel.cpp LogMel::chunks, AudioConfig::frames and ::tokens; lf_audio_tokens): for
// a host that sends its clips to an encoder node and must know their tokens before the answer
// comes. The numbers are llama.cpp's for gemma4a, fixed whatever the file says (docs/audio.md,
// "Keys").
/** The rate the encoder takes, in Hz (audio/decode_audio.js's AUDIO_SAMPLE_RATE). */
export const CLIP_SAMPLE_RATE = 16000;
const CHUNK_SAMPLES = 30 * CLIP_SAMPLE_RATE;
const FRAME_LEN = 320;
const HOP = 160;

// Mel frames of a piece of n samples: C's truncating division, as mtmd's.
const frames = (n) => Math.trunc((n + FRAME_LEN / 2 - (FRAME_LEN + 1)) / HOP) + 1;
// Soft tokens of f frames: halved twice by the strided convolutions.
const tokensOf = (f) => Math.floor((Math.floor((f - 1) / 2) + 1 - 1) / 2) + 1;

/**
 * The soft tokens of each 30 s chunk of a clip of nSamples samples at 16 kHz; a RangeError with
 * the engine's words for what it refuses (no samples, a piece too short for one frame).
 * @example clipTokens(31 * 16000) // [750, 25]
 */
export function clipTokens(nSamples) {
  if (!(Number.isInteger(nSamples) && nSamples >= 1 && nSamples <= 1e9)) {
    throw new RangeError('a clip\'s sample count must be a whole number from 1 to 1e9');
  }
  const chunks = [];
  for (let at = 0; at < nSamples; at += CHUNK_SAMPLES) {
    const n = Math.min(CHUNK_SAMPLES, nSamples - at);
    if (frames(n) < 1) {
      throw new RangeError(`the audio clip's ${at === 0 ? '' : 'last 30 s piece, '}${n} samples, is too short for one 20 ms frame (llama.cpp refuses it too)`);
    }
    chunks.push(tokensOf(frames(n)));
  }
  return chunks;
}
