// Types of the layerfold package's public API (src/index.js). Checked by tests/js/repo/types.test.mjs.

/** An engine or host error with a stable code. */
export class LayerfoldError extends Error {
  readonly code:
    | 'invalid_argument' | 'malformed' | 'unsupported' | 'need_more_data' | 'io_error'
    | 'failed_precondition' | 'resource_exhausted' | 'not_found' | 'internal' | 'evicted' | 'over_budget'
    | 'unavailable' | 'unknown_session' | 'position_mismatch' | string;
  constructor(code: string, message: string);
}

/** A Workers R2 binding and the key of the model in it. */
export interface R2Model {
  bucket: {
    head(key: string): Promise<{ size: number; etag?: string; httpEtag?: string } | null>;
    get(key: string, options?: { range?: { offset: number; length: number } }): Promise<unknown>;
  };
  key: string;
}

/** A local path, file://, http(s)://, s3://, r2:// or hf://OWNER/REPO/FILE[@REVISION] URL, or an R2 binding. */
export type ModelLocation = string | R2Model;

export interface Progress {
  bytes: number;
  /** what the load reads: a node's own tensors (LayerNode.open), the whole object (openSource) */
  totalBytes: number;
  /** bytes per second */
  rate: number;
  etaSeconds: number;
}

export interface SourceOptions {
  cacheDir?: string;
  maxCacheBytes?: number;
  revalidate?: boolean;
  onProgress?: (progress: Progress) => void;
  progressIntervalMs?: number;
  /** what the disk cache dropped or could not store, a server with no validator (default: stderr) */
  onWarning?: (message: string) => void;
  retries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  timeoutMs?: number;
  /** load from a server that sends neither ETag nor Last-Modified (refused otherwise; a sample is read again after the load) */
  allowUnvalidatedSource?: boolean;
  endpoint?: string;
  region?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** the Hugging Face hub for hf:// URLs (default: HF_ENDPOINT, else https://huggingface.co) */
  hfEndpoint?: string;
  /** sent to the hub only, never to the CDN it redirects to (default: HF_TOKEN) */
  hfToken?: string;
}

/** Byte-range access to one model file, wherever it lives. */
export interface ObjectSource {
  readonly name: string;
  readonly size: number;
  /** the object's version as the cache keys it (its ETag, or size and mtime / Last-Modified) */
  readonly identity?: string;
  /** what each range read is checked against; a change fails the read with code 'source_changed' */
  readonly validator?: 'etag' | 'last-modified' | 'mtime' | 'size';
  read(start: number, end: number): Promise<Uint8Array>;
  readInto(start: number, end: number, target: Uint8Array): Promise<void>;
  close(): Promise<void>;
  /**
   * Behind the disk cache: the whole object into it (a pull cut short continued, checked against
   * the hub's sha256 when it gives one); later loads read any range from it.
   */
  pull?(options?: { onProgress?: (progress: Progress) => void }): Promise<{ whole: { size: number; sha256: string }; resumedAt: number; fetchedBytes: number }>;
}

export function openSource(model: ModelLocation, options?: SourceOptions): Promise<ObjectSource>;

/** The model's configuration as the engine reads it from the header (js-glue/src/gguf/model_info.schema.json). */
export interface ModelInfo {
  arch: 'gemma3' | 'gemma4';
  n_layer: number;
  n_embd: number;
  n_vocab: number;
  /** the context length the model was trained with */
  n_ctx_train: number;
  /** the sliding window's positions; 0 when no layer slides */
  n_swa: number;
  /** per-layer embedding width (gemma4 E2B/E4B); 0: none */
  n_embd_per_layer: number;
  /** routed experts of a mixture-of-experts layer; 0: none */
  n_expert: number;
  /** experts each token is routed to; 0 without experts */
  n_expert_used: number;
  /** one expert's FFN width; 0 without experts */
  n_ff_exp: number;
  layers: Array<{
    /** sliding-window attention (window n_swa), else global */
    sliding: boolean;
    n_head: number;
    /** KV heads; divides n_head */
    n_head_kv: number;
    head_dim: number;
    /** the (shared) MLP's width */
    n_ff: number;
    /** the layer whose KV cache this one attends over: itself, or a shared-KV layer's source */
    kv_layer: number;
    /** routed experts beside the shared MLP */
    moe: boolean;
  }>;
}

/** A model's GGUF header as read once and shared (Pipeline.header, readModelHeader). */
export interface ModelHeader {
  version: number;
  alignment: number;
  data_offset: number;
  file_size: number;
  /** GGUF key-value pairs, large arrays summarized */
  metadata: Record<string, unknown>;
  tensors: Array<{ name: string; type: string; ne: number[]; offset: number; n_bytes: number }>;
  info: ModelInfo;
  /** the file's first bytes, enough for the parser: a node opened with this header does not read them again */
  bytes: Uint8Array;
  /** the source's identity when the header was read: a node handed the header checks its source is the same */
  identity?: string;
}

/** Reads and parses a model's header (no tensor bytes). */
export function readModelHeader(model: ModelLocation, options?: SourceOptions): Promise<ModelHeader>;

