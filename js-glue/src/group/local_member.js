// One member of a tensor-parallel group in a WASM module of this process or isolate: its slices
// of the range's tensors (the byte ranges lf_member_tensors_json lists, read from the source and
// placed end to end), its sessions' caches of its KV heads, and at most one call at a time,
// driven phase by phase (docs/tensor-parallel.md).
import { openModelHeader, reparseModelHeader } from '../gguf/header.js';
import { LayerfoldError } from '../wasm/capi.js';
import { checkMemoryBudget, memberMemoryNeeds } from '../node/memory_budget.js';
import { withBuffers } from '../node/engine_forward.js';
import { flagSet } from '../wasm/done_flag.js';
import { readKvRows, setKvRows } from '../node/session_inputs.js';
import { checkpointSession, truncateSession } from '../node/sessions.js';
import { withCopies, withCStrings } from '../wasm/wasm_copies.js';
import { kvLayoutOf } from './kv_heads.js';

export class LocalMember {
  #lf;
  #ptr = 0;
  #buffers = [];
  #sessions = new Map();  // session id -> lf_session*
  #call = 0;              // the lf_member_call* under way
  #callSession = 0;       // its session's lf_session*
  #rows = 0;              // its rows
  #running = false;       // a phase of it is on the module's threads
  #abandonWhenEnded = false;
  #maxContext;

  constructor(lf, { index, members, layers, info, maxContext, weightBytes, cacheTypeK, cacheTypeV }) {
    this.#lf = lf;
    this.index = index;
    this.members = members;
    this.layers = layers;
    this.vocab = null;  // [begin, end): the rows of the vocabulary it holds, when it holds an end
    this.cacheTypeK = cacheTypeK;
    this.cacheTypeV = cacheTypeV;
    this.nEmbd = info.n_embd;
    this.nLayer = info.n_layer;
    this.nVocab = info.n_vocab;
    this.weightBytes = weightBytes;
    this.#maxContext = maxContext;
    this.maxTokens = Infinity;  // rows of a call its memory budget was counted for
  }

  /**
   * Member `index` of `members` serving layers [begin, end) of the model in `source`, in module
   * `lf` (wasm/capi.js bound, its own: freed with the member or on failure) with `threads` engine
   * threads (group/open_local_member.js loads one in Node; an edge isolate binds its own). header:
   * the model's, when read before (a group's first member reads it). A split the engine refuses
   * is refused by name before any weight is read. With memoryBudgetBytes the member is counted
   * first (node/memory_budget.js memberMemoryNeeds: a session at maxContext, calls of maxTokens
   * rows) and refused 'over_budget' naming the bytes; its calls are then refused past maxTokens
   * rows, as that count holds for no more. cacheTypeK / cacheTypeV: its sessions' cache types
   * ('f16', 'q8_0', 'q4_0'), the group's members all alike. ends: hold the model's ends the range
   * touches, a slice of the vocabulary of each (`vocab`): the token embedding (and an E-model's
   * per-layer table) when it begins at layer 0 (embed()), the head when it ends at the last
   * layer (logits()).
   * @example const m = await LocalMember.open(lf, { source, index: 1, members: 3, layers: [1, 2], memoryBudgetBytes: 128 * 2 ** 20 });
   */
  static async open(lf, { source, header = null, index, members, layers: [begin, end], threads = 1, maxContext = 0, memoryBudgetBytes, maxTokens = 512,
    cacheTypeK = 'f16', cacheTypeV = 'f16', ends = false }) {
    const member = new LocalMember(lf, { index, members, layers: [begin, end], info: header?.info ?? {}, maxContext, weightBytes: 0, cacheTypeK, cacheTypeV });
    let opened = null;
    try {
      if (!(Number.isSafeInteger(maxContext) && maxContext >= 0)) {
        throw new LayerfoldError('invalid_argument', `maxContext must be a whole number of positions (0: the model's n_ctx_train), not ${maxContext}`);
      }
      opened = header ? { gguf: reparseModelHeader(lf, header), header } : await openModelHeader(lf, source);
      const { info } = opened.header;
      Object.assign(member, { header: opened.header, nEmbd: info.n_embd, nLayer: info.n_layer, nVocab: info.n_vocab, nEmbdPerLayer: info.n_embd_per_layer ?? 0 });
      if (memoryBudgetBytes !== undefined) {
        const needs = memberMemoryNeeds(lf, opened.gguf, info, { layers: [begin, end], member: index, members, maxContext, maxTokens, threads,
          cacheTypeK, cacheTypeV, ends });
        checkMemoryBudget(needs, { baseBytes: lf.bytes().length, budgetBytes: memoryBudgetBytes, layers: [begin, end],
          who: `member ${index} of ${members} over layers [${begin}, ${end})` });
        member.maxTokens = maxTokens;
      }
      member.weightBytes = await member.#load(source, opened, threads, ends);
      return member;
    } catch (error) {
      member.close();
      throw error;
    } finally {
      if (opened) lf.fn.lf_gguf_free(opened.gguf);
    }
  }

