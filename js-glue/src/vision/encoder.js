// Gemma 4's vision tower in the engine (docs/vision.md): a projector GGUF ("mmproj") read from
// its source into WASM memory, and RGB images encoded into the soft-token embeddings the language
// model reads at an image's placeholders, as llama.cpp's mtmd computes them.
import { readProjector, towerOf } from '../gguf/projector_data.js';
import { flagSet } from '../wasm/done_flag.js';

const F32 = 4;

export class VisionEncoder {
  /** The lf_vision* (0 once closed). */
  ptr = 0;
  /** Bytes of the projector's tensors in WASM memory. */
  bytes = 0;
  /** The language model's width: floats per soft token. */
  nEmbdText = 0;
  #lf;
  #data = 0;
  #line = Promise.resolve();  // the encodes asked for, in turn
  #encoding = null;           // the flag of the one under way

  /**
   * The projector of `source` ({name, size, read, readInto, close}, closed before this returns)
   * on `threads` workers of the module's pool; refused by name (the engine's message after the
   * source's name) when it is not a projector the engine runs.
   * @example const vision = await VisionEncoder.open(lf, await openSource('mmproj.gguf'), { threads: 2 });
   */
  static async open(lf, source, { threads = 1 } = {}) {
    const { ptr, data, bytes } = await readProjector(lf, source, (gguf, at, n) => lf.fn.lf_vision_create(gguf, at, n, threads));
    const encoder = new VisionEncoder(lf, ptr, bytes);
    encoder.#data = data;
    return encoder;
  }

  /**
   * The vision tower of a projector read once for its towers (gguf/projector_data.js), whose data
   * the caller frees after closing this.
   * @example const vision = VisionEncoder.create(lf, projector, { threads: 2 });
   */
  static create(lf, projector, { threads = 1 } = {}) {
    return new VisionEncoder(lf, towerOf(lf, projector, (gguf, at, n) => lf.fn.lf_vision_create(gguf, at, n, threads)), projector.bytes);
  }

  constructor(lf, ptr, bytes) {
    this.#lf = lf;
    Object.assign(this, { ptr, bytes, nEmbdText: lf.fn.lf_vision_n_embd_text(ptr) });
  }

  /**
   * Soft tokens a width × height image gives within a budget of maxTokens (0: the projector's
   * 1120; else 70 to 1120), and the size it is resized to. Throws what the engine refuses.
   * @example vision.tokens(1000, 700, { maxTokens: 280 }) // { tokens: 266, width: 672, height: 480 } (say)
   */
  tokens(width, height, { maxTokens = 0 } = {}) {
    const lf = this.#lf;
    const out = lf.alloc(8);
    try {
      const tokens = lf.fn.lf_vision_tokens(this.ptr, width, height, maxTokens, out, out + 4);
      if (tokens < 0) throw lf.lastError();
      const [w, h] = new Int32Array(lf.bytes().slice(out, out + 8).buffer);
      return { tokens, width: w, height: h };
    } finally {
      lf.free(out);
    }
  }

  /**
   * rgb [height · width · 3] (8 bits a channel, rows top down) -> a Promise of { tokens, embd:
   * Float32Array [tokens · nEmbdText] }. Runs on the encoder's workers while the event loop goes
   * on (in the single-thread module, before the promise is made); images asked for at once are
   * encoded one after another. Rejects with what the engine refuses.
   * @example const { tokens, embd } = await vision.encode(rgb, 640, 480, { maxTokens: 280 });
   */
  encode(rgb, width, height, { maxTokens = 0 } = {}) {
    const job = this.#line.then(() => this.#encodeNow(rgb, width, height, maxTokens));
    this.#line = job.catch(() => {});
    return job;
  }

  async #encodeNow(rgb, width, height, maxTokens) {
    const lf = this.#lf;
    if (!this.ptr) throw new Error('the vision encoder is closed');
    if (rgb.length !== width * height * 3) {
      throw new RangeError(`an image of ${width} x ${height} has ${width * height * 3} RGB bytes, not ${rgb.length}`);
    }
    const { tokens } = this.tokens(width, height, { maxTokens });
    const pixels = lf.alloc(Math.max(rgb.length, 4));
    const flag = lf.alloc(4);
    let embd = 0;
    try {
      lf.bytes().set(rgb, pixels);
      if (lf.fn.lf_vision_encode_async(this.ptr, pixels, width, height, maxTokens, flag) < 0) throw lf.lastError();
      this.#encoding = flagSet(lf, flag);
      await this.#encoding;
      embd = lf.alloc(tokens * this.nEmbdText * F32);
      const n = lf.fn.lf_vision_encode_result(this.ptr, embd);
      if (n < 0) throw lf.lastError();
      return { tokens: n, embd: new Float32Array(lf.bytes().slice(embd, embd + n * this.nEmbdText * F32).buffer) };
    } finally {
      this.#encoding = null;
      lf.free(pixels);
      lf.free(flag);
      if (embd) lf.free(embd);
    }
  }

  /** Frees the encoder and its tensors (waiting, in the engine, for an encode under way). */
  close() {
    if (this.ptr) this.#lf.fn.lf_vision_free(this.ptr);
    if (this.#data) this.#lf.free(this.#data);
    this.ptr = 0;
    this.#data = 0;
  }
}