export interface LayerNodeOptions {
  model: ModelLocation;
  /** layers [begin, end); default: all */
  layers?: [number, number];
  /** engine threads on the threaded build; outputs are identical for every count */
  threads?: number;
  build?: 'threaded' | 'single';
  /** positions a session may hold; 0: the model's context length */
  maxContext?: number;
  withTokenizer?: boolean;
  cacheDir?: string;
  onProgress?: (progress: Progress) => void;
  sourceOptions?: SourceOptions;
  maxSessions?: number;
  maxKvBytes?: number;
  /** an already loaded module / opened object source, handed over to the node (edge workers) */
  lf?: unknown;
  source?: ObjectSource;
  /** refuse at open ('over_budget') a node whose memory estimate exceeds this many bytes */
  memoryBudgetBytes?: number;
  /** rows of the largest forward, for the budget's scratch estimate (default 512) */
  maxTokens?: number;
  /** rows of one engine step when concurrent forwards are batched (default maxTokens); a longer call runs alone */
  maxBatchRows?: number;
  /** 'features': ffn_down feature-major, so the top-K gate FFN reads only the kept features (same bytes out) */
  ffnDownLayout?: 'units' | 'features';
  /** the KV cache's K and V types, as llama.cpp's -ctk / -ctv (default 'f16'); counted in the memory budget */
  cacheTypeK?: CacheType;
  cacheTypeV?: CacheType;
  /** rows of the longest media span (an image's soft tokens) a session takes; its sliding rings grow by it (default 0: 64 rows) */
  maxSpan?: number;
  /** the model's header as read before (readModelHeader, Pipeline.header): not read again */
  header?: ModelHeader;
  /** first node with per-layer embeddings: 'rows' (default) reads the table's rows of the tokens seen, by range, cached; 'whole' loads it */
  perLayerTable?: 'rows' | 'whole';
  /** bytes of per_layer_token_embd rows kept (least recently used evicted; default 8 MiB), counted in the memory budget */
  perLayerRowCacheBytes?: number;
  /** load from a server that sends neither ETag nor Last-Modified (refused otherwise; a sample is read again after the load) */
  allowUnvalidatedSource?: boolean;
  /** the node holding the head: Gemma 4's MTP drafter (gemma4-assistant) of this model, loaded beside it and counted in the budget */
  draftModel?: ModelLocation;
  /** an already opened draft model's source, handed over (edge workers), and its threads */
  draftSource?: ObjectSource;
  drafterThreads?: number;
  /** force the relaxed kernels' form of the Q4_0 dot product (same bits; default: the faster here, timed at load) */
  dotForm?: 'dot-add' | 'pairs';
}

/** MTP drafts after a step (LayerNode.draftAfter): assuming each row's argmax is sampled, `after` drafted rows kept, then `token`, then `ids`. */
export interface StepDraft {
  after: number;
  token: number;
  ids: number[];
  /** why the session's drafts stopped (a non-finite drafter state); ids is then empty */
  stopped?: string;
}

export interface BatchReport {
  entries: number;
  rows: number;
  /** per call, ms from forward() to the step starting */
  waitMs: number[];
}

export interface ForwardRequest {
  session: string;
  startPos: number;
  /** [n, n_embd] */
  hidden: Float32Array;
  /** only the last position's output: [1, n_embd] */
  lastOnly?: boolean;
  /** approximate modes for this call (docs/approximate.md); default off: the exact engine */
  approx?: ApproxOptions;
  /** the early-exit state the last row arrives in: the previous node's approxStats().early_exit */
  exitState?: ExitState | null;
  /** models with per-layer embeddings (nEmbdPerLayer > 0): this node's layers' inputs, [layers, n, n_pl] */
  perLayer?: Float32Array | null;
  /** a node with kvRowsIn: each of those source layers' K/V rows of the call's positions, as kvRowsOf gave them */
  kvRows?: KvRows | null;
  /** the rows are one media span (an image's soft tokens), attended both ways on sliding layers; at most the node's maxSpan rows */
  span?: boolean;
}

/** A KV cache type: llama.cpp's f16 (default), q8_0 or q4_0 */
export type CacheType = 'f16' | 'q8_0' | 'q4_0';
/** Source layers' K/V rows of a call's n positions: layer -> [n, bytesPerToken] bytes in the cache's types (docs/forward-pass.md, "Shared KV across nodes"). */
export type KvRows = Record<number, Uint8Array>;

/** A source layer whose K/V rows a node takes or hands out, and their bytes per position. */
export interface KvLayer {
  layer: number;
  bytesPerToken: number;
}

export interface ApproxOptions {
  /** attention over the keys scoring above the row's median only */
  truncatedAttention?: boolean;
  /** a row whose dropped share of the softmax mass exceeds this runs exactly (default 0.15) */
  truncationThreshold?: number;
  /** the last row stops once its relative updates over exitWindow layers sum below exitThreshold */
  earlyExit?: boolean;
  /** 0 never exits; `layerfold calibrate-exit` finds one for a target agreement */
  exitThreshold?: number;
  /** layers whose updates are summed, 1 to 16 (default 2) */
  exitWindow?: number;
  /** top-K gate FFN: features kept per row, a fraction of n_ff (<= 1) or a count (> 1); 0: off */
  ffnTopK?: number;
  /** per-layer K by absolute layer index, over ffnTopK */
  ffnTopKLayers?: Record<string, number>;
  /** a row whose dropped share of sum |gelu(gate)| exceeds this runs dense (default 0.1) */
  ffnTopKThreshold?: number;
}

export interface ExitState {
  /** the layer after which the row exited; -1: it has not */
  exit_layer: number;
  /** its last relative updates, oldest first */
  recent_updates: number[];
}

