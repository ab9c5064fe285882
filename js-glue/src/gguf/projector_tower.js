// One tower of a projector GGUF (Gemma 4's vision tower, its audio encoder) as the host holds it:
// the engine's lf_<kind>_* object, the copy of the tensors it views when it read the file alone,
// and its encodes, which run one after another. VisionEncoder and AudioEncoder extend it with
// their kind and their inputs.
import { readProjector, towerOf } from './projector_data.js';

export class ProjectorTower {
  /** The engine's object, an lf_vision* or lf_audio* (0 once closed). */
  ptr = 0;
  /** Bytes of the projector's tensors in WASM memory. */
  bytes = 0;
  /** The language model's width: floats per soft token. */
  nEmbdText = 0;
  /** The module the tower lives in. */
  lf;
  #data = 0;  // the tensors' copy this tower frees, when it read the file alone
  #line = Promise.resolve();

  /**
   * The tower of the projector `source` ({name, size, read, readInto, close}, closed before this
   * returns) on `threads` workers of the module's pool; refused by name (the engine's message
   * after the source's name) when the file has no such tower or not one the engine runs.
   * @example const audio = await AudioEncoder.open(lf, await openSource('mmproj.gguf'), { threads: 2 });
   */
  static async open(lf, source, { threads = 1 } = {}) {
    const { ptr, data, bytes } = await readProjector(lf, source, (gguf, at, n) => lf.fn[`lf_${this.kind}_create`](gguf, at, n, threads));
    const tower = new this(lf, ptr, bytes);
    tower.#data = data;
    return tower;
  }

  /**
   * The tower of a projector read once for its towers (gguf/projector_data.js), whose data the
   * caller frees after closing this.
   * @example const vision = VisionEncoder.create(lf, projector, { threads: 2 });
   */
  static create(lf, projector, { threads = 1 } = {}) {
    return new this(lf, towerOf(lf, projector, (gguf, at, n) => lf.fn[`lf_${this.kind}_create`](gguf, at, n, threads)), projector.bytes);
  }

  constructor(lf, ptr, bytes) {
    this.lf = lf;
    Object.assign(this, { ptr, bytes, nEmbdText: lf.fn[`lf_${this.constructor.kind}_n_embd_text`](ptr) });
  }

  /** job() run after the encodes asked for before it: its promise. */
  inTurn(job) {
    const run = this.#line.then(job);
    this.#line = run.catch(() => {});
    return run;
  }

  /** Frees the tower and the tensors it read (waiting, in the engine, for an encode under way). */
  close() {
    if (this.ptr) this.lf.fn[`lf_${this.constructor.kind}_free`](this.ptr);
    if (this.#data) this.lf.free(this.#data);
    this.ptr = 0;
    this.#data = 0;
  }
}
