// Gemma 4's vision tower in the engine (docs/vision.md): a projector GGUF ("mmproj") read from
// its source into WASM memory, and RGB images encoded into the soft-token embeddings the language
// model reads at an image's placeholders, as llama.cpp's mtmd computes them.
import { ProjectorTower } from '../gguf/projector_tower.js';
import { flagSet } from '../wasm/done_flag.js';

const F32 = 4;

export class VisionEncoder extends ProjectorTower {
  static kind = 'vision';

  /**
   * Soft tokens a width × height image gives within a budget of maxTokens (0: the projector's
   * 1120; else 70 to 1120), and the size it is resized to. Throws what the engine refuses.
   * @example vision.tokens(1000, 700, { maxTokens: 280 }) // { tokens: 266, width: 672, height: 480 } (say)
   */
  tokens(width, height, { maxTokens = 0 } = {}) {
    const lf = this.lf;
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
    return this.inTurn(() => this.#encodeNow(rgb, width, height, maxTokens));
  }

  async #encodeNow(rgb, width, height, maxTokens) {
    const lf = this.lf;
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
      await flagSet(lf, flag);
      embd = lf.alloc(tokens * this.nEmbdText * F32);
      const n = lf.fn.lf_vision_encode_result(this.ptr, embd);
      if (n < 0) throw lf.lastError();
      return { tokens: n, embd: new Float32Array(lf.bytes().slice(embd, embd + n * this.nEmbdText * F32).buffer) };
    } finally {
      lf.free(pixels);
      lf.free(flag);
      if (embd) lf.free(embd);
    }
  }
}