export interface ApproxStats {
  truncated_attention: {
    rows: number; truncated_rows: number; fallback_rows: number; v_keys_total: number; v_keys_kept: number;
    v_work_skipped: number; max_dropped_mass: number; max_error_bound: number;
  };
  ffn_top_k: {
    rows: number; fallback_rows: number; features_total: number; features_kept: number; features_skipped: number;
    max_dropped_gate_mass: number;
  };
  early_exit: ExitState & {
    /** the last row's relative update per layer of this node (-1 where it had exited) */
    row_updates: number[];
    layers_skipped: number;
  };
}

export interface LayerNodeInfo {
  /** where the weights came from (path, URL, or bucket/key) */
  model: string;
  layers: [number, number];
  nEmbd: number;
  nVocab: number;
  build: 'threaded' | 'single';
  /** the matmul kernels of the loaded module: 'wasm-relaxed-simd' (Node 22+), 'wasm-simd128', ... */
  kernels: string;
  /** why those kernels: the capability probe's reason (relaxed SIMD validated, relaxed_madd fused), or the caller's choice */
  kernelChoice: string | null;
  /** the relaxed kernels' form of the Q4_0 dot product (same bits): form null where no relaxed kernels run; times (ms) where timed at load */
  dotForm: { form: 'dot-add' | 'pairs' | null; reason: string; dotAddMs?: number; pairsMs?: number } | null;
  threads: number;
  bytesLoaded: number;
  sessions: number;
  wasmMemoryBytes: number;
  kvBytes: number;
  /** the draft model beside the head; null without one */
  drafter: { model: string; bytesLoaded: number } | null;
}

/** What every node of a pipeline, local or remote, says of itself. */
export interface NodeShape {
  /** layers [begin, end) */
  readonly layers: [number, number];
  readonly withEmbedding: boolean;
  readonly withHead: boolean;
  readonly nEmbd: number;
  readonly nVocab: number;
  readonly nLayer: number;
  /** the source layers whose K/V rows each forward takes (the node mirrors their caches) */
  readonly kvRowsIn: KvLayer[];
  /** the source layers whose new K/V rows each forward hands out */
  readonly kvRowsOut: KvLayer[];
  /** the types its KV cache holds K and V in, which its K/V rows travel in */
  readonly cacheTypeK: CacheType;
  readonly cacheTypeV: CacheType;
  /** rows of the longest media span its sessions take (LayerNodeOptions.maxSpan) */
  readonly maxSpan: number;
  /** true when forwards of one session called at once run in call order (a LayerNode's batcher); false for a RemoteNode */
  readonly keepsForwardOrder: boolean;
  /** true on the node holding the head with a draft model: logitsAndDraft() drafts */
  readonly drafts: boolean;
  /** a step's logits, and up to k MTP drafts after it (null without a draft model), in one call */
  logitsAndDraft(hidden: Float32Array, options: { session: string; tokens: number[]; k: number }): Promise<{ logits: Float32Array; draft: StepDraft | null }>;
}

export interface LayerNode extends NodeShape {}
export class LayerNode {
  static open(options: LayerNodeOptions): Promise<LayerNode>;
  readonly model: string;
  readonly bytesLoaded: number;
  readonly tokenizer: Tokenizer | null;
  readonly metadata: Record<string, unknown>;
  readonly modelInfo: ModelInfo;
  /** positions a session may hold; 0: the model's context length */
  readonly maxContext: number;
  readonly maxSessions: number;
  /** KV-cache bytes of all sessions before the least recently used are evicted */
  readonly maxKvBytes: number;
  readonly ffnDownLayout: 'units' | 'features';
  /** the memory estimate checked against memoryBudgetBytes, when one was given */
  readonly memory: { budgetBytes: number; neededBytes: number; baseBytes: number; maxTokens: number;
                     weights: number; kvCache: number; scratch: number; relayout: number;
                     rowBytes: number; rowCache: number; drafter?: number } | null;
  /** token ids -> hidden [n, n_embd] (first node) */
  embed(tokens: ArrayLike<number>): Float32Array;
  /** per-layer embedding width (gemma4 E2B/E4B); 0: the model has none */
  readonly nEmbdPerLayer: number;
  /** token ids and their embed() -> every layer's per-layer input [n_layer, n, nEmbdPerLayer] (first node) */
  perLayerInputs(tokens: ArrayLike<number>, hidden: Float32Array): Promise<Float32Array>;
  /** reading per_layer_token_embd by rows so far; null when the node does not read it so */
  perLayerRowStats(): { reads: number; bytesRead: number; rowsRead: number; cacheHits: number;
                        cachedBytes: number; rowBytes: number } | null;
  /** concurrent calls of different sessions run together as one engine step (each its bytes alone) */
  forward(request: ForwardRequest): Promise<Float32Array>;
  /** the kvRowsOut rows the forward that answered `out` handed out, every position of its call; null without kvRowsOut */
  kvRowsOf(out: Float32Array): KvRows | null;
  /** the row budget of one engine step */
  readonly maxBatchRows: number;
  /** called after each engine step of forwards: its calls, rows, and each call's wait (ms) for it; returns the unsubscribe */
  observeBatches(listener: (batch: BatchReport) => void): () => boolean;
  /** the engine steps of forwards so far: totals and the largest */
  batchStats(): { batches: number; entries: number; rows: number; maxEntries: number; maxRows: number; maxBatchRows: number };
  /** hidden [rows, n_embd] -> logits [rows, n_vocab] (last node) */
  logits(hidden: Float32Array): Float32Array;
  /** logits() on the engine's threads; concurrent calls share one pass over the LM head */
  logitsAsync(hidden: Float32Array): Promise<Float32Array>;
  /** the LM-head passes of logitsAsync so far */
  headStats(): { passes: number; calls: number; rows: number };
  /**
   * up to k MTP drafts after session's step of `tokens` that just ran here (its rows' hidden
   * [rows, n_embd] and logits [rows, n_vocab]); null without a draft model
   */
  draftAfter(session: string, step: { tokens: number[]; hidden: Float32Array; logits: Float32Array; k: number }): StepDraft | null;
  /** the drafts so far; null without a draft model */
  draftStats(): { drafts: number; ids: number; stopped: number; stoppedSessions: number } | null;
  layerTimings(session: string): number[];
  phaseTimings(session: string): { attention: number; ffn: number; serial: number } | null;
  /** each engine thread's time in the last finished forward, and of it the time waiting at barriers */
  workerTimings(): Promise<{ jobMs: number; barrierMs: number }[]>;
  /** every byte of the node's layer weights read once on its threads: the ceiling decode is measured against */
  readProbe(): Promise<{ bytes: number; ms: number; gbPerSecond: number; checksum: number }>;
  /** what the approximate modes did in the session's last forward; null for an unknown session */
  approxStats(session: string): ApproxStats | null;
  /** Positions the session's KV cache holds (its next startPos); null for an unknown session. */
  sessionLength(session: string): number | null;
  sessionBytes(session: string): number;
  /** the ids of the sessions held, least recently used (the next evicted) first */
  sessions(): string[];
  /** a digest of every byte of the session's KV cache; null for an unknown session */
  kvDigest(session: string): number | null;
  /**
   * Cuts the session back to its first nPast positions, after the forwards issued before it.
   * Deeper than a wrapped sliding ring allows, it returns to the latest checkpoint before nPast
   * instead, and the caller forwards the positions from there again; refused (session
   * unchanged) beyond its length or with no such checkpoint (failed_precondition, naming the
   * shortest cut). Resolves with the positions the session then holds.
   */
  truncate(session: string, nPast: number): Promise<number>;
  /**
   * keeps a checkpoint of the session at its length (at most `keep`, 1 to 8, default 4; the oldest
   * dropped beyond): a later truncate deeper than the sliding rings allow returns to the latest
   * checkpoint before it and resolves with its position. -> the position checkpointed
   */
  checkpoint(session: string, options?: { keep?: number }): Promise<number>;
  dropSession(session: string): boolean;
  info(): LayerNodeInfo;
  close(): void;
}

