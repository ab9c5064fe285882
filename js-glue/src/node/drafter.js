// A tail node's MTP drafter (Gemma 4's gemma4-assistant; docs/gateway.md, "Speculative decoding
// by MTP"): its tensors read from its own source into the node's WASM memory and loaded beside
// the node's model, which the engine checks it against (a drafter of another target, or one
// reading a layer's cache the node does not hold, is refused by name), then greedy drafts after
// a verified step. The drafts assume the step's own greedy outcome: its drafted rows kept while
// each is its row's argmax, then the argmax after them (greedyContinuation); a sampler that
// chose otherwise finds them of no use and decodes without them. A session whose drafter state
// turned non-finite drafts no more (it is forgotten with the session).
import { openGgufHeader } from '../gguf/header.js';
import { cString } from '../wasm/wasm_copies.js';

const F32 = 4;
const I32 = 4;
// Sessions remembered as stopped, so the set stays bounded however many come and go.
const STOPPED_REMEMBERED = 1024;

/**
 * Where a step of `tokens` (its rows' input tokens, the first one sampled, the rest drafted) ends
 * if each row's argmax is what is sampled: `after`, the drafted tokens kept (each the argmax of
 * the row before it), and `token`, the argmax of row `after`. logits: [tokens.length, nVocab].
 * The lowest id among equal logits, as the engine's drafter picks.
 * @example greedyContinuation([5, 9, 4], logits, nVocab) // { after: 1, token: 7 }: row 0's argmax is 9, row 1's is 7, not 4
 */
export function greedyContinuation(tokens, logits, nVocab) {
  const argmax = (r) => {
    let best = r * nVocab;
    for (let i = best + 1; i < (r + 1) * nVocab; i++) if (logits[i] > logits[best]) best = i;
    return best - r * nVocab;
  };
  let after = 0;
  let token = argmax(0);
  while (after + 1 < tokens.length && token === tokens[after + 1]) {
    after++;
    token = argmax(after);
  }
  return { after, token };
}

/**
 * What a drafter of GGUF header `header` adds to the node of its target (nVocab tokens, width
 * nEmbd): `tensors`, its tensors' bytes as the header lists them, and `buffers`, a draft's (its
 * logits and hidden states).
 * @example drafterBytes(header, { nVocab: 262144, nEmbd: 1536 }).buffers // 1067008
 */
export function drafterBytes(header, { nVocab, nEmbd }) {
  return { tensors: header.tensors.reduce((sum, t) => sum + t.n_bytes, 0), buffers: F32 * (nVocab + 3 * nEmbd) };
}

export class NodeDrafter {
  /** The lf_drafter* (0 before load() and once closed). */
  ptr = 0;
  /** Bytes of the drafter's tensors, in WASM memory beside the node's (once loaded). */
  bytes = 0;
  #lf;
  #source;
  #gguf;
  #header;
  #buffers = [];
  #stopped = new Map();  // session id -> why its drafts stopped, oldest first
  #stats = { drafts: 0, ids: 0, stopped: 0 };

  /**
   * The drafter of `source` ({name, size, read, readInto, close}, handed over) with its header
   * read, before anything is placed: needs() tells its bytes for the node's budget, load()
   * places and loads it, close() gives up (the source closed either way). name: what errors and
   * info() call it (default source.name).
   * @example const drafter = await NodeDrafter.open(lf, await openSource('tiny-drafter.gguf'));
   */
  static async open(lf, source, name = source.name) {
    try {
      const { gguf, header } = await openGgufHeader(lf, source);
      return new NodeDrafter(lf, source, gguf, header, name);
    } catch (error) {
      await source.close();
      error.message = `draft model ${name}: ${error.message}`;
      throw error;
    }
  }

  constructor(lf, source, gguf, header, name) {
    this.#lf = lf;
    this.#source = source;
    this.#gguf = gguf;
    this.#header = header;
    this.name = name;
  }

