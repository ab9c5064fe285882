// A tensor-parallel group in one process (docs/tensor-parallel.md): S members, each in a module
// of its own with its own memory and threads, serve layers [begin, end) together. A call runs
// phase by phase: at each exchange point every member's piece is copied into every member, and
// then each goes on from the whole vector. The output is a single node's bytes for any S.
import { openModelHeader, reparseModelHeader } from '../gguf/header.js';
import { openSource } from '../sources/open_source.js';
import { LayerfoldError } from '../wasm/capi.js';
import { loadSingleThreadModule, loadThreadedModule, threadsAvailable } from '../wasm/load_node.js';
import { withCStrings } from '../node/wasm_copies.js';

// One member: its module, its slices of the range's tensors and its sessions' caches.
class Member {
  constructor(lf, index) {
    this.lf = lf;
    this.index = index;
    this.ptr = 0;
    this.buffers = [];
    this.sessions = new Map();  // group session id -> lf_session*
  }

  // Reads this member's byte ranges of every tensor it holds, places them end to end and loads.
  async load(source, header, gguf, { layers: [begin, end], nMembers, threads }) {
    const lf = this.lf;
    const { tensors } = lf.json(lf.fn.lf_member_tensors_json(gguf, begin, end, this.index, nMembers));
    const offsets = new Map(header.tensors.map((t) => [t.name, t.offset]));
    this.ptr = lf.fn.lf_member_create();
    for (const t of tensors) {
      const ptr = lf.alloc(t.n_bytes);
      this.buffers.push(ptr);
      let at = ptr;
      for (const [offset, size] of t.ranges) {
        const from = offsets.get(t.name) + offset;
        await source.readInto(from, from + size, lf.bytes().subarray(at, at + size));
        at += size;
      }
      withCStrings(lf, [t.name], ([name]) => lf.fn.lf_member_place_tensor(this.ptr, name, ptr));
    }
    if (!lf.fn.lf_member_load(this.ptr, gguf, begin, end, this.index, nMembers, threads)) throw lf.lastError();
    return tensors.reduce((sum, t) => sum + t.n_bytes, 0);
  }

  session(id, maxContext) {
    let s = this.sessions.get(id);
    if (!s) {
      s = this.lf.fn.lf_member_session_create(this.ptr, maxContext);
      if (!s) throw this.lf.lastError();
      this.sessions.set(id, s);
    }
    return s;
  }

  floats(ptr, n) {
    return new Float32Array(this.lf.bytes().slice(ptr, ptr + 4 * n).buffer);
  }

  // Copies floats into this member's memory for the time of fn(ptr).
  withFloats(floats, fn) {
    const ptr = this.lf.alloc(Math.max(4, floats.byteLength));
    try {
      this.lf.bytes().set(new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength), ptr);
      return fn(ptr);
    } finally {
      this.lf.free(ptr);
    }
  }

  close() {
    for (const s of this.sessions.values()) this.lf.fn.lf_session_free(s);
    this.sessions.clear();
    if (this.ptr) this.lf.fn.lf_member_free(this.ptr);
    for (const ptr of this.buffers) this.lf.free(ptr);
    this.buffers = [];
    this.ptr = 0;
    this.lf.close();
  }
}

export class MemberGroup {
  #members;
  #nEmbd;
  #maxContext;

  constructor(members, { nEmbd, layers, maxContext, weightBytes }) {
    this.#members = members;
    this.#nEmbd = nEmbd;
    this.#maxContext = maxContext;
    this.layers = layers;
    this.weightBytes = weightBytes;
  }