export interface NodeTiming {
  layers: [number, number];
  /** the node's URL when it is remote */
  url?: string;
  ms: number;
  layerMs: number[];
  /** what the approximate modes did on this node, when the pipeline has them on */
  approx?: ApproxStats | null;
}

/** A layer node served over HTTP (docs/http-api.md), in LayerNode's shape. */
export interface RemoteNode extends NodeShape {}
export class RemoteNode {
  /** Waits up to readyTimeoutMs for the node to be ready; an address nothing answers at fails at once. */
  static open(url: string, options?: { authToken?: string; timeoutMs?: number; readyTimeoutMs?: number }): Promise<RemoteNode>;
  readonly url: string;
  embed(tokens: ArrayLike<number>): Promise<Float32Array>;
  /** the per-layer inputs the node answered with the embed() that gave `hidden` */
  perLayerInputs(tokens: ArrayLike<number>, hidden: Float32Array): Float32Array;
  forward(request: ForwardRequest): Promise<Float32Array>;
  /** as LayerNode.kvRowsOf: the rows the node answered with that forward */
  kvRowsOf(out: Float32Array): KvRows | null;
  logits(hidden: Float32Array): Promise<Float32Array>;
  /** logits(): the node's server shares LM-head passes among concurrent requests */
  logitsAsync(hidden: Float32Array): Promise<Float32Array>;
  layerTimings(session: string): number[];
  approxStats(session: string): ApproxStats | null;
  /** POST /v1/sessions/{id}/truncate: LayerNode.truncate on the node (errors carry the node's code) */
  truncate(session: string, nPast: number): Promise<number>;
  /** POST /v1/sessions/{id}/checkpoint: LayerNode.checkpoint on the node */
  checkpoint(session: string, options?: { keep?: number }): Promise<number>;
  dropSession(session: string): Promise<boolean>;
  info(): Omit<LayerNodeInfo, 'bytesLoaded'> & { url: string };
  close(): void;
}

/** A tensor-parallel group (--nodes tp(...)) as one pipeline node: docs/tensor-parallel.md */
export interface GroupNode {
  /** tp(URL,...) of its members, or tp(local*S) */
  readonly url: string;
  readonly layers: [number, number];
  readonly nEmbd: number;
  readonly nLayer: number;
  readonly nVocab: number;
  forward(call: { session: string; startPos: number; hidden: Float32Array; lastOnly?: boolean; perLayer?: Float32Array | null }): Promise<Float32Array>;
  dropSession(session: string): Promise<void>;
  close(): void;
}