  async #load(source, { header, gguf }, threads, ends) {
    const lf = this.#lf;
    const [begin, end] = this.layers;
    const { tensors } = lf.json(lf.fn.lf_member_tensors_json(gguf, begin, end, this.index, this.members, ends ? 1 : 0));
    const offsets = new Map(header.tensors.map((t) => [t.name, t.offset]));
    this.#ptr = lf.fn.lf_member_create();
    if (!withCStrings(lf, [this.cacheTypeK, this.cacheTypeV], ([k, v]) => lf.fn.lf_member_set_kv_types(this.#ptr, k, v))) throw lf.lastError();
    for (const t of tensors) {
      const ptr = lf.alloc(t.n_bytes);
      this.#buffers.push(ptr);
      let at = ptr;
      for (const [offset, size] of t.ranges) {
        const from = offsets.get(t.name) + offset;
        await source.readInto(from, from + size, lf.bytes().subarray(at, at + size));
        at += size;
      }
      withCStrings(lf, [t.name], ([name]) => lf.fn.lf_member_place_tensor(this.#ptr, name, ptr));
    }
    if (!lf.fn.lf_member_load(this.#ptr, gguf, begin, end, this.index, this.members, threads, ends ? 1 : 0)) throw lf.lastError();
    // Its heads of the K/V rows across the group's edge (lf_member_needs_json's kv_rows_in / kv_rows_out).
    const needs = withCStrings(lf, [this.cacheTypeK, this.cacheTypeV], ([k, v]) =>
      lf.json(lf.fn.lf_member_needs_json(gguf, begin, end, this.index, this.members, 0, 1, k, v, ends ? 1 : 0)));
    this.kvLayout = { in: kvLayoutOf(needs.kv_rows_in), out: kvLayoutOf(needs.kv_rows_out) };
    const vocab = [lf.fn.lf_member_vocab_begin(this.#ptr), lf.fn.lf_member_vocab_end(this.#ptr)];
    if (vocab[1] > vocab[0]) Object.assign(this, { vocab, holdsEmbedding: begin === 0, holdsHead: end === this.nLayer });
    return tensors.reduce((sum, t) => sum + t.n_bytes, 0);
  }

  /**
   * Token ids of its vocabulary rows -> their embeddings [n, n_embd] and, on an E-model, every
   * layer's per-layer inputs [n_layer, n, n_embd_per_layer] (else null), a first node's bytes.
   * @example const { hidden, perLayer } = member.embed([17, 4]);
   */
  embed(tokens) {
    const lf = this.#lf;
    const ids = Int32Array.from(tokens);
    const hidden = withBuffers(lf, ids, ids.length * this.nEmbd, (inPtr, outPtr) => lf.fn.lf_member_embed(this.#ptr, inPtr, ids.length, outPtr));
    if (this.nEmbdPerLayer === 0) return { hidden, perLayer: null };
    const perLayer = withCopies(lf, [ids], ([idsPtr]) => withBuffers(lf, hidden, this.nLayer * ids.length * this.nEmbdPerLayer,
      (inPtr, outPtr) => lf.fn.lf_member_per_layer_inputs(this.#ptr, idsPtr, ids.length, inPtr, outPtr)));
    return { hidden, perLayer };
  }

  /**
   * hidden [n, n_embd] -> the logits of its vocabulary rows, [n, vocab[1] - vocab[0]].
   * @example const part = member.logits(hidden);
   */
  logits(hidden) {
    const lf = this.#lf;
    const rows = hidden.length / this.nEmbd;
    return withBuffers(lf, hidden, rows * (this.vocab[1] - this.vocab[0]), (inPtr, outPtr) => lf.fn.lf_member_head(this.#ptr, inPtr, rows, outPtr));
  }

  /**
   * Starts a call of hidden [n, n_embd] at startPos of session `id` (made on first use), with an
   * E-model's per-layer inputs of the range and the K/V rows of its heads of the sources it
   * mirrors (kvRows: { [layer]: Uint8Array } of kvLayout.in's layers); its first piece. A call
   * under way is abandoned. A session that holds other than startPos positions (this member
   * restarted, or lost it) is a position_mismatch, which a pipeline answers by replaying the
   * session.
   * @example const piece = await member.begin({ session: 'a', startPos: 0, hidden });
   */
  async begin({ session: id, startPos, hidden, perLayer = null, kvRows = null }) {
    this.abandon();
    const lf = this.#lf;
    const held = this.sessionLength(id);
    if (startPos !== held) {
      throw new LayerfoldError('position_mismatch', `member ${this.index}: start_pos ${startPos} but session "${id}" holds ${held} positions`);
    }
    const n = hidden.length / this.nEmbd;
    if (!Number.isInteger(n) || n < 1) {
      throw new LayerfoldError('invalid_argument', `hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.nEmbd}`);
    }
    if (n > this.maxTokens) {
      throw new LayerfoldError('invalid_argument', `member ${this.index}: a call of ${n} rows, more than the ${this.maxTokens} its memory budget was counted for`);
    }
    const session = this.#session(id);
    const values = perLayer ?? new Float32Array(0);
    if (!withCopies(lf, [values], ([ptr]) => lf.fn.lf_session_set_per_layer_inputs(session, ptr, values.length))) throw lf.lastError();
    setKvRows(lf, session, this.kvLayout.in, kvRows, startPos, n);
    this.#callSession = session;
    if (lf.kind === 'threaded') {
      await this.#phase((flag) => (this.#call = withCopies(lf, [hidden], ([ptr]) => lf.fn.lf_member_begin_async(this.#ptr, session, startPos, ptr, n, flag))));
    } else {
      this.#call = withCopies(lf, [hidden], ([ptr]) => lf.fn.lf_member_begin(this.#ptr, session, startPos, ptr, n));
      if (!this.#call) throw lf.lastError();
    }
    this.#rows = n;
    return this.#piece();
  }

  /**
   * Every member's piece of the current phase, in member order -> {piece} of the next phase, or
   * {output} [n, n_embd] and {kvRows} (its heads' rows of kvLayout.out's layers) once the call is
   * done (then it is over).
   * @example const next = await member.exchange(pieces);
   */
  async exchange(pieces) {
    const lf = this.#lf;
    if (!this.#call) throw new LayerfoldError('failed_precondition', `member ${this.index}: no call under way`);
    try {
      pieces.forEach((piece, j) => {
        if (!withCopies(lf, [piece], ([ptr]) => lf.fn.lf_member_put_piece(this.#call, j, ptr, piece.length))) throw lf.lastError();
      });
      if (lf.kind === 'threaded') await this.#phase((flag) => lf.fn.lf_member_step_async(this.#call, flag));
      else if (!lf.fn.lf_member_step(this.#call)) throw lf.lastError();
    } catch (error) {
      this.abandon();
      throw error;
    }
    if (lf.fn.lf_member_call_layer(this.#call) !== -1) return { piece: this.#piece() };
    const output = this.#floats(lf.fn.lf_member_output(this.#call), this.#rows * this.nEmbd);
    this.abandon();
    return { output, kvRows: readKvRows(lf, this.#callSession, this.kvLayout.out) };
  }

  /**
   * Ends the call under way, if any, leaving its session as it was before the call (while a phase
   * of it runs: once the phase has ended, and the call awaiting it is refused 'aborted').
   */
  abandon() {
    if (this.#running) {
      this.#abandonWhenEnded = true;
      return;
    }
    if (this.#call) this.#lf.fn.lf_member_call_free(this.#call);
    this.#call = 0;
  }

  /** The bytes of the member's module memory now. */
  memoryBytes() {
    return this.#lf.bytes().length;
  }

  /** The positions session `id` holds (0 for one never used). */
  sessionLength(id) {
    const s = this.#sessions.get(id);
    return s ? this.#lf.fn.lf_session_n_past(s) : 0;
  }

  /**
   * Cuts session `id` back to its first nPast positions, or to its latest checkpoint before them
   * (lf_session_truncate, as LayerNode.truncate), between calls. -> the positions it then holds
   * @example const held = member.truncate('a', 12);
   */
  truncate(id, nPast) {
    return truncateSession(this.#lf, this.#between(id, 'truncate'), nPast);
  }

  /**
   * Keeps a checkpoint of session `id` at its length, at most `keep` (lf_session_checkpoint, as
   * LayerNode.checkpoint), between calls. -> the position checkpointed
   * @example member.checkpoint('a', 4);
   */
  checkpoint(id, keep) {
    return checkpointSession(this.#lf, this.#between(id, 'checkpoint'), keep);
  }

  dropSession(id) {
    const s = this.#sessions.get(id);
    if (s) this.#lf.fn.lf_session_free(s);
    this.#sessions.delete(id);
  }

  close() {
    this.abandon();
    for (const id of [...this.#sessions.keys()]) this.dropSession(id);
    if (this.#ptr) this.#lf.fn.lf_member_free(this.#ptr);
    for (const ptr of this.#buffers) this.#lf.free(ptr);
    this.#buffers = [];
    this.#ptr = 0;
    this.#lf.close();
  }

  // Session `id`, held and with no call under way, for `what`.
  #between(id, what) {
    if (this.#call) throw new LayerfoldError('failed_precondition', `member ${this.index}: a call is under way: ${what} after it`);
    const session = this.#sessions.get(id);
    if (!session) throw new LayerfoldError('unknown_session', `member ${this.index} holds no session "${id}"`);
    return session;
  }

  #session(id) {
    let s = this.#sessions.get(id);
    if (!s) {
      s = this.#lf.fn.lf_member_session_create(this.#ptr, this.#maxContext);
      if (!s) throw this.#lf.lastError();
      this.#sessions.set(id, s);
    }
    return s;
  }

  // The threaded module's phase: start(flag) starts it on the module's threads (the call's
  // lf_member_begin_async or lf_member_step_async) and returns at once; its end is awaited without
  // blocking the event loop, so that a member server takes the other members' pieces meanwhile,
  // and then ended (lf_member_phase_end).
  async #phase(start) {
    const lf = this.#lf;
    const flag = lf.alloc(4);
    this.#running = true;
    try {
      if (!start(flag)) throw lf.lastError();
      await flagSet(lf, flag);
    } finally {
      this.#running = false;
      lf.free(flag);
    }
    const ended = lf.fn.lf_member_phase_end(this.#call);
    const error = ended ? null : lf.lastError();
    if (this.#abandonWhenEnded) {
      this.#abandonWhenEnded = false;
      this.abandon();
      throw new LayerfoldError('aborted', `member ${this.index}: the call was abandoned`);
    }
    if (error) {
      this.abandon();
      throw error;
    }
  }

  #piece() {
    const lf = this.#lf;
    return this.#floats(lf.fn.lf_member_piece(this.#call), lf.fn.lf_member_piece_floats(this.#call, this.index));
  }

  #floats(ptr, n) {
    return new Float32Array(this.#lf.bytes().slice(ptr, ptr + 4 * n).buffer);
  }
}
