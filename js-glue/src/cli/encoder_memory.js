// What a projector's towers hold in WASM memory, counted from the file's header as the engine
// sizes them: the tensors' copy (gguf/projector_data.js reads the data section whole) and the
// copies the engine makes of some (the audio subsampling kernels in F16, the depthwise kernels by
// tap: src/audio/audio_weights.cpp), then one encode's buffers at their largest: an image at the
// top budget (src/vision/vision_tower.cpp, ImageEncoding::State) and a 30 s chunk of audio
// (src/audio/audio_encoder.cpp, AudioEncoding::State::prepare), each with the input and the rows
// the host copies in and out. The towers encode one item at a time; each has its own buffers, so
// both count. For `plan --mmproj` (docs/deployment.md, "3. Sizing a node").
import { audioConfig, IMAGE_MAX_TOKENS, visionConfig } from '../gguf/projector_config.js';

const F32 = 4;
const F16 = 2;
// A 30 s chunk: src/audio/log_mel.cpp and audio_config.h (llama.cpp's gemma4a numbers).
const CHUNK_SAMPLES = 30 * 16000;
const HOP = 160;
const N_FFT = 512;
const FRAME_LEN = 320;
const CONV_SLAB = 4096;   // the subsampling's convolution outputs per GEMM (audio_encoder.cpp kConvSlab)
const MAX_PAST = 12;      // the attention's reach back (audio_config.h max_past)
const DW_TAPS = 5;

// One image's buffers at IMAGE_MAX_TOKENS: the patch grid of that many soft tokens, or of the
// most the position tables allow (a test tower's).
function visionBuffers(v, workers) {
  const tokens = Math.min(IMAGE_MAX_TOKENS, Math.floor(v.posSize / v.nMerge) ** 2);
  const n = tokens * v.nMerge * v.nMerge;
  const patchDim = 3 * v.patchSize * v.patchSize;
  const qd = v.nHead * v.headDim;
  const widest = Math.max(v.nEmbd, patchDim, qd, v.nFf);
  const floats = n * v.nEmbd + n * Math.max(v.nEmbd, patchDim) + 4 * n * qd + 2 * n * v.nFf + n * Math.max(v.nEmbd, v.nEmbdText)
    + n * widest + workers * widest  // the linears' activations and each worker's row
    + n * patchDim                    // the normalized pixels (VisionInput)
    + 2 * tokens * v.nEmbdText;  // the rows collected, and the host's copy
  // K and V in f16; the resized RGB canvas, and the host's copy of an image of that size, a byte a value.
  return floats * F32 + 2 * n * qd * F16 + 2 * n * patchDim;
}

// One 30 s chunk's buffers.
function audioBuffers(a, workers) {
  const frames = Math.trunc((CHUNK_SAMPLES + FRAME_LEN / 2 - (FRAME_LEN + 1)) / HOP) + 1;
  const t1 = Math.floor((frames - 1) / 2) + 1;
  const f1 = Math.floor((a.nMel - 1) / 2) + 1;
  const n = Math.floor((t1 - 1) / 2) + 1;
  const melSub = Math.floor((f1 - 1) / 2) + 1;
  const sub = melSub * a.convChannels[1];
  const [e, c0] = [a.nEmbd, a.convChannels[0]];
  const wide = Math.max(a.nFf, 2 * e, a.nEmbdOut);
  const widest = Math.max(9 * c0, sub, wide);
  const floats = 2 * CHUNK_SAMPLES + ((frames - 1) * HOP + N_FFT)  // the clip (the host's copy, the encoder's) and the padded chunk
    + a.nMel * frames + t1 * f1 * c0 + n * sub + CONV_SLAB * 9 * c0 + 7 * n * e + n * wide + 2 * (MAX_PAST + 1) * e
    + 3 * n * a.nEmbdText  // the chunk's rows, the result's and the host's copies
    + Math.max(CONV_SLAB * 9 * c0, n * sub, n * wide, n * e) + workers * widest;
  return floats * F32;
}

/**
 * A projector's header (openGgufHeader's) -> {weights, vision, audio, total} in bytes: the
 * tensors as the towers hold them, one image's buffers at the top budget, one 30 s chunk's (0
 * without an audio encoder), all of it; `workers` the threads of each tower.
 * @example encoderBytes(header) // { weights: 330e6, vision: 190e6, audio: 0, total: 520e6 } (say)
 */
export function encoderBytes(header, { workers = 1 } = {}) {
  const v = visionConfig(header);
  if (!v) throw new Error('the projector has no vision tower: not a Gemma 4 projector');
  const a = audioConfig(header);
  const copies = a ? 9 * (a.convChannels[0] + a.convChannels[0] * a.convChannels[1]) * F16 + a.nLayer * DW_TAPS * a.nEmbd * F32 : 0;
  const weights = header.file_size - header.data_offset + copies;
  const vision = visionBuffers(v, workers);
  const audio = a ? audioBuffers(a, workers) : 0;
  return { weights, vision, audio, total: weights + vision + audio };
}