export interface PipelineOptions {
  /** the GGUF: its header gives the tokenizer and layer count; local nodes load tensors from it */
  model: string;
  /**
   * "local:0-29,http://10.0.0.7:8080" (local ranges inclusive; default one local node with every
   * layer); a tensor-parallel group between plain nodes: "tp(http://a:8080,http://b:8080)" (its
   * members' servers, serve --shard) or "tp(local:10-19*2)" (members in this process)
   */
  nodes?: string;
  threads?: number;
  build?: 'threaded' | 'single';
  /** the KV cache types of local nodes (LayerNodeOptions) */
  cacheTypeK?: CacheType;
  cacheTypeV?: CacheType;
  /** the longest media span (stepMedia) the local nodes take (LayerNodeOptions.maxSpan) */
  maxSpan?: number;
  cacheDir?: string;
  onProgress?: (progress: Progress, node: number) => void;
  /** bearer token for remote nodes */
  authToken?: string;
  nodeTimeoutMs?: number;
  nodeReadyTimeoutMs?: number;
  /** how long a group's remote member may take over one phase of a call (default nodeTimeoutMs, else 30 s) */
  memberDeadlineMs?: number;
  /** per local node */
  maxSessions?: number;
  /** how the local first node reads per_layer_token_embd (LayerNodeOptions) */
  perLayerTable?: 'rows' | 'whole';
  perLayerRowCacheBytes?: number;
  /** approximate modes for every forward of every node, replays included (default off) */
  approx?: ApproxOptions;
  /** load from a server that sends neither ETag nor Last-Modified (refused otherwise; a sample is read again after the load) */
  allowUnvalidatedSource?: boolean;
  /** Gemma 4's MTP drafter, loaded beside the head by the last node, which must be local */
  draftModel?: ModelLocation;
}

export class Pipeline {
  static open(options: PipelineOptions): Promise<Pipeline>;
  readonly nodes: Array<LayerNode | RemoteNode | GroupNode>;
  readonly tokenizer: Tokenizer;
  /** the model's header, read once and handed to the local nodes */
  readonly header: ModelHeader;
  /** how many times a node's session was rebuilt by replaying its history */
  readonly replays: number;
  readonly approx: ApproxOptions;
  /** the same nodes with other approximate modes; sessions of its own; close() the original */
  withApprox(approx: ApproxOptions): Pipeline;
  /**
   * Runs new tokens of a session through every node: the last position's logits and timings;
   * with `allRows`, every position's logits of the step ([tokens.length, n_vocab], each row the
   * bytes a step ending there gives). After a failed step, step(session, []) finishes it. Steps
   * of different sessions run concurrently through the nodes; a session's own steps run in call order.
   */
  step(session: string, tokens: number[], options?: { allRows?: boolean; logits?: true; draft?: number }): Promise<{ logits: Float32Array; draft: StepDraft | null; timings: NodeTiming[]; embedMs: number; headMs: number }>;
  /** with `logits: false` the positions only go into the caches (a prompt prefilled in parts): no head runs */
  step(session: string, tokens: number[], options: { logits: false }): Promise<{ logits: null; draft: null; timings: NodeTiming[]; embedMs: number; headMs: number }>;
  /**
   * step() for a media item's rows [n, n_embd] (an image's soft-token embeddings) at the session's
   * next positions; span: attended both ways on the sliding layers (every node's maxSpan must hold
   * them). A cut inside the item is refused.
   */
  stepMedia(session: string, item: { rows: Float32Array; span: boolean }, options?: { allRows?: boolean; logits?: boolean }): Promise<{ logits: Float32Array | null; draft: null; timings: NodeTiming[]; embedMs: number; headMs: number }>;
  /** true when the last node holds a draft model: step() with `draft: k` answers k MTP drafts after the step */
  readonly drafts: boolean;
  /**
   * Cuts the session back to its first n positions on every node and in its history, after its
   * steps asked for before. A node that refuses the cut (a wrapped sliding ring) or lost the
   * session has it dropped, to be rebuilt from the shortened history at the next step: those
   * nodes are listed in `rebuilt`. Refused for an unknown session, beyond its length, and with early exit on.
   */
  truncate(session: string, n: number): Promise<{ nPast: number; rebuilt: number[] }>;
  /**
   * keeps a checkpoint of the session on every node (LayerNode.checkpoint), so that a later cut
   * deeper than the sliding rings allow costs a replay from the checkpoint, not from the start.
   * -> the indices of the nodes that took one
   */
  checkpoint(session: string, options?: { keep?: number }): Promise<number[]>;
  /** forgets the session on every node once its steps asked for before have ended */
  dropSession(session: string): Promise<void>;
  /** drops every session once its steps under way have ended, then closes the local nodes */
  close(): Promise<void>;
}

export class Tokenizer {
  readonly nVocab: number;
  /** -1 when the vocabulary has none */
  readonly bos: number;
  readonly eos: number;
  /** the most input bytes one token stands for (its longest text); 0 when the vocabulary gives no bound */
  readonly maxTokenBytes: number;
  /**
   * untrusted: byte spans [begin0, end0, begin1, end1, ...], sorted and disjoint, whose text never
   * becomes a control or marker token while the rest is parsed as with parseSpecial (a rendered chat)
   */
  encode(text: string | Uint8Array, options?: { addBos?: boolean; parseSpecial?: boolean; untrusted?: ArrayLike<number> | null }): number[];
  decode(ids: number[], options?: { special?: boolean }): string;
  /** the token's vocabulary text, e.g. "▁Hello" */
  piece(id: number): string;
  close(): void;
}

export function logSoftmax(logits: ArrayLike<number>): Float64Array;
export function topK(values: ArrayLike<number>, k: number): number[];

/** Hooks through which a host observes the layer-node app (metrics, logs). */
export interface LayerNodeObserver {
  request?(method: string, route: string, status: number, ms: number): void;
  tokens?(n: number): void;
  layers?(firstLayer: number, msPerLayer: number[]): void;
  error?(code: string, message: string): void;
  /** an answer that did not reach its client: it went away, stopped reading (stalled), or the answer failed midway */
  answerLost?(route: string, outcome: 'cancelled' | 'stalled' | 'failed', message: string): void;
  /** after each engine step of forwards (LayerNode.observeBatches) */
  batch?(batch: BatchReport): void;
  /** serves GET /metrics when present */
  metrics?(): Promise<{ contentType: string; text: string }>;
}

