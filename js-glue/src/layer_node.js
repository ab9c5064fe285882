// LayerNode: one node of a pipelined model. It holds layers [a, b) of a GGUF (plus the token
// embedding on the first node and the head on the last), one KV cache per session, and runs
// hidden states through them in WASM.
import { openGgufHeader } from './gguf_header.js';
import { LayerfoldError } from './capi.js';
import { modelName, openSource } from './open_source.js';
import { Tokenizer } from './tokenizer.js';
import { loadSingleThreadModule, loadThreadedModule, threadsAvailable } from './wasm_module.js';

const F32 = 4;

export class LayerNode {
  /**
   * threads: the engine's threads on the threaded build (default: the machine's parallelism);
   * outputs are byte-identical for every count. The single-thread build always uses one.
   * model: a path, file://, http(s)://, s3:// or r2:// URL, or a Workers R2 binding {bucket, key};
   * cacheDir: a verified disk cache of the ranges read; onProgress: throttled
   * {bytes, totalBytes, rate, etaSeconds}; sourceOptions: more openSource options (retries, S3
   * endpoint and credentials, maxCacheBytes...). maxSessions / maxKvBytes bound the KV caches:
   * the least recently used sessions are evicted to make room, and a later call that continues
   * an evicted session fails with code 'evicted'.
   * @param {{model: string|{bucket: object, key: string}, layers?: [number, number], threads?: number,
   *          build?: 'threaded'|'single', maxContext?: number, withTokenizer?: boolean,
   *          cacheDir?: string, onProgress?: (p: object) => void, sourceOptions?: object,
   *          maxSessions?: number, maxKvBytes?: number}} options
   * @example const node = await LayerNode.open({ model: 'https://example.com/tiny.gguf', layers: [0, 2], cacheDir: '.cache' });
   */
  static async open({ model, layers, threads, build, maxContext = 0, withTokenizer = false, cacheDir, onProgress, sourceOptions,
    maxSessions = 64, maxKvBytes = Infinity }) {
    const useThreads = build ? build === 'threaded' : threadsAvailable();
    const lf = useThreads ? await loadThreadedModule({ threads }) : await loadSingleThreadModule();
    let node;
    try {
      const source = await openSource(model, { ...sourceOptions, cacheDir, onProgress });
      let gguf = 0;
      try {
        gguf = await openGgufHeader(lf, (s, e) => source.read(s, e), source.size);
        const header = JSON.parse(lf.readCString(lf.fn.lf_gguf_json(gguf, 0)));
        const nLayer = Number(header.metadata[`${header.metadata['general.architecture']}.block_count`]);
        const [begin, end] = layers ?? [0, nLayer];
        node = new LayerNode(lf, header, begin, end, begin === 0, end === nLayer, { maxContext, maxSessions, maxKvBytes });
        node.model = modelName(model);
        await node.#load(source, gguf, withTokenizer);
        return node;
      } finally {
        if (gguf) lf.fn.lf_gguf_free(gguf);
        await source.close();
      }
    } catch (error) {
      if (node) node.close();
      else lf.close();
      throw error;
    }
  }

  #lf;
  #header;
  #model = 0;
  #buffers = [];
  #sessions = new Map();  // id -> lf_session*, least recently used first
  #evicted = new Set();   // recently evicted ids (bounded), so a late call gets a clear error
  // Forward calls run one after another: the engine refuses a second while one runs.
  #queue = Promise.resolve();

  constructor(lf, header, begin, end, withEmbedding, withHead, { maxContext, maxSessions, maxKvBytes }) {
    this.#lf = lf;
    this.#header = header;
    this.layers = [begin, end];
    this.withEmbedding = withEmbedding;
    this.withHead = withHead;
    this.maxContext = maxContext;
    this.maxSessions = maxSessions;
    this.maxKvBytes = maxKvBytes;
  }

