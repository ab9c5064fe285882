// LayerNode: one node of a pipelined model. It holds layers [a, b) of a GGUF (plus the token
// embedding on the first node and the head on the last), one KV cache per session, and runs
// hidden states through them in WASM. This is the runtime-neutral part, with no node: imports,
// so an edge worker can use it: it is handed a loaded module and an opened object source.
// layer_node.js adds Node's defaults (the dist modules, paths and URLs, the disk cache).
import { openModelHeader, reparseModelHeader } from '../gguf/header.js';
import { Tokenizer } from '../tokens/tokenizer.js';
import { LayerfoldError } from '../wasm/capi.js';
import { Batcher } from './batcher.js';
import { flagSet, forwardBatch, forwardOne, headAsync, withBuffers } from './engine_forward.js';
import { checkMemoryBudget, nodeMemoryNeeds } from './memory_budget.js';
import { DEFAULT_ROW_CACHE_BYTES, PerLayerRows } from './per_layer_rows.js';
import { checkSample } from '../sources/unvalidated.js';


export class LayerNode {
  /**
   * Opens a node from a bound module `lf` (wasm/wasi.js, wasm/load_node.js) and an object source
   * `source` ({size, read, readInto, close}), both handed over: the node closes the module with
   * itself, and the source once loaded (or on failure). `name` is what info() reports as the
   * model (default: source.name). maxSessions / maxKvBytes bound the KV caches: the least
   * recently used sessions are evicted to make room, and a later call that continues an evicted
   * session fails with code 'evicted'. With memoryBudgetBytes, the node first estimates what it
   * will hold (node/memory_budget.js: weights, one session's KV cache at maxContext, the scratch of a
   * forward of maxTokens tokens) and throws 'over_budget' naming the bytes needed and available
   * before reading any tensor; unless given, maxKvBytes is then what the budget leaves for KV.
   * ffnDownLayout 'features' lays ffn_down out feature-major (docs/approximate.md: the top-K
   * gate FFN then reads only the kept features' columns; the bytes out are the same).
   * maxBatchRows bounds the rows of one engine step when concurrent forward calls are batched
   * (node/batcher.js; default maxTokens, the rows the scratch estimate is sized for). `header`,
   * the source's header as read before (gguf/header.js ModelHeader, e.g. a Pipeline's), spares
   * the node reading and converting it again. perLayerTable, on the first node of a model with
   * per-layer embeddings (gemma4 E2B/E4B): 'rows' (default) reads only the rows of
   * per_layer_token_embd for the tokens it sees, by range from the source (which the node then
   * keeps open until close()), into a least-recently-used cache of perLayerRowCacheBytes
   * (node/per_layer_rows.js; counted in the memory budget); 'whole' loads the table like any
   * tensor. The inputs' bytes are the same either way.
   * @param {{lf: object, source: object, header?: object, name?: string, layers?: [number, number],
   *          maxContext?: number, withTokenizer?: boolean, maxSessions?: number, maxKvBytes?: number,
   *          memoryBudgetBytes?: number, maxTokens?: number, maxBatchRows?: number, ffnDownLayout?: 'units'|'features',
   *          perLayerTable?: 'rows'|'whole', perLayerRowCacheBytes?: number}} options
   * @example const node = await LayerNode.open({ lf: await instantiateSingleThreadModule(wasm),
   *   source: await R2BindingSource.open(env.MODEL, 'tiny.gguf'), layers: [0, 1], memoryBudgetBytes: 128 * 2 ** 20 });
   */
  static async open({ lf, source, header, name = source.name, layers, maxContext = 0, withTokenizer = false,
    maxSessions = 64, maxKvBytes, memoryBudgetBytes, maxTokens = 512, maxBatchRows = maxTokens, ffnDownLayout = 'units',
    perLayerTable = 'rows',
    perLayerRowCacheBytes = DEFAULT_ROW_CACHE_BYTES }) {
    if (perLayerTable !== 'rows' && perLayerTable !== 'whole') {
      throw new LayerfoldError('invalid_argument', `perLayerTable "${perLayerTable}": expected rows or whole`);
    }
    if (!(Number.isSafeInteger(maxSessions) && maxSessions >= 1)) {
      throw new LayerfoldError('invalid_argument', `maxSessions must be a whole number of sessions >= 1, not ${maxSessions}`);
    }
    if (maxKvBytes !== undefined && !(Number.isSafeInteger(maxKvBytes) && maxKvBytes >= 0)) {
      throw new LayerfoldError('invalid_argument', `maxKvBytes must be a whole number of bytes >= 0, not ${maxKvBytes}`);
    }
    if (!(Number.isSafeInteger(perLayerRowCacheBytes) && perLayerRowCacheBytes >= 0)) {
      throw new LayerfoldError('invalid_argument', `perLayerRowCacheBytes must be a whole number of bytes >= 0, not ${perLayerRowCacheBytes}`);
    }
    let node;
    let keepSource = false;
    try {
      let gguf = 0;
      try {
        const opened = header ? { gguf: LayerNode.#reparse(lf, header, source), header } : await openModelHeader(lf, source);
        gguf = opened.gguf;
        const { info } = opened.header;
        const [begin, end] = layers ?? [0, info.n_layer];
        node = new this(lf, opened.header, begin, end, begin === 0, end === info.n_layer, { maxContext, maxSessions, maxKvBytes: maxKvBytes ?? Infinity, maxBatchRows });
        node.model = name;
        const perLayerRows = perLayerTable === 'rows' && node.withEmbedding && info.n_embd_per_layer > 0;
        const needs = nodeMemoryNeeds(lf, gguf, info, {
          layers: node.layers, withEmbedding: node.withEmbedding, withHead: node.withHead, maxContext, maxTokens, threads: lf.threads,
          perLayerRows, rowCacheBytes: perLayerRowCacheBytes,
        });
        if (maxKvBytes !== undefined && maxKvBytes < needs.kvCache) {
          // Every session would be refused: say so now, with the numbers, rather than at each forward.
          throw new LayerfoldError('invalid_argument', `maxKvBytes ${maxKvBytes} is below the ${needs.kvCache} bytes one session's KV cache needs ` +
            `(layers [${node.layers[0]}, ${node.layers[1]}) at max context ${maxContext || info.n_ctx_train}): raise it, or lower the max context`);
        }
        /**
         * Shared KV across nodes (docs/forward-pass.md, "Shared KV across nodes"): the source
         * layers whose K/V rows each forward takes (kvRows) and those whose new rows it hands
         * out (kvRowsOf), [{layer, bytesPerToken}] in layer order.
         */
        node.kvRowsIn = needs.kvRowsIn;
        node.kvRowsOut = needs.kvRowsOut;
        if (memoryBudgetBytes !== undefined) node.#reserve(needs, { memoryBudgetBytes, maxTokens, kvLimited: maxKvBytes !== undefined });
        await node.#load(source, gguf, needs.tensors, withTokenizer, ffnDownLayout, perLayerRows);
        if (perLayerRows) {
          const table = opened.header.tensors.find((t) => t.name === 'per_layer_token_embd.weight');
          node.#rows = new PerLayerRows(source.untracked ?? source, { offset: table.offset, rowBytes: needs.rowBytes, nVocab: info.n_vocab, cacheBytes: perLayerRowCacheBytes });
          keepSource = true;
        }
        return node;
      } finally {
        if (gguf) lf.fn.lf_gguf_free(gguf);
        if (!keepSource) await source.close();
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
  #rows = null;  // PerLayerRows: the first node's per_layer_token_embd rows, read by range
  #kvRowsOut = new WeakMap();  // a forward's output -> the K/V rows the call handed out
  #buffers = [];
  #sessions = new Map();  // id -> lf_session*, least recently used first
  #evicted = new Set();   // recently evicted ids (bounded), so a late call gets a clear error
  // The engine refuses a second forward while one runs: concurrent calls are batched into steps.
  #batcher;
  #running = new Map();   // lf_session* -> its startPos, for the sessions of the step running
  #pending = new Map();   // id -> lf_session*, the new sessions of the step running, registered once it succeeds
  #dropAfterStep = [];    // sessions dropped while the running step used them
  #batchListeners = new Set();
  #batchStats = { batches: 0, entries: 0, rows: 0, maxEntries: 0, maxRows: 0 };
  #heads = [];            // logitsAsync calls waiting for the next LM-head pass
  #headStats = { passes: 0, calls: 0, rows: 0 };

  constructor(lf, header, begin, end, withEmbedding, withHead, { maxContext, maxSessions, maxKvBytes, maxBatchRows }) {
    this.#lf = lf;
    this.#header = header;
    this.layers = [begin, end];
    this.withEmbedding = withEmbedding;
    this.withHead = withHead;
    this.maxContext = maxContext;
    this.maxSessions = maxSessions;
    this.maxKvBytes = maxKvBytes;
    this.memory = null;
    this.#batcher = new Batcher({ maxRows: maxBatchRows, runBatch: (calls) => this.#runStep(calls), onBatch: (batch) => this.#observed(batch) });
    /** The row budget of one engine step. */
    this.maxBatchRows = maxBatchRows;
  }

  // A header handed over is of the file being opened: its size, and the identity of the source it
  // was read from (its ETag or size and mtime), say so before any tensor is read.
  static #reparse(lf, header, source) {
    if (header.file_size !== source.size) {
      throw new LayerfoldError('invalid_argument', `the header handed over is of a file of ${header.file_size} bytes, ${source.name} has ${source.size}`);
    }
    if (header.identity && source.identity && header.identity !== source.identity) {
      throw new LayerfoldError('source_changed', `${source.name}: the object changed since its header was read (now ${source.identity.slice(source.identity.lastIndexOf('#') + 1)}, the header read from ${header.identity.slice(header.identity.lastIndexOf('#') + 1)}): open it again`);
    }
    return reparseModelHeader(lf, header);
  }

  // Refuses a node that would not fit its budget before any tensor is read; what the budget
  // leaves beyond one session goes to more sessions (unless maxKvBytes was given). The memory
  // figures leave out the names of what the node loads and the layers whose rows it ships.
  #reserve({ tensors, kvRowsIn, kvRowsOut, ...needs }, { memoryBudgetBytes, maxTokens, kvLimited }) {
    const baseBytes = this.#lf.bytes().length;
    const needed = checkMemoryBudget(needs, { baseBytes, budgetBytes: memoryBudgetBytes, layers: this.layers });
    if (!kvLimited) this.maxKvBytes = memoryBudgetBytes - (needed - needs.kvCache);
    /** The budget check's figures, in bytes (null without a budget). */
    this.memory = { budgetBytes: memoryBudgetBytes, neededBytes: needed, baseBytes, maxTokens, ...needs };
  }

  // Places the node's tensors in WASM memory straight from the source, then loads the model.
  async #load(source, gguf, names, withTokenizer, ffnDownLayout, perLayerRows) {
    const lf = this.#lf;
    const byName = new Map(this.#header.tensors.map((t) => [t.name, t]));
    this.#model = lf.fn.lf_model_create();
    if (!lf.fn.lf_model_set_threads(this.#model, lf.threads)) throw lf.lastError();
    if (!lf.fn.lf_model_set_per_layer_rows(this.#model, perLayerRows ? 1 : 0)) throw lf.lastError();
    const layout = this.#cString(ffnDownLayout);
    try {
      if (!lf.fn.lf_model_set_ffn_down_layout(this.#model, layout)) throw lf.lastError();
    } finally {
      lf.free(layout);
    }
    this.ffnDownLayout = ffnDownLayout;
    this.bytesLoaded = 0;
    const placed = [];
    for (const name of names) {
      const info = byName.get(name);
      const ptr = lf.alloc(info.n_bytes);
      this.#buffers.push(ptr);
      await source.readInto(info.offset, info.offset + info.n_bytes, lf.bytes().subarray(ptr, ptr + info.n_bytes));
      this.bytesLoaded += info.n_bytes;
      placed.push({ offset: info.offset, bytes: () => lf.bytes().subarray(ptr, ptr + info.n_bytes) });
      const namePtr = this.#cString(name);
      lf.fn.lf_model_place_tensor(this.#model, namePtr, ptr);
      lf.free(namePtr);
    }
    // Before the engine lays any weight out anew: the bytes placed are the bytes read.
    await checkSample(source.untracked ?? source, placed);
    if (!lf.fn.lf_model_load(this.#model, gguf, this.layers[0], this.layers[1], this.withEmbedding ? 1 : 0, this.withHead ? 1 : 0)) {
      throw lf.lastError();
    }
    this.nEmbd = lf.fn.lf_model_n_embd(this.#model);
    this.nVocab = lf.fn.lf_model_n_vocab(this.#model);
    this.nLayer = lf.fn.lf_model_n_layer(this.#model);
    /** Per-layer embedding width (gemma4 E2B/E4B; 0: the model has none). */
    this.nEmbdPerLayer = this.#header.info.n_embd_per_layer ?? 0;
    /** The model's tokenizer (Tokenizer), when opened withTokenizer. */
    this.tokenizer = withTokenizer ? Tokenizer.fromGguf(lf, gguf) : null;
  }

  #cString(text) {
    const encoded = new TextEncoder().encode(`${text}\0`);
    const ptr = this.#lf.alloc(encoded.length);
    this.#lf.bytes().set(encoded, ptr);
    return ptr;
  }

  // The session's KV cache for a call: the one held, or a new one (its first call, startPos 0)
  // that is not yet registered. Nothing about the held sessions changes here: #settle does that
  // once the engine has answered the call.
  #sessionFor(id, startPos) {
    const lf = this.#lf;
    const held = this.#sessions.get(id);
    if (held !== undefined) return { handle: held, fresh: false };
    if (startPos !== 0 && this.#evicted.has(id)) {
      throw new LayerfoldError('evicted', `session "${id}" was evicted (least recently used, limits: ` +
        `${this.maxSessions} sessions, ${this.maxKvBytes} KV bytes): start it again from position 0`);
    }
    const handle = lf.fn.lf_session_create(this.#model, this.maxContext);
    if (!handle) throw lf.lastError();
    const bytes = lf.fn.lf_session_bytes(handle);
    if (bytes > this.maxKvBytes) {
      lf.fn.lf_session_free(handle);
      throw new LayerfoldError('resource_exhausted', `a session needs ${bytes} KV-cache bytes, more than maxKvBytes ${this.maxKvBytes}`);
    }
    return { handle, fresh: true };
  }

  // The least recently used sessions a new session of this step displaces to meet the limits,
  // none of the step's own (step.ids, and the new sessions before it, step.fresh, which count as
  // held); nothing is evicted here (#settle does it once its forward succeeded). null when the
  // limits cannot be met without one of the step's sessions, or when another new session of the
  // step already displaces some: the sessions displaced are freed only after the step, so one
  // per step bounds what the node holds beyond its limits to one session's cache. The call then
  // waits for the next step, where it goes first and always fits.
  #room(id, handle, step) {
    const bytes = (session) => this.#lf.fn.lf_session_bytes(session);
    const fits = (count, total) => count < this.maxSessions && total <= this.maxKvBytes;
    const held = [...this.#sessions, ...step.fresh];
    let count = held.length;
    let total = held.reduce((sum, [, s]) => sum + bytes(s), bytes(handle));
    const victims = [];
    for (const [other, session] of held) {
      if (fits(count, total)) break;
      if (step.ids.has(other)) continue;
      victims.push(other);
      count--;
      total -= bytes(session);
    }
    if (!fits(count, total) || (victims.length > 0 && step.evicting)) {
      if (step.ids.size === 0) throw new LayerfoldError('internal', `session "${id}" alone does not fit the node's limits`);
      return null;
    }
    step.evicting ||= victims.length > 0;
    step.fresh.push([id, handle]);
    return victims;
  }

  // What a call's outcome does to the sessions, once its step is done: a forward that succeeded
  // makes its session the most recently used (a new one registered, the sessions it displaces
  // evicted); a refused one changes nothing, and its new session is freed.
  #settle(id, { handle, fresh, victims }, succeeded) {
    if (fresh) {
      // Dropped while the step ran: dropSession has freed it.
      if (this.#pending.get(id) !== handle) return;
      this.#pending.delete(id);
      if (!succeeded) {
        this.#lf.fn.lf_session_free(handle);
        return;
      }
      for (const victim of victims) {
        if (!this.dropSession(victim)) continue;
        this.#evicted.add(victim);
        if (this.#evicted.size > 1024) this.#evicted.delete(this.#evicted.values().next().value);
      }
      this.#evicted.delete(id);
    } else if (!succeeded || this.#sessions.get(id) !== handle) {
      return;
    }
    this.#sessions.delete(id);
    this.#sessions.set(id, handle);
  }

  /** token ids -> hidden [n, n_embd] (first node only). */
  embed(tokens) {
    const ids = Int32Array.from(tokens);
    return withBuffers(this.#lf, ids, ids.length * this.nEmbd, (inPtr, outPtr) => this.#lf.fn.lf_embed(this.#model, inPtr, ids.length, outPtr));
  }

  /**
   * Models with per-layer embeddings (nEmbdPerLayer > 0), first node only: token ids and their
   * embed() output -> every layer's per-layer input, Float32Array [n_layer, n, nEmbdPerLayer],
   * layer-major: layers [a, b) are the contiguous subarray(a·n·nEmbdPerLayer, b·n·nEmbdPerLayer),
   * which forward() of the node of those layers takes as perLayer (docs/forward-pass.md,
   * "Per-layer inputs and shared KV in a pipeline"). With perLayerTable 'rows' the tokens' rows
   * of the table are read first (those not cached), hence the promise.
   * @example const perLayer = await node.perLayerInputs(tokens, hidden);
   */
  async perLayerInputs(tokens, hidden) {
    const ids = Int32Array.from(tokens);
    const outFloats = this.nLayer * ids.length * this.nEmbdPerLayer;
    const table = this.#rows;
    if (!table) {
      return this.#withCopies([ids], ([idsPtr]) => withBuffers(this.#lf, hidden, outFloats,
        (inPtr, outPtr) => this.#lf.fn.lf_per_layer_inputs(this.#model, idsPtr, ids.length, inPtr, outPtr)));
    }
    const rows = await table.rows(ids);
    if (!this.#model) throw new LayerfoldError('failed_precondition', 'the node was closed while its per-layer rows were read');
    return this.#withCopies([ids, rows.ids, rows.bytes], ([idsPtr, rowIdsPtr, rowsPtr]) => withBuffers(this.#lf, hidden, outFloats,
      (inPtr, outPtr) => this.#lf.fn.lf_per_layer_inputs_from_rows(this.#model, idsPtr, ids.length, inPtr, rowIdsPtr, rows.ids.length,
        rowsPtr, table.rowBytes, outPtr)));
  }

  /**
   * What reading per_layer_token_embd by rows has cost so far: { reads, bytesRead, rowsRead,
   * cacheHits, cachedBytes, rowBytes }; null on a node that does not read it so.
   * @example node.perLayerRowStats() // { reads: 3, bytesRead: 57120, rowsRead: 6, cacheHits: 2, cachedBytes: 57120, rowBytes: 9520 }
   */
  perLayerRowStats() {
    return this.#rows && { ...this.#rows.stats, cachedBytes: this.#rows.cachedBytes, rowBytes: this.#rows.rowBytes };
  }

  // Runs fn(pointers) with each typed array of `arrays` copied into WASM memory.
  #withCopies(arrays, fn) {
    const lf = this.#lf;
    const ptrs = arrays.map((a) => {
      const ptr = lf.alloc(Math.max(4, a.byteLength));
      lf.bytes().set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), ptr);
      return ptr;
    });
    try {
      return fn(ptrs);
    } finally {
      for (const ptr of ptrs) lf.free(ptr);
    }
  }

  #setPerLayer(handle, perLayer) {
    const lf = this.#lf;
    const values = perLayer ?? new Float32Array(0);
    const ptr = lf.alloc(Math.max(4, values.byteLength));
    try {
      lf.bytes().set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), ptr);
      if (!lf.fn.lf_session_set_per_layer_inputs(handle, ptr, values.length)) throw lf.lastError();
    } finally {
      lf.free(ptr);
    }
  }

  /**
   * hidden [n, n_embd] at positions startPos.. -> hidden [n or 1, n_embd]. On the threaded build
   * the engine's threads do the work while the event loop keeps running. Calls issued while the
   * engine is busy are batched (docs/batching.md): the next engine step runs the waiting calls of
   * different sessions together, up to maxBatchRows rows; a session's calls run in call order,
   * one per step. Each call gets its own output, the bytes it would get alone, or its own error.
   * approx switches on approximate modes for this call
   * (docs/approximate.md; off by default, and then the output is the exact engine's):
   * { truncatedAttention, truncationThreshold, earlyExit, exitThreshold, exitWindow, ffnTopK,
   * ffnTopKLayers, ffnTopKThreshold }; approxStats() tells what they did. exitState is the
   * early-exit state the last row arrives in: the previous node's approxStats().early_exit.
   * perLayer: a model with per-layer embeddings needs this node's layers' inputs,
   * [layers, n, nEmbdPerLayer] (perLayerInputs()). kvRows: a node with kvRowsIn needs each of
   * those layers' K/V rows of the call's positions, { [layer]: Uint16Array [n, bytesPerToken / 2] },
   * as the source's node handed them out (kvRowsOf); rows of other layers are ignored.
   * @example const out = await node.forward({ session: 'a', startPos: 0, hidden, lastOnly: true });
   */
  forward({ session, startPos, hidden, lastOnly = false, approx = {}, exitState = null, perLayer = null, kvRows = null }) {
    const n = hidden.length / this.nEmbd;
    if (!Number.isInteger(n) || n < 1) {
      return Promise.reject(new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.nEmbd}`));
    }
    return this.#batcher.submit({ session, rows: n, startPos, hidden, lastOnly, approx, exitState, perLayer, kvRows });
  }

  /**
   * The K/V rows of the kvRowsOut layers the forward that answered `out` handed out, every
   * position of the call (also with lastOnly): { [layer]: Uint16Array [n, bytesPerToken / 2] },
   * the kvRows of the later nodes that mirror those layers; null for a node with no kvRowsOut.
   * @example const kvRows = node.kvRowsOf(await node.forward({ session: 'a', startPos: 0, hidden }));
   */
  kvRowsOf(out) {
    return this.#kvRowsOut.get(out) ?? null;
  }

  // The call's K/V rows for the session: those of the node's kvRowsIn layers, nothing else.
  #setKvRows(handle, kvRows, startPos, n) {
    const lf = this.#lf;
    lf.fn.lf_session_clear_kv_rows(handle);
    for (const { layer } of this.kvRowsIn) {
      const values = kvRows?.[layer];
      if (!values) continue;
      this.#withCopies([values], ([ptr]) => {
        if (!lf.fn.lf_session_set_kv_rows(handle, layer, startPos, n, ptr, values.length)) throw lf.lastError();
      });
    }
  }

  // What a finished forward of the session handed out, copied out of WASM memory.
  #readKvRows(handle) {
    const lf = this.#lf;
    const rows = {};
    for (const { layer } of this.kvRowsOut) {
      const count = lf.fn.lf_session_kv_rows_values(handle, layer);
      if (count < 0) throw lf.lastError();
      const ptr = lf.fn.lf_session_kv_rows(handle, layer);
      rows[layer] = new Uint16Array(lf.bytes().slice(ptr, ptr + 2 * count).buffer);
    }
    return rows;
  }

  // One engine step of the batcher's calls: each call's options are set on its session and a new
  // session's room among the limits is found (admission) before anything else changes; then the
  // calls that got so far run as one forward, and only those the engine answered change the
  // sessions (#settle). So a refusal, of an option, of the admission or by the engine (a
  // non-finite row, a stale startPos, beyond max context), fails its call alone and leaves the
  // sessions, their order, their positions and their caches as they were: nothing is evicted
  // for a new session whose first forward is refused.
  async #runStep(calls) {
    if (!this.#model) return calls.map(() => ({ error: LayerNode.#closedError('forward') }));
    const outcomes = [];
    const entries = [];
    // The step's sessions, its new ones, and whether one of those displaces others (#room).
    const step = { ids: new Set(), fresh: [], evicting: false };
    for (const call of calls) {
      try {
        const target = this.#prepare(call, step);
        if (!target) {
          outcomes.push({ deferred: true });
          continue;
        }
        step.ids.add(call.session);
        entries.push({ call, ...target, outcome: outcomes.length });
        outcomes.push(null);
      } catch (error) {
        outcomes.push({ error });
      }
    }
    if (entries.length === 0) return outcomes;
    for (const { call, handle, fresh } of entries) {
      this.#running.set(handle, call.startPos);
      if (fresh) this.#pending.set(call.session, handle);
    }
    let results;
    try {
      results = entries.length === 1
        ? [await forwardOne(this.#lf, this.#model, entries[0]).then((value) => ({ value }), (error) => ({ error }))]
        : await forwardBatch(this.#lf, this.#model, entries);
      // Before a session dropped during the step is freed.
      entries.forEach(({ handle }, i) => {
        if (results[i].value && this.kvRowsOut.length) this.#kvRowsOut.set(results[i].value, this.#readKvRows(handle));
      });
    } catch (error) {
      results = entries.map(() => ({ error }));
    } finally {
      this.#running.clear();
      for (const handle of this.#dropAfterStep.splice(0)) this.#lf.fn.lf_session_free(handle);
    }
    entries.forEach(({ call, outcome, ...target }, i) => {
      outcomes[outcome] = results[i];
      this.#settle(call.session, target, !results[i].error);
    });
    return outcomes;
  }

  // The call's session with its options set and, for a new one, the sessions it displaces
  // ({handle, fresh, victims}), or null when it must wait for the next step (#room).
  #prepare({ session, startPos, rows, approx, exitState, perLayer, kvRows }, step) {
    const target = this.#sessionFor(session, startPos);
    let victims = [];
    try {
      this.#setApprox(target.handle, approx, exitState);
      this.#setPerLayer(target.handle, perLayer);
      this.#setKvRows(target.handle, kvRows, startPos, rows);
      if (target.fresh) victims = this.#room(session, target.handle, step);
    } catch (error) {
      if (target.fresh) this.#lf.fn.lf_session_free(target.handle);
      throw error;
    }
    if (victims) return { ...target, victims };
    this.#lf.fn.lf_session_free(target.handle);
    return null;
  }

  // A call still waiting when the node was closed: its engine is gone.
  static #closedError(what) {
    return new LayerfoldError('failed_precondition', `${what}: the node was closed before the call could run`);
  }

  #observed(batch) {
    const stats = this.#batchStats;
    stats.batches++;
    stats.entries += batch.entries;
    stats.rows += batch.rows;
    stats.maxEntries = Math.max(stats.maxEntries, batch.entries);
    stats.maxRows = Math.max(stats.maxRows, batch.rows);
    for (const listener of this.#batchListeners) listener(batch);
  }

  /**
   * Calls listener({entries, rows, waitMs}) after every engine step of forward calls: how many
   * calls and rows it ran, and each call's wait in ms from forward() to the step starting.
   * Returns the function that stops it.
   * @example const stop = node.observeBatches(({ entries, rows, waitMs }) => console.log(entries, rows, waitMs));
   */
  observeBatches(listener) {
    this.#batchListeners.add(listener);
    return () => this.#batchListeners.delete(listener);
  }

  /**
   * The engine steps of forward calls so far: { batches, entries, rows, maxEntries, maxRows }
   * (totals and the largest step), and the row budget maxBatchRows.
   * @example const { batches, entries } = node.batchStats(); // entries / batches: calls per step
   */
  batchStats() {
    return { ...this.#batchStats, maxBatchRows: this.maxBatchRows };
  }

  // The C ABI takes the options as JSON with the engine's snake_case names.
  #setApprox(handle, approx, exitState) {
    const options = Object.fromEntries(Object.entries(approx).map(([key, value]) => [key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), value]));
    this.#callWithJson(this.#lf.fn.lf_session_set_approx, handle, options);
    if (exitState) {
      const { exit_layer, recent_updates } = exitState;
      this.#callWithJson(this.#lf.fn.lf_session_set_exit_state, handle, { exit_layer, recent_updates });
    }
  }

  #callWithJson(fn, handle, value) {
    const json = this.#cString(JSON.stringify(value));
    try {
      if (!fn(handle, json)) throw this.#lf.lastError();
    } finally {
      this.#lf.free(json);
    }
  }

  /** What the approximate modes did in the session's last forward (null for an unknown session). */
  approxStats(id) {
    const session = this.#idleSession(id, 'approxStats');
    return session === undefined ? null : this.#lf.json(this.#lf.fn.lf_session_approx_stats(session));
  }

  // The session's handle for a read of what its last forward left, which the engine's threads are
  // rewriting while a step runs it: the caller is told to read once its forward has resolved.
  #idleSession(id, what) {
    const session = this.#sessions.get(id);
    if (this.#running.has(session)) {
      throw new LayerfoldError('failed_precondition', `${what}("${id}"): a forward of this session is running; read it once that forward has resolved`);
    }
    return session;
  }

  /**
   * The memory-read ceiling decode is measured against (scripts/bench): every byte of this node's
   * layer weights read once on its threads, as decode streams them. Runs alone, after the forward
   * calls issued before it. -> { bytes, ms, gbPerSecond, checksum } (checksum: the sum of the tensors'
   * little-endian 16-bit halfwords modulo 2^16, an odd tail byte zero-padded; the same for every
   * layout the loader may give the weights)
   * @example const { gbPerSecond } = await node.readProbe();
   */
  readProbe() {
    return this.#batcher.exclusive(async () => {
      if (!this.#model) throw LayerNode.#closedError('readProbe');
      const lf = this.#lf;
      const flagPtr = lf.alloc(4);
      try {
        if (!lf.fn.lf_model_read_probe_async(this.#model, flagPtr)) throw lf.lastError();
        await flagSet(this.#lf, flagPtr);
        const { bytes, ms, checksum } = lf.json(lf.fn.lf_model_read_probe_json(this.#model));
        return { bytes, ms, gbPerSecond: bytes / ms / 1e6, checksum };
      } finally {
        lf.free(flagPtr);
      }
    });
  }

  /** hidden [rows, n_embd] -> logits [rows, n_vocab] (last node only), on the calling thread's turn. */
  logits(hidden) {
    const rows = hidden.length / this.nEmbd;
    return withBuffers(this.#lf, hidden, rows * this.nVocab, (inPtr, outPtr) => this.#lf.fn.lf_head(this.#model, inPtr, rows, outPtr));
  }

  /**
   * logits() on the engine's threads without blocking the event loop, in its place among the
   * forward steps: the calls waiting when the engine frees go through the LM head together, one
   * pass over its weights for all their rows (each row's logits are the bytes logits() gives).
   * @example const [a, b] = await Promise.all([node.logitsAsync(h1), node.logitsAsync(h2)]);
   */
  logitsAsync(hidden) {
    const rows = hidden.length / this.nEmbd;
    if (!Number.isInteger(rows) || rows < 1) {
      return Promise.reject(new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.nEmbd}`));
    }
    return new Promise((resolve, reject) => {
      this.#heads.push({ hidden, rows, resolve, reject });
      // Each call queues a pass, so that each drives the line from its own request (batcher.js);
      // the first pass answers every call waiting, the others find none.
      this.#batcher.exclusive(() => this.#headPass()).catch(() => {});
    });
  }

  // One LM-head pass over every waiting logitsAsync call's rows.
  async #headPass() {
    const calls = this.#heads.splice(0);
    if (calls.length === 0) return;
    try {
      if (!this.#model) throw LayerNode.#closedError('logitsAsync');
      const rows = calls.reduce((sum, c) => sum + c.rows, 0);
      const hidden = new Float32Array(rows * this.nEmbd);
      let at = 0;
      for (const c of calls) {
        hidden.set(c.hidden, at);
        at += c.hidden.length;
      }
      const logits = await headAsync(this.#lf, this.#model, hidden, rows, this.nVocab);
      Object.assign(this.#headStats, { passes: this.#headStats.passes + 1, calls: this.#headStats.calls + calls.length, rows: this.#headStats.rows + rows });
      let row = 0;
      for (const c of calls) {
        c.resolve(logits.slice(row * this.nVocab, (row + c.rows) * this.nVocab));
        row += c.rows;
      }
    } catch (error) {
      // A bad row (not finite, or logits that overflow) fails its own call only.
      if (calls.length === 1 || !this.#model) {
        for (const c of calls) c.reject(error);
        return;
      }
      for (const c of calls) {
        await headAsync(this.#lf, this.#model, c.hidden, c.rows, this.nVocab).then(c.resolve, c.reject);
      }
    }
  }

  /** The LM-head passes of logitsAsync so far: { passes, calls, rows }. */
  headStats() {
    return { ...this.#headStats };
  }

  /**
   * Each engine thread's time in the last finished forward (or readProbe), in ms, and of it the
   * time spent waiting at barriers for the other threads: [{ jobMs, barrierMs }] per thread.
   * Runs after the forward calls issued before it, whose threads are still writing these.
   * @example const [{ jobMs, barrierMs }] = await node.workerTimings();
   */
  workerTimings() {
    return this.#batcher.exclusive(() => {
      if (!this.#model) throw LayerNode.#closedError('workerTimings');
      return this.#lf.json(this.#lf.fn.lf_model_worker_timings_json(this.#model))
        .map(({ job_ms: jobMs, barrier_ms: barrierMs }) => ({ jobMs, barrierMs }));
    });
  }

  /**
   * Where the session's last forward spent its time, in ms summed over layers: attention, FFN,
   * and serial (outside the engine's threads: validation, copies, hand-over); null for an
   * unknown session.
   * @example node.phaseTimings('chat-1') // { attention: 3.1, ffn: 9.8, serial: 0.2 }
   */
  phaseTimings(id) {
    const timings = this.#timings(id);
    return timings && { attention: timings.attention_ms, ffn: timings.ffn_ms, serial: timings.serial_ms };
  }

  /**
   * Milliseconds each of this node's layers took in the session's last forward call ([] for an
   * unknown session).
   * @example node.layerTimings('chat-1') // [15.6, 1.3]
   */
  layerTimings(id) {
    return this.#timings(id)?.layer_ms ?? [];
  }

  // The session's last forward as the engine timed it, or null for an unknown session.
  #timings(id) {
    const session = this.#idleSession(id, 'timings');
    return session === undefined ? null : this.#lf.json(this.#lf.fn.lf_session_timings_json(session));
  }

  /** The GGUF metadata (large arrays summarized). */
  get metadata() {
    return this.#header.metadata;
  }

  /** The model's configuration as the engine reads it (gguf/header.js readModelInfo). */
  get modelInfo() {
    return this.#header.info;
  }

  /**
   * Positions the session's KV cache holds (its next startPos), or null for an unknown session;
   * while a forward of it runs, the positions held before it.
   */
  sessionLength(id) {
    const session = this.#sessions.get(id) ?? this.#pending.get(id);
    if (session === undefined) return null;
    return this.#running.get(session) ?? this.#lf.fn.lf_session_n_past(session);
  }

  /** Bytes of the session's KV cache (0 for an unknown session). */
  sessionBytes(id) {
    const session = this.#sessions.get(id);
    return session === undefined ? 0 : this.#lf.fn.lf_session_bytes(session);
  }

  /**
   * The ids of the sessions held, least recently used (the next to be evicted) first.
   * @example node.sessions() // ['chat-2', 'chat-1']: 'chat-1' ran last
   */
  sessions() {
    return [...this.#sessions.keys()];
  }

  /**
   * A digest of every byte of the session's KV cache (lf_session_kv_digest), or null for an
   * unknown session: equal digests before and after a call say it left the cache as it was.
   * Refused while a forward of the session runs.
   * @example const before = node.kvDigest('chat-1'); // ... a refused forward ...; node.kvDigest('chat-1') === before
   */
  kvDigest(id) {
    const session = this.#idleSession(id, 'kvDigest');
    return session === undefined ? null : this.#lf.fn.lf_session_kv_digest(session);
  }

  /**
   * Forgets the session (false when unknown). A session the running engine step uses is freed
   * once the step is done with it; a later call for it starts a new one.
   */
  dropSession(id) {
    const session = this.#sessions.get(id) ?? this.#pending.get(id);
    if (session === undefined) return false;
    this.#sessions.delete(id);
    this.#pending.delete(id);
    if (this.#running.has(session)) this.#dropAfterStep.push(session);
    else this.#lf.fn.lf_session_free(session);
    return true;
  }

  /**
   * Cuts the session back to its first nPast positions (docs/forward-pass.md, "Cutting a session
   * back"): its next forward continues at nPast, as if the rest had never been sent. Runs alone,
   * after the forward calls issued before it, so no step is cut mid-run. Cutting to the length
   * it holds changes nothing. Refused, with the session unchanged: an unknown session
   * ('unknown_session', or 'evicted'), nPast beyond its length ('invalid_argument'), a cut deeper
   * than a wrapped sliding ring allows ('failed_precondition', naming the shortest cut). -> nPast
   * @example await node.truncate('chat-1', 12); // node.sessionLength('chat-1') === 12
   */
  truncate(id, nPast) {
    if (!(Number.isInteger(nPast) && nPast >= 0 && nPast <= 0x7fffffff)) {
      return Promise.reject(new LayerfoldError('invalid_argument', `truncate("${id}"): nPast must be a whole number of positions >= 0, not ${nPast}`));
    }
    return this.#batcher.exclusive(() => {
      if (!this.#model) throw LayerNode.#closedError('truncate');
      const session = this.#sessions.get(id);
      if (session === undefined) {
        if (this.#evicted.has(id)) throw new LayerfoldError('evicted', `truncate: session "${id}" was evicted (least recently used): start it again from position 0`);
        throw new LayerfoldError('unknown_session', `truncate: session "${id}" is unknown to this node`);
      }
      if (!this.#lf.fn.lf_session_truncate(session, nPast)) throw this.#lf.lastError();
      return nPast;
    });
  }

  info() {
    return {
      model: this.model, layers: this.layers, nEmbd: this.nEmbd, nVocab: this.nVocab, build: this.#lf.kind,
      kernels: this.#lf.readCString(this.#lf.fn.lf_kernel_isa()), kernelChoice: this.#lf.kernelChoice ?? null,
      threads: this.#model ? this.#lf.fn.lf_model_threads(this.#model) : this.#lf.threads,
      bytesLoaded: this.bytesLoaded, sessions: this.#sessions.size, wasmMemoryBytes: this.#lf.bytes().length,
      kvBytes: [...this.#sessions.keys()].reduce((sum, id) => sum + this.sessionBytes(id), 0),
    };
  }

  /**
   * Frees the model and sessions and stops the module's threads. Not while a forward runs; calls
   * still waiting for a step are refused.
   */
  close() {
    this.tokenizer?.close();
    for (const id of [...this.#sessions.keys(), ...this.#pending.keys()]) this.dropSession(id);
    if (this.#model) this.#lf.fn.lf_model_free(this.#model);
    for (const ptr of this.#buffers) this.#lf.free(ptr);
    this.#buffers = [];
    this.#model = 0;
    const rows = this.#rows;
    this.#rows = null;
    if (rows) Promise.resolve().then(() => rows.close()).catch(() => {});
    this.#lf.close();
  }
}