/** Where a layer node's process is: loading (with progress), ready, or shutting down. */
export interface LayerNodeState {
  node: LayerNode | null;
  progress: { bytes: number; totalBytes: number };
  shuttingDown: boolean;
  readonly ready: boolean;
}

export interface LayerNodeAppOptions {
  /** a loaded node (or give `state` for one that is still loading) */
  node?: LayerNode;
  state?: LayerNodeState;
  /** when set, /v1/* and /metrics need `Authorization: Bearer <token>`; one word of visible ASCII (an empty one is a TypeError) */
  authToken?: string;
  /** rows per request (body limit: maxTokens · n_embd · 4 bytes); default 2048 */
  maxTokens?: number;
  /** requests admitted besides one before 429 (each holds its place until its answer is read); default 16 */
  maxQueue?: number;
  /** logits one request may ask for, rows × n_vocab × 4 bytes; default 64 MiB */
  maxLogitsBytes?: number;
  /** a body must arrive within this once admitted (408 beyond); default 30000 */
  bodyTimeoutMs?: number;
  /** a client reading nothing of an answer this long is cut off (closeConnection); default 30000 */
  sendTimeoutMs?: number;
  /** closes the connection of a request (given the Hono context) whose client stopped reading */
  closeConnection?: (context: unknown) => void;
  observer?: LayerNodeObserver;
}

/** The layer node's HTTP API (docs/http-api.md) as a Hono app: web-standard fetch(Request) -> Response. */
export function createLayerNodeApp(options: LayerNodeAppOptions): LayerNodeApp;

/**
 * A Hono app. Typed structurally: the package's types do not assume the DOM/fetch lib, so
 * Request and Response appear as unknown here.
 */
export interface LayerNodeApp {
  /** (Request, env?, executionContext?) -> Response | Promise<Response> */
  fetch(request: unknown, env?: unknown, executionContext?: unknown): unknown;
}

export interface ServeOptions {
  model: ModelLocation;
  /** layers [begin, end); default: all */
  layers?: [number, number];
  threads?: number;
  build?: 'threaded' | 'single';
  /** default 8080; 0 picks a free port */
  port?: number;
  /** default 0.0.0.0 (which needs authToken, or insecureNoAuth) */
  host?: string;
  cacheDir?: string;
  maxSessions?: number;
  maxKvBytes?: number;
  maxContext?: number;
  maxTokens?: number;
  maxQueue?: number;
  /** rows of one engine step when concurrent forwards are batched (default 512) */
  maxBatchRows?: number;
  /** LayerNodeAppOptions' limits */
  maxLogitsBytes?: number;
  bodyTimeoutMs?: number;
  sendTimeoutMs?: number;
  /** without it, `host` must be a loopback address unless insecureNoAuth */
  authToken?: string;
  /** serve without authToken on a non-loopback host (logged as a WARNING); default false */
  insecureNoAuth?: boolean;
  /** load from a server that sends neither ETag nor Last-Modified (refused otherwise; a sample is read again after the load) */
  allowUnvalidatedSource?: boolean;
  /** how long shutdown() waits for requests in flight; default 10000 */
  shutdownTimeoutMs?: number;
  /** how ffn_down is laid out (LayerNodeOptions.ffnDownLayout); default 'units' */
  ffnDownLayout?: 'units' | 'features';
  /** LayerNodeOptions.cacheTypeK / cacheTypeV; default 'f16' */
  cacheTypeK?: CacheType;
  cacheTypeV?: CacheType;
  /** LayerNodeOptions.maxSpan: the longest media span a forward may carry */
  maxSpan?: number;
  /** LayerNodeOptions.perLayerRowCacheBytes */
  perLayerRowCacheBytes?: number;
  /** LayerNodeOptions.draftModel: the MTP drafter beside the head (the node serving the last layer) */
  draftModel?: ModelLocation;
  /** one structured log line per event; default JSON lines on stdout (readable lines when stdout is a terminal) */
  log?: (severity: string, message: string, fields?: Record<string, unknown>) => void;
}

export interface ServedNode {
  url: string;
  port: number;
  state: LayerNodeState;
  /** the HTTP app the server mounts */
  app: LayerNodeApp;
  /** the listening node:http server */
  server: unknown;
  /** settles once the weights are loaded (or failed to load) */
  loaded: Promise<LayerNode>;
  /** stops accepting, waits for requests in flight, frees the node: resolves with the requests cut at the deadline */
  shutdown(): Promise<number>;
}

/** Serves a layer node over HTTP at once, loading its weights in the background. */
export function serve(options: ServeOptions): Promise<ServedNode>;

/** Hooks through which a host observes the gateway app (metrics, logs). */
export interface GatewayObserver {
  request?(method: string, route: string, status: number, ms: number): void;
  /** an admitted request's prompt tokens, and how many of them a kept session already held */
  promptTokens?(n: number, cached: number): void;
  firstToken?(ms: number): void;
  interToken?(ms: number): void;
  /** a finished generation's tokens drafted by prompt lookup, and how many of them were kept */
  drafts?(drafted: number, accepted: number): void;
  /** a generation's end: its completion tokens, or null when it was stopped (client gone, deadline, failure) */
  finished?(completionTokens: number | null, ms: number): void;
  error?(type: string, code: string | null, message: string): void;
  /** serves GET /metrics when present */
  metrics?(): Promise<{ contentType: string; text: string }>;
}

