// Gemma 4's audio encoder in the engine (docs/audio.md; E2B and E4B): the audio tower of a
// projector GGUF ("mmproj") read from its source into WASM memory, and 16 kHz clips encoded into
// the soft-token embeddings the language model reads at a clip's placeholders, as llama.cpp's mtmd
// computes them: one run of tokens per 30 s chunk.
import { ProjectorTower } from '../gguf/projector_tower.js';
import { flagSet } from '../wasm/done_flag.js';
import { AUDIO_SAMPLE_RATE } from './decode_audio.js';

const F32 = 4;
const I32 = 4;
const CHUNK_SAMPLES = 30 * AUDIO_SAMPLE_RATE;

export class AudioEncoder extends ProjectorTower {
  static kind = 'audio';

  /**
   * The soft tokens of each 30 s chunk of a clip of nSamples samples (16 kHz). Throws what the
   * engine refuses (no samples, a last piece too short for one frame).
   * @example audio.tokens(31 * 16000) // [750, 25]
   */
  tokens(nSamples) {
    const lf = this.lf;
    const max = Math.ceil(nSamples / CHUNK_SAMPLES) + 1;
    const out = lf.alloc(max * I32);
    try {
      const chunks = lf.fn.lf_audio_tokens(this.ptr, nSamples, out, max);
      if (chunks < 0) throw lf.lastError();
      return Array.from(new Int32Array(lf.bytes().slice(out, out + chunks * I32).buffer));
    } finally {
      lf.free(out);
    }
  }

  /**
   * samples (Float32Array, 16 kHz mono) -> a Promise of { tokens, chunks (each chunk's tokens),
   * embd: Float32Array [tokens · nEmbdText] }. Runs on the encoder's workers while the event loop
   * goes on (in the single-thread module, before the promise is made); clips asked for at once
   * are encoded one after another. Rejects with what the engine refuses.
   * @example const { tokens, embd } = await audio.encode(samples);
   */
  encode(samples) {
    return this.inTurn(() => this.#encodeNow(samples));
  }

  async #encodeNow(samples) {
    const lf = this.lf;
    if (!this.ptr) throw new Error('the audio encoder is closed');
    if (!(samples instanceof Float32Array)) throw new TypeError('a clip is a Float32Array of 16 kHz samples');
    const chunks = this.tokens(samples.length);
    const tokens = chunks.reduce((a, b) => a + b, 0);
    const clip = lf.alloc(Math.max(samples.length * F32, 4));
    const flag = lf.alloc(4);
    const counts = lf.alloc(chunks.length * I32);
    let embd = 0;
    try {
      lf.bytes().set(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength), clip);
      if (lf.fn.lf_audio_encode_async(this.ptr, clip, samples.length, flag) < 0) throw lf.lastError();
      await flagSet(lf, flag);
      embd = lf.alloc(Math.max(tokens * this.nEmbdText * F32, 4));
      const n = lf.fn.lf_audio_encode_result(this.ptr, embd, counts, chunks.length);
      if (n < 0) throw lf.lastError();
      return {
        tokens: n,
        chunks: Array.from(new Int32Array(lf.bytes().slice(counts, counts + chunks.length * I32).buffer)),
        embd: new Float32Array(lf.bytes().slice(embd, embd + n * this.nEmbdText * F32).buffer),
      };
    } finally {
      lf.free(clip);
      lf.free(flag);
      lf.free(counts);
      if (embd) lf.free(embd);
    }
  }
}