  // Places the node's tensors in WASM memory straight from the source, then loads the model.
  async #load(source, gguf, withTokenizer) {
    const lf = this.#lf;
    const namesPtr = lf.fn.lf_node_tensors_json(gguf, this.layers[0], this.layers[1], this.withEmbedding ? 1 : 0, this.withHead ? 1 : 0);
    if (!namesPtr) throw lf.lastError();
    const names = JSON.parse(lf.readCString(namesPtr));
    const byName = new Map(this.#header.tensors.map((t) => [t.name, t]));
    this.#model = lf.fn.lf_model_create();
    if (!lf.fn.lf_model_set_threads(this.#model, lf.threads)) throw lf.lastError();
    this.bytesLoaded = 0;
    for (const name of names) {
      const info = byName.get(name);
      const ptr = lf.alloc(info.n_bytes);
      this.#buffers.push(ptr);
      await source.readInto(info.offset, info.offset + info.n_bytes, lf.bytes().subarray(ptr, ptr + info.n_bytes));
      this.bytesLoaded += info.n_bytes;
      const namePtr = this.#cString(name);
      lf.fn.lf_model_place_tensor(this.#model, namePtr, ptr);
      lf.free(namePtr);
    }
    if (!lf.fn.lf_model_load(this.#model, gguf, this.layers[0], this.layers[1], this.withEmbedding ? 1 : 0, this.withHead ? 1 : 0)) {
      throw lf.lastError();
    }
    this.nEmbd = lf.fn.lf_model_n_embd(this.#model);
    this.nVocab = lf.fn.lf_model_n_vocab(this.#model);
    this.nLayer = lf.fn.lf_model_n_layer(this.#model);
    /** The model's tokenizer (Tokenizer), when opened withTokenizer. */
    this.tokenizer = withTokenizer ? Tokenizer.fromGguf(lf, gguf) : null;
  }

  #cString(text) {
    const encoded = new TextEncoder().encode(`${text}\0`);
    const ptr = this.#lf.alloc(encoded.length);
    this.#lf.bytes().set(encoded, ptr);
    return ptr;
  }

  // Runs fn(inPtr, outPtr) with `input` copied in and `outFloats` floats copied out.
  #withBuffers(input, outFloats, fn) {
    const lf = this.#lf;
    const inPtr = lf.alloc(input.byteLength);
    const outPtr = lf.alloc(outFloats * F32);
    try {
      lf.bytes().set(new Uint8Array(input.buffer, input.byteOffset, input.byteLength), inPtr);
      if (!fn(inPtr, outPtr)) throw lf.lastError();
      return new Float32Array(lf.bytes().slice(outPtr, outPtr + outFloats * F32).buffer);
    } finally {
      lf.free(inPtr);
      lf.free(outPtr);
    }
  }

  // The session's KV cache, created at its first call (startPos 0); using it makes it the most
  // recently used. Creating one evicts least recently used sessions beyond the limits.
  #session(id, startPos) {
    const lf = this.#lf;
    let session = this.#sessions.get(id);
    if (session !== undefined) {
      this.#sessions.delete(id);
      this.#sessions.set(id, session);
      return session;
    }
    if (startPos !== 0 && this.#evicted.has(id)) {
      throw new LayerfoldError('evicted', `session "${id}" was evicted (least recently used, limits: ` +
        `${this.maxSessions} sessions, ${this.maxKvBytes} KV bytes): start it again from position 0`);
    }
    session = lf.fn.lf_session_create(this.#model, this.maxContext);
    if (!session) throw lf.lastError();
    const bytes = lf.fn.lf_session_bytes(session);
    if (bytes > this.maxKvBytes) {
      lf.fn.lf_session_free(session);
      throw new LayerfoldError('resource_exhausted', `a session needs ${bytes} KV-cache bytes, more than maxKvBytes ${this.maxKvBytes}`);
    }
    let total = bytes;
    for (const s of this.#sessions.values()) total += lf.fn.lf_session_bytes(s);
    for (const [oldest, handle] of this.#sessions) {
      if (this.#sessions.size < this.maxSessions && total <= this.maxKvBytes) break;
      total -= lf.fn.lf_session_bytes(handle);
      this.dropSession(oldest);
      this.#evicted.add(oldest);
      if (this.#evicted.size > 1024) this.#evicted.delete(this.#evicted.values().next().value);
    }
    this.#evicted.delete(id);
    this.#sessions.set(id, session);
    return session;
  }

  /** token ids -> hidden [n, n_embd] (first node only). */
  embed(tokens) {
    const ids = Int32Array.from(tokens);
    return this.#withBuffers(ids, ids.length * this.nEmbd, (inPtr, outPtr) => this.#lf.fn.lf_embed(this.#model, inPtr, ids.length, outPtr));
  }

  /**
   * hidden [n, n_embd] at positions startPos.. -> hidden [n or 1, n_embd]. On the threaded build
   * the engine's threads do the work while the event loop keeps running; calls issued together
   * run one after another, in call order.
   * @example const out = await node.forward({ session: 'a', startPos: 0, hidden, lastOnly: true });
   */
  forward({ session, startPos, hidden, lastOnly = false }) {
    const n = hidden.length / this.nEmbd;
    if (!Number.isInteger(n) || n < 1) {
      return Promise.reject(new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.nEmbd}`));
    }
    const run = () => (this.#lf.kind === 'threaded'
      ? this.#forwardAsync(this.#session(session, startPos), startPos, hidden, n, lastOnly)
      : this.#withBuffers(hidden, (lastOnly ? 1 : n) * this.nEmbd, (inPtr, outPtr) => this.#lf.fn.lf_forward(this.#model, this.#session(session, startPos), startPos, inPtr, n, outPtr, lastOnly ? 1 : 0)));
    const result = this.#queue.then(run);
    this.#queue = result.catch(() => {});
    return result;
  }

  // lf_forward_async, then await its done flag in wasm memory without blocking the event loop.
  async #forwardAsync(handle, startPos, hidden, n, lastOnly) {
    const lf = this.#lf;
    const outFloats = (lastOnly ? 1 : n) * this.nEmbd;
    const inPtr = lf.alloc(hidden.byteLength);
    const outPtr = lf.alloc(outFloats * F32);
    const flagPtr = lf.alloc(4);
    try {
      lf.bytes().set(new Uint8Array(hidden.buffer, hidden.byteOffset, hidden.byteLength), inPtr);
      if (!lf.fn.lf_forward_async(this.#model, handle, startPos, inPtr, n, outPtr, lastOnly ? 1 : 0, flagPtr)) throw lf.lastError();
      const wait = Atomics.waitAsync(new Int32Array(lf.bytes().buffer), flagPtr >> 2, 0);
      if (wait.async) await wait.value;
      if (Atomics.load(new Int32Array(lf.bytes().buffer), flagPtr >> 2) !== 1) {
        lf.fn.lf_forward_async_result(this.#model);
        throw lf.lastError();
      }
      return new Float32Array(lf.bytes().slice(outPtr, outPtr + outFloats * F32).buffer);
    } finally {
      lf.free(inPtr);
      lf.free(outPtr);
      lf.free(flagPtr);
    }
  }

  /** hidden [rows, n_embd] -> logits [rows, n_vocab] (last node only). */
  logits(hidden) {
    const rows = hidden.length / this.nEmbd;
    return this.#withBuffers(hidden, rows * this.nVocab, (inPtr, outPtr) => this.#lf.fn.lf_head(this.#model, inPtr, rows, outPtr));
  }

  /**
   * Where the session's last forward spent its time, in ms summed over layers: attention, FFN,
   * and serial (outside the engine's threads: validation, copies, hand-over).
   */
  phaseTimings(id) {
    const session = this.#sessions.get(id);
    if (session === undefined) return null;
    const ms = (phase) => this.#lf.fn.lf_session_phase_ms(session, phase);
    return { attention: ms(0), ffn: ms(1), serial: ms(2) };
  }

  /** Milliseconds each of this node's layers took in the session's last forward call. */
  layerTimings(id) {
    const session = this.#sessions.get(id);
    if (session === undefined) return [];
    return Array.from({ length: this.layers[1] - this.layers[0] }, (_, i) => this.#lf.fn.lf_session_layer_ms(session, i));
  }

  /** The GGUF metadata (large arrays summarized). */
  get metadata() {
    return this.#header.metadata;
  }

  /** Positions the session's KV cache holds (its next startPos), or null for an unknown session. */
  sessionLength(id) {
    const session = this.#sessions.get(id);
    return session === undefined ? null : this.#lf.fn.lf_session_n_past(session);
  }

  /** Bytes of the session's KV cache (0 for an unknown session). */
  sessionBytes(id) {
    const session = this.#sessions.get(id);
    return session === undefined ? 0 : this.#lf.fn.lf_session_bytes(session);
  }

  dropSession(id) {
    const session = this.#sessions.get(id);
    if (session === undefined) return false;
    this.#lf.fn.lf_session_free(session);
    this.#sessions.delete(id);
    return true;
  }

  info() {
    return {
      model: this.model, layers: this.layers, nEmbd: this.nEmbd, nVocab: this.nVocab, build: this.#lf.kind,
      threads: this.#model ? this.#lf.fn.lf_model_threads(this.#model) : this.#lf.threads,
      bytesLoaded: this.bytesLoaded, sessions: this.#sessions.size, wasmMemoryBytes: this.#lf.bytes().length,
      kvBytes: [...this.#sessions.keys()].reduce((sum, id) => sum + this.sessionBytes(id), 0),
    };
  }

  /** Frees the model and sessions and stops the module's threads. Not while a forward runs. */
  close() {
    this.tokenizer?.close();
    for (const id of [...this.#sessions.keys()]) this.dropSession(id);
    if (this.#model) this.#lf.fn.lf_model_free(this.#model);
    for (const ptr of this.#buffers) this.#lf.free(ptr);
    this.#buffers = [];
    this.#model = 0;
    this.#lf.close();
  }
}