/** Where a gateway process is: opening its pipeline, ready, or draining. */
export interface GatewayState {
  node: Pipeline | null;
  shuttingDown: boolean;
  readonly ready: boolean;
}

export interface GatewayAppOptions {
  /** the state whose node is the open Pipeline */
  state: GatewayState;
  /** the model's id in /v1/models; requests must name it */
  modelId: string;
  /** when set, /v1/* and /metrics need `Authorization: Bearer <token>` (the clients' API key) */
  authToken?: string;
  /** requests admitted besides one before 429 with Retry-After; default 16 */
  maxQueue?: number;
  /** finished requests' sessions kept for prefix reuse; default 16 */
  maxCachedSessions?: number;
  /** checkpoints a chat's session keeps on each node (Model's); default 4 */
  checkpoints?: number;
  /** a request's deadline (504 deadline_exceeded); default 600000 */
  requestTimeoutMs?: number;
  /** request body limit; default 4 MiB */
  maxBodyBytes?: number;
  bodyTimeoutMs?: number;
  /** a stream whose client reads nothing this long is cut off (closeConnection); default 30000 */
  sendTimeoutMs?: number;
  /** decode with drafts by prompt lookup (docs/gateway.md); default null: off */
  speculative?: SpeculativeOptions | null;
  /**
   * a prompt's token ids from its input (the text's UTF-8 bytes, addBos, parseSpecial, untrusted spans),
   * tokenized off the event loop; default: tokenized inline
   */
  encodePrompt?: (input: { bytes: Uint8Array; addBos: boolean; parseSpecial: boolean; untrusted: number[] | null }) => Promise<number[]> | number[];
  /**
   * the grammar engine of the pipeline's vocabulary for response_format and enforced tool calls
   * (src/tokens/grammar/engine.js's GrammarEngine, or the Node host's GrammarThread, which runs one
   * off the event loop); default: none, and those requests get a 400
   */
  openGrammar?: (pipeline: Pipeline, endIds: Set<number>) => unknown;
  closeConnection?: (context: unknown) => void;
  observer?: GatewayObserver;
}

/** Prompt lookup's settings: the n-gram lengths looked up (default 3..5) and the most tokens drafted at once (default 8; the gateway command allows at most 64, what a sliding ring can always cut back). */
export interface SpeculativeOptions {
  minNgram?: number;
  maxNgram?: number;
  maxDraft?: number;
  /** draft with the MTP drafter on the pipeline's last node too (its draftModel, or a remote node's serve --draft-model) */
  mtp?: boolean;
}

/** OpenAI's error shape: what Model.chat/complete reject with and the gateway sends ({error: {...}}). */
export class OpenAIError extends Error {
  constructor(status: number, message: string, more?: { param?: string | null; code?: string | null; headers?: Record<string, string> });
  /** the HTTP status the gateway answers with: 400 a bad field, 429 the line is full, 502 a node failed, … */
  readonly status: number;
  readonly type: string;
  /** the request field at fault, e.g. "temperature" or "messages[0].role" */
  readonly param: string | null;
  readonly code: string | null;
  toJSON(): { error: { message: string; type: string; param: string | null; code: string | null } };
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface Tool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export type ChatMessage =
  | { role: 'system' | 'developer' | 'user'; content: string | Array<{ type: 'text'; text: string }>; name?: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ToolCall[]; reasoning_content?: string; name?: string }
  | { role: 'tool'; content: string; tool_call_id?: string; name?: string };

/** What the declarations need of an AbortSignal (they name no DOM or Node types); pass a real one. */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason?: unknown;
}

/** The fields of OpenAI's request bodies both calls take (the gateway's, docs/gateway.md), and the signal that stops the request. */
export interface GenerationOptions {
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  repetition_penalty?: number;
  /** {"token id": bias in [-100, 100]} */
  logit_bias?: Record<string, number>;
  /** the same request with the same seed samples the same tokens */
  seed?: number;
  stop?: string | string[];
  /** choices, 1 to 8, sampled one after another on one prefill */
  n?: number;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  /** an AbortSignal: stops the request at its next step; the call rejects with the signal's reason */
  signal?: AbortSignalLike;
}

export interface ChatOptions extends GenerationOptions {
  tools?: Tool[];
  tool_choice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };
  parallel_tool_calls?: boolean;
  response_format?: { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; json_schema: { name: string; schema?: Record<string, unknown>; strict?: boolean } };
  logprobs?: boolean;
  top_logprobs?: number;
  /** Gemma 4's thinking switch: "none" off, any other effort on */
  reasoning_effort?: 'none' | 'minimal' | 'low' | 'medium' | 'high';
  chat_template_kwargs?: { enable_thinking?: boolean };
  /** the thought channel closed after this many tokens (llama.cpp's name; thinking_budget_tokens too) */
  reasoning_budget_tokens?: number;
  thinking_budget_tokens?: number;
  reasoning_budget_message?: string;
}

export interface CompletionOptions extends GenerationOptions {
  /** the alternatives per token, 0 to 5 (OpenAI's legacy field) */
  logprobs?: number;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  completion_tokens_details: { accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

/** llama.cpp's server timings (docs/gateway.md, "Timings") */
export interface Timings {
  cache_n: number;
  prompt_n: number;
  prompt_ms: number;
  prompt_per_token_ms: number;
  prompt_per_second: number;
  predicted_n: number;
  predicted_ms: number;
  predicted_per_token_ms: number;
  predicted_per_second: number;
  draft_n?: number;
  draft_n_accepted?: number;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: { role: 'assistant'; content: string | null; reasoning_content?: string; tool_calls?: ToolCall[]; refusal: null };
    logprobs: unknown;
    finish_reason: FinishReason;
  }>;
  usage: Usage;
  timings: Timings;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: { role?: 'assistant'; content?: string | null; reasoning_content?: string; tool_calls?: Array<ToolCall & { index: number }> };
    logprobs?: unknown;
    finish_reason: FinishReason | null;
  }>;
  /** on the usage chunk (stream_options.include_usage) */
  usage?: Usage | null;
  /** on the stream's last chunk */
  timings?: Timings;
}