  /**
   * Opens `members` members of layers [begin, end) of `model` (a path or URL, as LayerNode's),
   * each in a module of its own: 'threaded' with `threads` engine threads, or 'single'. A split
   * the engine refuses (a shared-KV layer whose source layer is outside the range, a member count
   * beyond what the range splits into) is refused by name before any weight is read.
   * @param {{model: string, layers: [number, number], members: number, build?: 'threaded'|'single',
   *          threads?: number, maxContext?: number, cacheDir?: string}} options
   * @example const group = await MemberGroup.open({ model: 'tiny.gguf', layers: [0, 2], members: 2 });
   */
  static async open({ model, layers, members: nMembers, build, threads = 1, maxContext = 4096, cacheDir }) {
    if (!(Number.isSafeInteger(nMembers) && nMembers >= 1)) {
      throw new LayerfoldError('invalid_argument', `members must be a whole number >= 1, not ${nMembers}`);
    }
    if (!(Number.isSafeInteger(maxContext) && maxContext >= 1)) {
      throw new LayerfoldError('invalid_argument', `maxContext must be a whole number >= 1, not ${maxContext}`);
    }
    const threaded = build ? build === 'threaded' : threadsAvailable();
    const source = await openSource(model, { cacheDir });
    const members = [];
    try {
      let header = null;
      const weightBytes = [];
      for (let i = 0; i < nMembers; ++i) {
        const lf = threaded ? await loadThreadedModule({ threads }) : await loadSingleThreadModule();
        const member = new Member(lf, i);
        members.push(member);
        const opened = header ? { gguf: reparseModelHeader(lf, header), header } : await openModelHeader(lf, source);
        header = opened.header;
        try {
          weightBytes.push(await member.load(source, header, opened.gguf, { layers, nMembers, threads: threaded ? threads : 1 }));
        } finally {
          lf.fn.lf_gguf_free(opened.gguf);
        }
      }
      return new MemberGroup(members, { nEmbd: header.info.n_embd, layers, maxContext, weightBytes });
    } catch (error) {
      for (const m of members) m.close();
      throw error;
    } finally {
      await source.close();
    }
  }

  /**
   * hidden [n, n_embd] at positions startPos.. of session `id` (made on first use) -> hidden
   * [n, n_embd], the bytes one node of these layers gives. perLayer: a model with per-layer
   * embeddings needs the range's layers' inputs, [layers, n, nEmbdPerLayer], as LayerNode.forward
   * takes them. A refused or failed call leaves the session as it was on every member.
   * @example const out = group.forward({ session: 'a', startPos: 0, hidden });
   */
  forward({ session: id, startPos, hidden, perLayer = null }) {
    const n = hidden.length / this.#nEmbd;
    if (!(hidden instanceof Float32Array) || !Number.isInteger(n) || n < 1) {
      throw new RangeError(`hidden must be a Float32Array of a positive multiple of n_embd ${this.#nEmbd} floats`);
    }
    const members = this.#members;
    const calls = [];
    try {
      for (const m of members) {
        const session = m.session(id, this.#maxContext);
        const values = perLayer ?? new Float32Array(0);
        if (!m.withFloats(values, (ptr) => m.lf.fn.lf_session_set_per_layer_inputs(session, ptr, values.length))) throw m.lf.lastError();
        const call = m.withFloats(hidden, (ptr) => m.lf.fn.lf_member_begin(m.ptr, session, startPos, ptr, n));
        if (!call) throw m.lf.lastError();
        calls.push(call);
      }
      while (members[0].lf.fn.lf_member_call_layer(calls[0]) !== -1) {
        const pieces = members.map((m, i) => m.floats(m.lf.fn.lf_member_piece(calls[i]), m.lf.fn.lf_member_piece_floats(calls[i], i)));
        members.forEach((m, i) => {
          pieces.forEach((piece, j) => {
            if (!m.withFloats(piece, (ptr) => m.lf.fn.lf_member_put_piece(calls[i], j, ptr, piece.length))) throw m.lf.lastError();
          });
        });
        members.forEach((m, i) => {
          if (!m.lf.fn.lf_member_step(calls[i])) throw m.lf.lastError();
        });
      }
      const m = members[0];
      return m.floats(m.lf.fn.lf_member_output(calls[0]), hidden.length);
    } finally {
      calls.forEach((call, i) => members[i].lf.fn.lf_member_call_free(call));
    }
  }

  /** The positions session `id` holds (0 for one never used). */
  sessionLength(id) {
    const s = this.#members[0].sessions.get(id);
    return s ? this.#members[0].lf.fn.lf_session_n_past(s) : 0;
  }

  /** Frees session `id` on every member. */
  dropSession(id) {
    for (const m of this.#members) {
      const s = m.sessions.get(id);
      if (s) m.lf.fn.lf_session_free(s);
      m.sessions.delete(id);
    }
  }

  close() {
    for (const m of this.#members) m.close();
    this.#members = [];
  }
}
