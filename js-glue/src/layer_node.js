// LayerNode: one node of a pipelined model. It holds layers [a, b) of a GGUF (plus the token
// embedding on the first node and the head on the last), one KV cache per session, and runs
// hidden states through them in WASM.
import { readGgufHeader } from './gguf_header.js';
import { LocalFileSource } from './object_source_local.js';
import { Tokenizer } from './tokenizer.js';
import { loadSingleThreadModule, loadThreadedModule, threadsAvailable } from './wasm_module.js';

const F32 = 4;

export class LayerNode {
  /**
   * @param {{model: string, layers?: [number, number], threads?: number, build?: 'threaded'|'single',
   *          maxContext?: number, withTokenizer?: boolean}} options
   * @example const node = await LayerNode.open({ model: 'tiny.gguf', layers: [0, 2] });
   */
  static async open({ model, layers, threads, build, maxContext = 0, withTokenizer = false }) {
    const useThreads = build ? build === 'threaded' : threadsAvailable();
    const lf = useThreads ? await loadThreadedModule({ threads }) : await loadSingleThreadModule();
    const source = await LocalFileSource.open(model);
    try {
      const header = await readGgufHeader(lf, (s, e) => source.read(s, e), source.size);
      const nLayer = Number(header.metadata[`${header.metadata['general.architecture']}.block_count`]);
      const [begin, end] = layers ?? [0, nLayer];
      const node = new LayerNode(lf, header, begin, end, begin === 0, end === nLayer, maxContext);
      await node.#load(source, withTokenizer);
      return node;
    } finally {
      await source.close();
    }
  }

  #lf;
  #header;
  #model = 0;
  #buffers = [];
  #sessions = new Map();

  constructor(lf, header, begin, end, withEmbedding, withHead, maxContext) {
    this.#lf = lf;
    this.#header = header;
    this.layers = [begin, end];
    this.withEmbedding = withEmbedding;
    this.withHead = withHead;
    this.maxContext = maxContext;
  }

  async #load(source, withTokenizer) {
    const lf = this.#lf;
    const prefix = await source.read(0, this.#header.data_offset);
    const gguf = this.#parse(prefix, source.size);
    try {
      const namesPtr = lf.fn.lf_node_tensors_json(gguf, this.layers[0], this.layers[1], this.withEmbedding ? 1 : 0, this.withHead ? 1 : 0);
      if (!namesPtr) throw lf.lastError();
      const names = JSON.parse(lf.readCString(namesPtr));
      const byName = new Map(this.#header.tensors.map((t) => [t.name, t]));
      this.#model = lf.fn.lf_model_create();
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
    } finally {
      lf.fn.lf_gguf_free(gguf);
    }
  }

  #parse(prefix, fileSize) {
    const lf = this.#lf;
    const ptr = lf.alloc(prefix.length);
    lf.bytes().set(prefix, ptr);
    const gguf = lf.fn.lf_gguf_parse(ptr, prefix.length, fileSize);
    lf.free(ptr);
    if (!gguf) throw lf.lastError();
    return gguf;
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

  #session(id) {
    let session = this.#sessions.get(id);
    if (session === undefined) {
      session = this.#lf.fn.lf_session_create(this.#model, this.maxContext);
      if (!session) throw this.#lf.lastError();
      this.#sessions.set(id, session);
    }
    return session;
  }

  /** token ids -> hidden [n, n_embd] (first node only). */
  embed(tokens) {
    const ids = Int32Array.from(tokens);
    return this.#withBuffers(ids, ids.length * this.nEmbd, (inPtr, outPtr) => this.#lf.fn.lf_embed(this.#model, inPtr, ids.length, outPtr));
  }

  /**
   * hidden [n, n_embd] at positions startPos.. -> hidden [n or 1, n_embd].
   * @example const out = await node.forward({ session: 'a', startPos: 0, hidden, lastOnly: true });
   */
  async forward({ session, startPos, hidden, lastOnly = false }) {
    const n = hidden.length / this.nEmbd;
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.nEmbd}`);
    const handle = this.#session(session);
    return this.#withBuffers(hidden, (lastOnly ? 1 : n) * this.nEmbd, (inPtr, outPtr) => this.#lf.fn.lf_forward(this.#model, handle, startPos, inPtr, n, outPtr, lastOnly ? 1 : 0));
  }

  /** hidden [rows, n_embd] -> logits [rows, n_vocab] (last node only). */
  logits(hidden) {
    const rows = hidden.length / this.nEmbd;
    return this.#withBuffers(hidden, rows * this.nVocab, (inPtr, outPtr) => this.#lf.fn.lf_head(this.#model, inPtr, rows, outPtr));
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

  dropSession(id) {
    const session = this.#sessions.get(id);
    if (session === undefined) return false;
    this.#lf.fn.lf_session_free(session);
    this.#sessions.delete(id);
    return true;
  }

  info() {
    return {
      layers: this.layers, nEmbd: this.nEmbd, nVocab: this.nVocab, build: this.#lf.kind, threads: this.#lf.threads,
      bytesLoaded: this.bytesLoaded, sessions: this.#sessions.size, wasmMemoryBytes: this.#lf.bytes().length,
    };
  }

  close() {
    this.tokenizer?.close();
    for (const id of [...this.#sessions.keys()]) this.dropSession(id);
    if (this.#model) this.#lf.fn.lf_model_free(this.#model);
    for (const ptr of this.#buffers) this.#lf.free(ptr);
    this.#buffers = [];
    this.#model = 0;
  }
}