export interface TextCompletion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ index: number; text: string; logprobs: unknown; finish_reason: FinishReason | null }>;
  usage?: Usage | null;
  timings?: Timings;
}

export interface ModelOptions {
  /** the model's name in the answers; default general.name */
  id?: string;
  /** requests admitted besides one (a 429 OpenAIError beyond); default 16 */
  maxQueue?: number;
  /** finished conversations' sessions kept for prefix reuse; default 16 */
  maxCachedSessions?: number;
  /** decode with drafts by prompt lookup; default off */
  speculative?: SpeculativeOptions | null;
  /** checkpoints a chat's session keeps on each node, one where each prompt opens the model's turn (0: none; default 4, at most 8) */
  checkpoints?: number;
}

/**
 * A model to chat with over an open pipeline (local nodes, remote ones or both): OpenAI's
 * request fields in, its response objects out, whole or streamed; the gateway serves the same.
 * A later turn of a conversation continues the earlier turn's session (only the new tokens are
 * prefilled); requests run concurrently.
 */
export class Model {
  /** over a pipeline the caller opened and closes; openGrammar as GatewayAppOptions' (response_format, enforced tool calls) */
  constructor(pipeline: Pipeline, options?: ModelOptions & { openGrammar?: (pipeline: Pipeline, endIds: Set<number>) => unknown; onClose?: () => Promise<void> });
  readonly id: string;
  readonly pipeline: Pipeline;
  readonly tokenizer: Tokenizer;
  /** whether make-model made the model (random weights) */
  readonly synthetic: boolean;
  chat(messages: ChatMessage[], options: ChatOptions & { stream: true }): AsyncIterable<ChatCompletionChunk>;
  chat(messages: ChatMessage[], options?: ChatOptions & { stream?: false }): Promise<ChatCompletion>;
  /** text (BOS added, control tokens parsed, as llama.cpp's server does) or token ids */
  complete(prompt: string | number[], options: CompletionOptions & { stream: true }): AsyncIterable<TextCompletion>;
  complete(prompt: string | number[], options?: CompletionOptions & { stream?: false }): Promise<TextCompletion>;
  /** openModel's: closes its pipeline; a constructed Model's: its onClose */
  close(): Promise<void>;
}

/**
 * Opens the pipeline (Pipeline.open's options) and a Model over it, its grammar engine on a
 * worker thread.
 * @example
 * const model = await openModel({ model: 'gemma.gguf' });
 * for await (const chunk of model.chat([{ role: 'user', content: 'Hi' }], { stream: true, max_tokens: 64 })) {
 *   process.stdout.write(chunk.choices[0]?.delta.content ?? '');
 * }
 * await model.close();
 */
export function openModel(options: PipelineOptions & ModelOptions): Promise<Model>;

/** The OpenAI-compatible API (docs/gateway.md) as a Hono app: web-standard fetch(Request) -> Response. */
export function createGatewayApp(options: GatewayAppOptions): LayerNodeApp;

export interface GatewayOptions {
  model: ModelLocation;
  /** Pipeline.open's spec, e.g. "local:0-0,http://10.0.0.7:8080"; default one local node */
  nodes?: string;
  modelId: string;
  threads?: number;
  build?: 'threaded' | 'single';
  cacheDir?: string;
  /** default 8000; 0 picks a free port */
  port?: number;
  /** default 127.0.0.1 (any other host needs authToken, or insecureNoAuth) */
  host?: string;
  authToken?: string;
  /** the remote nodes' bearer token */
  nodesAuthToken?: string;
  insecureNoAuth?: boolean;
  /** load from a server that sends neither ETag nor Last-Modified (refused otherwise; a sample is read again after the load) */
  allowUnvalidatedSource?: boolean;
  maxQueue?: number;
  maxCachedSessions?: number;
  /** checkpoints a chat's session keeps on each node (Model's); default 4 */
  checkpoints?: number;
  /** sessions a local node holds */
  maxSessions?: number;
  requestTimeoutMs?: number;
  sendTimeoutMs?: number;
  /** how long shutdown() waits for the requests under way; default 10000 */
  shutdownTimeoutMs?: number;
  /** decode with drafts by prompt lookup; default null: off */
  speculative?: SpeculativeOptions | null;
  /** with speculative.mtp: the MTP drafter the local last node loads */
  draftModel?: ModelLocation;
  log?: (severity: string, message: string, fields?: Record<string, unknown>) => void;
}

export interface ServedGateway {
  url: string;
  port: number;
  state: GatewayState;
  app: LayerNodeApp;
  /** the listening node:http server */
  server: unknown;
  /** settles once the pipeline is open (or failed to open) */
  opened: Promise<Pipeline>;
  /** drains: stops accepting, waits for the requests under way, closes the pipeline; resolves with the requests cut at the deadline */
  shutdown(): Promise<number>;
}

/** Serves the OpenAI-compatible API over a pipeline at once, opening the pipeline in the background. */
export function serveGateway(options: GatewayOptions): Promise<ServedGateway>;
