// LayerNode: one node of a pipelined model. It holds layers [a, b) of a GGUF (plus the token
// embedding on the first node and the head on the last), one KV cache per session, and runs
// hidden states through them in WASM. This is the runtime-neutral part, with no node: imports,
// so an edge worker can use it: it is handed a loaded module and an opened object source.
// layer_node.js adds Node's defaults (the dist modules, paths and URLs, the disk cache). The
// class is a front over parts with one job each: opening.js (options, header, memory budget,
// load), engine_model.js, sessions.js (and eviction), steps.js (forward calls batched into
// engine steps), head_passes.js, token_inputs.js (embeddings, per-layer inputs), engine_reports.js.
import { cutRefusal, DEFAULT_CHECKPOINTS, keepRefusal } from '../protocol/checkpoints.js';
import { LayerfoldError } from '../wasm/capi.js';
import { EngineReports } from './engine_reports.js';
import { HeadPasses } from './head_passes.js';
import { greedyContinuation } from './drafter.js';
import { openParts } from './opening.js';
import { SessionTable } from './sessions.js';
import { Steps } from './steps.js';
import { TokenInputs } from './token_inputs.js';

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
   * tensor. The inputs' bytes are the same either way. cacheTypeK / cacheTypeV: the KV cache's
   * types, 'f16' (default), 'q8_0' or 'q4_0', stored and attended over as llama.cpp does
   * (docs/attention.md, "Quantized cache"); counted in the memory budget. maxSpan: the rows of the
   * longest media span (an image's soft tokens: forward's span) its sessions take, their sliding
   * rings made that much longer (0, the default: 64). onProgress gets the load's progress
   * (sources/progress.js: {bytes, totalBytes, rate, etaSeconds}, at most every progressIntervalMs)
   * against the bytes of the tensors this node reads, so its last report is at totalBytes: 100%
   * of this node's load. draftSource, on the node holding the head: the source of Gemma 4's MTP
   * drafter for this model (node/drafter.js), loaded beside the head on drafterThreads workers of
   * its own and counted in the memory budget; refused by name when it is another target's or
   * reads a layer's cache this node does not hold (draftAfter() drafts with it).
   * @param {{lf: object, source: object, header?: object, name?: string, layers?: [number, number],
   *          maxContext?: number, withTokenizer?: boolean, maxSessions?: number, maxKvBytes?: number,
   *          memoryBudgetBytes?: number, maxTokens?: number, maxBatchRows?: number, ffnDownLayout?: 'units'|'features',
   *          perLayerTable?: 'rows'|'whole', perLayerRowCacheBytes?: number, cacheTypeK?: 'f16'|'q8_0'|'q4_0',
   *          cacheTypeV?: 'f16'|'q8_0'|'q4_0', maxSpan?: number, onProgress?: (p: object) => void,
   *          progressIntervalMs?: number, draftSource?: object, drafterThreads?: number}} options
   * @example const node = await LayerNode.open({ lf: await instantiateSingleThreadModule(wasm),
   *   source: await R2BindingSource.open(env.MODEL, 'tiny.gguf'), layers: [0, 1], memoryBudgetBytes: 128 * 2 ** 20 });
   */
  static async open(options) {
    return new this(await openParts(options));
  }

  #lf;
  #header;
  #model;     // EngineModel
  #sessions;  // SessionTable
  #steps;     // Steps
  #heads;     // HeadPasses
  #inputs;    // TokenInputs
  #reports;   // EngineReports
  #drafter;   // NodeDrafter | null

  /** The parts of an opened node (opening.js openParts); LayerNode.open makes them. */
  constructor({ lf, header, name, layers, withEmbedding, withHead, maxContext, maxSessions, maxKvBytes, maxBatchRows, memory,
    kvRowsIn, kvRowsOut, ffnDownLayout, cacheTypeK, cacheTypeV, maxSpan, model, tokenizer, rows, drafter = null }) {
    this.#lf = lf;
    this.#header = header;
    this.#model = model;
    this.#drafter = drafter;
    // Its shape and limits, as index.d.ts lists them. memory: the budget check's figures in bytes
    // (null without a budget); maxBatchRows: the rows of one engine step; kvRowsIn / kvRowsOut:
    // the source layers whose K/V rows each forward takes (kvRows) and hands out (kvRowsOf),
    // [{layer, bytesPerToken}] in layer order (docs/forward-pass.md, "Shared KV across nodes");
    // nEmbdPerLayer: the per-layer embedding width (gemma4 E2B/E4B; 0: none); tokenizer: a
    // Tokenizer when opened withTokenizer.
    Object.assign(this, {
      model: name, layers, withEmbedding, withHead, maxContext, maxSessions, maxKvBytes, memory, maxBatchRows, kvRowsIn, kvRowsOut,
      ffnDownLayout, cacheTypeK, cacheTypeV, maxSpan, bytesLoaded: model.bytesLoaded, nEmbd: model.nEmbd, nVocab: model.nVocab, nLayer: model.nLayer,
      nEmbdPerLayer: header.info.n_embd_per_layer ?? 0, tokenizer,
    });
    this.#sessions = new SessionTable(lf, model, { maxContext, maxSessions, maxKvBytes });
    this.#steps = new Steps({ lf, model, sessions: this.#sessions, kvRowsIn, kvRowsOut, maxBatchRows });
    const exclusive = (job) => this.#steps.exclusive(job);
    this.#heads = new HeadPasses(lf, model, exclusive);
    this.#inputs = new TokenInputs(lf, model, rows, this.nEmbdPerLayer);
    this.#reports = new EngineReports(lf, model, this.#sessions, exclusive);
  }

  /** token ids -> hidden [n, n_embd] (first node only). */
  embed(tokens) {
    return this.#inputs.embed(tokens);
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
  perLayerInputs(tokens, hidden) {
    return this.#inputs.perLayerInputs(tokens, hidden);
  }

  /**
   * What reading per_layer_token_embd by rows has cost so far: { reads, bytesRead, rowsRead,
   * cacheHits, cachedBytes, rowBytes }; null on a node that does not read it so.
   * @example node.perLayerRowStats() // { reads: 3, bytesRead: 57120, rowsRead: 6, cacheHits: 2, cachedBytes: 57120, rowBytes: 9520 }
   */
  perLayerRowStats() {
    return this.#inputs.rowStats();
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
   * those layers' K/V rows of the call's positions, { [layer]: Uint8Array [n, bytesPerToken] } in the cache's types,
   * as the source's node handed them out (kvRowsOf); rows of other layers are ignored. span: the
   * call's rows are one media span (an image's soft tokens), which the sliding layers attend both
   * ways (docs/vision.md, "An image in the decoder"); at most maxSpan rows (or 64).
   * @example const out = await node.forward({ session: 'a', startPos: 0, hidden, lastOnly: true });
   */
  forward(call) {
    return this.#steps.forward(call);
  }

  /**
   * The K/V rows of the kvRowsOut layers the forward that answered `out` handed out, every
   * position of the call (also with lastOnly): { [layer]: Uint8Array [n, bytesPerToken] } in the cache's types,
   * the kvRows of the later nodes that mirror those layers; null for a node with no kvRowsOut.
   * @example const kvRows = node.kvRowsOf(await node.forward({ session: 'a', startPos: 0, hidden }));
   */
  kvRowsOf(out) {
    return this.#steps.kvRowsOf(out);
  }

  /**
   * Calls listener({entries, rows, waitMs}) after every engine step of forward calls: how many
   * calls and rows it ran, and each call's wait in ms from forward() to the step starting.
   * Returns the function that stops it.
   * @example const stop = node.observeBatches(({ entries, rows, waitMs }) => console.log(entries, rows, waitMs));
   */
  observeBatches(listener) {
    return this.#steps.observe(listener);
  }

  /**
   * The engine steps of forward calls so far: { batches, entries, rows, maxEntries, maxRows }
   * (totals and the largest step), and the row budget maxBatchRows.
   * @example const { batches, entries } = node.batchStats(); // entries / batches: calls per step
   */
  batchStats() {
    return this.#steps.stats();
  }

  /** What the approximate modes did in the session's last forward (null for an unknown session). */
  approxStats(id) {
    return this.#reports.approxStats(id);
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
    return this.#reports.readProbe();
  }

  /** hidden [rows, n_embd] -> logits [rows, n_vocab] (last node only), on the calling thread's turn. */
  logits(hidden) {
    return this.#heads.logits(hidden);
  }

  /**
   * logits() on the engine's threads without blocking the event loop, in its place among the
   * forward steps: the calls waiting when the engine frees go through the LM head together, one
   * pass over its weights for all their rows (each row's logits are the bytes logits() gives).
   * @example const [a, b] = await Promise.all([node.logitsAsync(h1), node.logitsAsync(h2)]);
   */
  logitsAsync(hidden) {
    return this.#heads.logitsAsync(hidden);
  }

  /**
   * True on a node with a draft model (draftSource): draftAfter() drafts.
   */
  get drafts() {
    return this.#drafter !== null;
  }

  /**
   * Up to k tokens drafted by the MTP drafter after a step of session `id` that just ran here
   * (docs/gateway.md, "Speculative decoding by MTP"): tokens, the step's input tokens of its
   * rows (the first sampled, the rest drafted), hidden [rows, n_embd] its forward's output and
   * logits [rows, n_vocab] its rows' logits. The drafts assume each row's argmax is what is
   * sampled: -> { after, token, ids }, `after` drafted rows kept, `token` sampled next, `ids`
   * drafted after it (node/drafter.js greedyContinuation). ids is [] with k 0 and once the session's
   * drafts stopped (a non-finite drafter state: `stopped` then says why); null on a node
   * without a draft model. Refused: an unknown session, or a step whose rows do not match.
   * @example const { after, token, ids } = node.draftAfter('chat-1', { tokens: [17], hidden, logits, k: 4 });
   */
  draftAfter(id, { tokens, hidden, logits, k }) {
    const drafter = this.#drafter;
    if (!drafter) return null;
    const { nEmbd, nVocab } = this;
    const rows = tokens.length;
    if (!(rows >= 1 && hidden.length === rows * nEmbd && logits.length === rows * nVocab)) {
      throw new LayerfoldError('invalid_argument', `draftAfter("${id}"): ${rows} tokens, ${hidden.length / nEmbd} hidden rows and ` +
        `${logits.length / nVocab} logits rows: a step's rows, one of each per token`);
    }
    if (!(Number.isInteger(k) && k >= 0)) throw new LayerfoldError('invalid_argument', `draftAfter("${id}"): k must be a whole number >= 0, not ${k}`);
    const handle = this.#sessions.idle(id, 'draftAfter');
    if (handle === undefined) throw new LayerfoldError('unknown_session', `draftAfter: session "${id}" is unknown to this node`);
    const { after, token } = greedyContinuation(tokens, logits, nVocab);
    const pos = this.#sessions.length(id) - rows + after + 1;
    const ids = drafter.draft(id, handle, { pos, token, hidden: hidden.subarray(after * nEmbd, (after + 1) * nEmbd), k });
    const stopped = drafter.stoppedWhy(id);
    return { after, token, ids, ...(stopped ? { stopped } : {}) };
  }

  /**
   * logitsAsync(hidden) for session `id`'s step of `tokens` just run here, then draftAfter() its
   * k drafts (null without a draft model): one call, as a remote node answers both.
   * @example const { logits, draft } = await node.logitsAndDraft(hidden, { session: 'chat-1', tokens: [17], k: 4 });
   */
  async logitsAndDraft(hidden, { session, tokens, k }) {
    const logits = await this.logitsAsync(hidden);
    return { logits, draft: this.draftAfter(session, { tokens, hidden, logits, k }) };
  }

  /** The drafts so far (null without a draft model): { drafts, ids, stopped, stoppedSessions }. */
  draftStats() {
    return this.#drafter?.stats() ?? null;
  }

  /** The LM-head passes of logitsAsync so far: { passes, calls, rows }. */
  headStats() {
    return this.#heads.stats();
  }

  /**
   * Each engine thread's time in the last finished forward (or readProbe), in ms, and of it the
   * time spent waiting at barriers for the other threads: [{ jobMs, barrierMs }] per thread.
   * Runs after the forward calls issued before it, whose threads are still writing these.
   * @example const [{ jobMs, barrierMs }] = await node.workerTimings();
   */
  workerTimings() {
    return this.#reports.workerTimings();
  }

  /**
   * Where the session's last forward spent its time, in ms summed over layers: attention, FFN,
   * and serial (outside the engine's threads: validation, copies, hand-over); null for an
   * unknown session.
   * @example node.phaseTimings('chat-1') // { attention: 3.1, ffn: 9.8, serial: 0.2 }
   */
  phaseTimings(id) {
    const timings = this.#reports.timings(id);
    return timings && { attention: timings.attention_ms, ffn: timings.ffn_ms, serial: timings.serial_ms };
  }

  /**
   * Milliseconds each of this node's layers took in the session's last forward call ([] for an
   * unknown session).
   * @example node.layerTimings('chat-1') // [15.6, 1.3]
   */
  layerTimings(id) {
    return this.#reports.timings(id)?.layer_ms ?? [];
  }

  /**
   * True: forwards of one session called at once run in call order (the batcher), so a
   * pipeline may hand a replay's calls over together (RemoteNode's is false).
   */
  get keepsForwardOrder() {
    return true;
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
    return this.#sessions.length(id);
  }

  /** Bytes of the session's KV cache (0 for an unknown session). */
  sessionBytes(id) {
    return this.#sessions.bytes(id);
  }

  /**
   * The ids of the sessions held, least recently used (the next to be evicted) first.
   * @example node.sessions() // ['chat-2', 'chat-1']: 'chat-1' ran last
   */
  sessions() {
    return this.#sessions.ids();
  }

  /**
   * A digest of every byte of the session's KV cache (lf_session_kv_digest), or null for an
   * unknown session: equal digests before and after a call say it left the cache as it was.
   * Refused while a forward of the session runs.
   * @example const before = node.kvDigest('chat-1'); // ... a refused forward ...; node.kvDigest('chat-1') === before
   */
  kvDigest(id) {
    return this.#reports.kvDigest(id);
  }

  /**
   * Forgets the session (false when unknown). A session the running engine step uses is freed
   * once the step is done with it; a later call for it starts a new one.
   */
  dropSession(id) {
    this.#drafter?.forget(id);
    return this.#sessions.drop(id);
  }

  /**
   * Cuts the session back to its first nPast positions (docs/forward-pass.md, "Cutting a session
   * back"): its next forward continues at nPast, as if the rest had never been sent. A cut
   * deeper than a wrapped sliding ring allows returns to the session's latest checkpoint at or
   * before nPast instead (checkpoint()); the caller then forwards the positions from there to
   * nPast again. Runs alone, after the forward calls issued before it, so no step is cut
   * mid-run. Cutting to the length it holds changes nothing. Refused, with the session
   * unchanged: an unknown session ('unknown_session', or 'evicted'), nPast beyond its length
   * ('invalid_argument'), a cut deeper than a wrapped ring allows with no checkpoint before it
   * ('failed_precondition', naming the shortest cut). -> the positions the session then holds
   * @example const held = await node.truncate('chat-1', 12); // 12, or a checkpoint's position before it
   */
  truncate(id, nPast) {
    const refusal = cutRefusal(id, nPast);
    if (refusal) return Promise.reject(refusal);
    return this.#steps.exclusive(() => this.#sessions.truncate(id, nPast));
  }

  /**
   * Keeps a checkpoint of the session at the length it holds once the forward calls issued
   * before this one have run (docs/forward-pass.md, "Checkpoints"): the rows of its sliding
   * rings a continuation from there reads, copied and counted in its bytes, so that a later cut
   * to any position from there on can return to it. At most `keep` (1 to MAX_CHECKPOINTS) are
   * kept; the oldest is dropped beyond. -> the position checkpointed
   * @example await node.checkpoint('chat-1', { keep: 4 });
   */
  checkpoint(id, { keep = DEFAULT_CHECKPOINTS } = {}) {
    const refusal = keepRefusal(id, keep);
    if (refusal) return Promise.reject(refusal);
    return this.#steps.exclusive(() => this.#sessions.checkpoint(id, keep));
  }

  /**
   * What the node says of itself (index.d.ts LayerNodeInfo): its model and layers, its build,
   * kernels and threads, the bytes it loaded, its sessions and their KV bytes.
   * @example node.info().kvBytes // KV-cache bytes of every session held
   */
  info() {
    const lf = this.#lf;
    const ids = this.#sessions.ids();
    return {
      model: this.model, layers: this.layers, nEmbd: this.nEmbd, nVocab: this.nVocab, build: lf.kind,
      kernels: lf.readCString(lf.fn.lf_kernel_isa()), kernelChoice: lf.kernelChoice ?? null, dotForm: lf.dotForm ?? null,
      threads: this.#model.ptr ? lf.fn.lf_model_threads(this.#model.ptr) : lf.threads,
      bytesLoaded: this.bytesLoaded, sessions: ids.length, wasmMemoryBytes: lf.bytes().length,
      kvBytes: ids.reduce((sum, id) => sum + this.sessionBytes(id), 0),
      drafter: this.#drafter && { model: this.#drafter.name, bytesLoaded: this.#drafter.bytes },
    };
  }

  /**
   * Frees the model and sessions and stops the module's threads. Not while a forward runs; calls
   * still waiting for a step are refused.
   */
  close() {
    this.tokenizer?.close();
    this.#sessions.dropAll();
    this.#drafter?.close();
    this.#model.close();
    this.#inputs.close();
    this.#lf.close();
  }
}