  /**
   * The bytes the drafter adds to its node (drafterBytes), for a target of nVocab tokens and width nEmbd.
   */
  needs(target) {
    const { tensors, buffers } = drafterBytes(this.#header, target);
    return tensors + buffers;
  }

  /**
   * Places the drafter's tensors and loads it beside `model` (the node's loaded EngineModel,
   * holding its target's head) on `threads` workers of its own; refused by name (the engine's
   * message, after the draft model's name).
   */
  async load(model, { threads }) {
    const lf = this.#lf;
    try {
      this.ptr = lf.fn.lf_drafter_create();
      if (!lf.fn.lf_drafter_set_threads(this.ptr, threads)) throw lf.lastError();
      for (const info of this.#header.tensors) await this.#place(this.#source, info);
      if (!lf.fn.lf_drafter_load(this.ptr, this.#gguf, model.ptr)) throw lf.lastError();
    } catch (error) {
      error.message = `draft model ${this.name}: ${error.message}`;
      throw error;
    } finally {
      await this.#release();
    }
  }

  async #release() {
    if (this.#gguf) this.#lf.fn.lf_gguf_free(this.#gguf);
    this.#gguf = 0;
    await this.#source?.close();
    this.#source = null;
  }

  async #place(source, info) {
    const lf = this.#lf;
    const ptr = lf.alloc(info.n_bytes);
    this.#buffers.push(ptr);
    await source.readInto(info.offset, info.offset + info.n_bytes, lf.bytes().subarray(ptr, ptr + info.n_bytes));
    this.bytes += info.n_bytes;
    const name = cString(lf, info.name);
    lf.fn.lf_drafter_place_tensor(this.ptr, name, ptr);
    lf.free(name);
  }

  /**
   * k greedy drafts for session `id` (its lf_session* `handle`) at position pos: token, the token
   * there, and hidden [n_embd], the node's forward output at pos - 1 (before the output norm).
   * -> the drafted ids, [] once the session's drafts stopped (stoppedWhy says why): an engine
   * refusal (a non-finite state) stops them.
   */
  draft(id, handle, { pos, token, hidden, k }) {
    if (this.#stopped.has(id) || k === 0) return [];
    const lf = this.#lf;
    const hiddenPtr = lf.alloc(hidden.byteLength);
    const idsPtr = lf.alloc(k * I32);
    try {
      lf.bytes().set(new Uint8Array(hidden.buffer, hidden.byteOffset, hidden.byteLength), hiddenPtr);
      if (!lf.fn.lf_drafter_draft(this.ptr, handle, pos, token, hiddenPtr, k, idsPtr)) {
        this.#stop(id, lf.lastError().message);
        return [];
      }
      const ids = Array.from(new Int32Array(lf.bytes().slice(idsPtr, idsPtr + k * I32).buffer));
      this.#stats.drafts++;
      this.#stats.ids += k;
      return ids;
    } finally {
      lf.free(hiddenPtr);
      lf.free(idsPtr);
    }
  }

  #stop(id, why) {
    this.#stopped.set(id, why);
    this.#stats.stopped++;
    if (this.#stopped.size > STOPPED_REMEMBERED) this.#stopped.delete(this.#stopped.keys().next().value);
  }

  /** Why the session's drafts stopped, or null while it drafts. */
  stoppedWhy(id) {
    return this.#stopped.get(id) ?? null;
  }

  /** The session is gone: a new one of the same id drafts again. */
  forget(id) {
    this.#stopped.delete(id);
  }

  /** { drafts, ids, stopped, stoppedSessions }: drafts made, ids drafted, sessions stopped (and still remembered). */
  stats() {
    return { ...this.#stats, stoppedSessions: this.#stopped.size };
  }

  /** Frees the drafter (its source too, if it never loaded). */
  close() {
    this.#release().catch(() => {});
    if (this.ptr) this.#lf.fn.lf_drafter_free(this.ptr);
    for (const ptr of this.#buffers) this.#lf.free(ptr);
    this.#buffers = [];
    this.ptr = 0;
  }
}
