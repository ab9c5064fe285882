// A pipeline of layer nodes, local (in this process) or remote (HTTP): the first embeds, each
// runs its layers, the last computes logits. Per session it keeps what it sent each node (the
// tokens for the first, the hidden states for the others), so a node that lost the session (a
// restart, an eviction, a replacement instance) gets its cache rebuilt by replaying that
// history, and the output is the same as if nothing had happened. Steps of different sessions
// run concurrently, and a node is handed at most its share of them at once (node_share.js), so
// with many sessions in flight node k works on one group of sessions' steps (one at a time, or as
// one batch where the node batches) while node k+1 works on another's; a session's own steps
// run one after another, in call order. A step's signal (its request's deadline, its client
// going away) reaches every call it makes: a remote call ends when it fires, a wait for a node's
// share too, and no further node is called. No node: imports, so an edge worker builds one over
// remote nodes (edge/edge_gateway.js); Pipeline.open (pipeline.js) opens one from a model and a
// --nodes spec in Node.
import { approxModesOn } from '../protocol/approx_options.js';
import { LayerfoldError } from '../wasm/capi.js';
import { NodeShare } from './node_share.js';
import { NodeHistory } from './node_history.js';
import { checkCoverage } from './nodes_spec.js';

// Errors by which a node says it no longer holds the session as the coordinator left it.
const LOST_SESSION = new Set(['unknown_session', 'evicted', 'position_mismatch']);
// Positions per replayed forward: chunked input gives the same cache as one call, and stays
// under a remote node's request size limit.
const REPLAY_CHUNK = 512;
// Replays of one forward before giving up: a node that holds fewer sessions than are in flight
// may evict a session again while it is being replayed (between a remote node's requests).
const MAX_REBUILDS = 3;

// Replay chunks {startPos, hidden} of the positions from `from` on merged into runs of at most
// REPLAY_CHUNK positions.
function mergeChunks(chunks, nEmbd, from) {
  const all = concat(chunks.map((c) => c.hidden), nEmbd);
  const merged = [];
  for (let p = 0; p < all.length / nEmbd; p += REPLAY_CHUNK) {
    merged.push({ startPos: from + p, hidden: all.subarray(p * nEmbd, Math.min(all.length, (p + REPLAY_CHUNK) * nEmbd)) });
  }
  return merged;
}

function concat(chunks, width) {
  const out = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.length;
  }
  if (out.length % width !== 0) throw new Error('internal: history rows of the wrong width');
  return out;
}

// Errors by which a node refuses a cut its sliding rings cannot honour (LayerNode, the HTTP node).
const CUT_REFUSED = new Set(['failed_precondition', 'cut_refused']);

// The K/V rows an entry arrived with, and those the node it ran on handed out, for the next node.
function withKvRows(arrived, handedOut) {
  if (!arrived && !handedOut) return null;
  return { ...arrived, ...handedOut };
}

/**
 * How errors name a node: its place, where it runs and its layers.
 * @example nodeName(node, 1) // "node 1 (http://10.0.0.7:8080, layers 30-59)"
 */
export function nodeName(node, i) {
  const where = node.url ?? 'local';
  return `node ${i} (${where}, layers ${node.layers[0]}-${node.layers[1] - 1})`;
}

/**
 * Throws naming the node when the open nodes do not cover the model's layers in order (gap,
 * overlap, too few) or one has another n_embd, n_layer or n_vocab than the model (`info`: the
 * header's): a remote node's answers are checked against the sizes it gave.
 */
export function checkNodes(nodes, info) {
  const names = nodes.map((node, i) => nodeName(node, i));
  checkCoverage(nodes.map((node) => node.layers), info.n_layer, names);
  for (const [i, node] of nodes.entries()) {
    for (const [field, mine] of [['n_embd', node.nEmbd], ['n_layer', node.nLayer], ['n_vocab', node.nVocab]]) {
      if (mine !== info[field]) throw new Error(`${names[i]} has ${field} ${mine}, the model ${info[field]}: a node of another model?`);
    }
  }
}

export class PipelineCore {
  #sessions = new Map();  // session -> {wireId, nodes: NodeHistory[], tail: its last call, never rejecting}
  #stepping = 0;  // sessions with a step under way
  #shares;        // per node: at most ceil(#stepping / nodes) of them at once

  /**
   * Over nodes already open (LayerNode or RemoteNode, in pipeline order, covering the model's
   * layers), the model's header and its tokenizer.
   */
  constructor(nodes, header, tokenizer, approx = {}) {
    this.nodes = nodes;
    this.header = header;
    this.tokenizer = tokenizer;
    this.approx = approx;
    const share = () => Math.max(1, Math.ceil(this.#stepping / nodes.length));
    this.#shares = nodes.map(() => new NodeShare(share));
    /** How many times a node's session was rebuilt by replaying its history. */
    this.replays = 0;
  }

  /**
   * A pipeline over the same nodes with other approximate modes: no weights load again, and
   * its sessions are its own. close() the pipeline that opened the nodes, not this view.
   * @example const exitEarly = pipeline.withApprox({ earlyExit: true, exitThreshold: 0.05 });
   */
  withApprox(approx) {
    return new this.constructor(this.nodes, this.header, this.tokenizer, approx);
  }

  // Sessions travel under a fresh random id: names chosen by callers would collide on shared
  // remote nodes, and the node protocol accepts only a restricted alphabet.
  #session(session) {
    let state = this.#sessions.get(session);
    if (!state) {
      state = { wireId: `s-${crypto.randomUUID()}`, nodes: this.nodes.map(() => new NodeHistory()), tail: Promise.resolve() };
      this.#sessions.set(session, state);
    }
    return state;
  }

  // Runs job() after every call of the session asked for before it, whatever their outcome: its
  // history is read and extended by one call at a time, as if the caller awaited each in turn.
  #inTurn(state, job) {
    const result = state.tail.then(job);
    state.tail = result.catch(() => {});
    return result;
  }

  /**
   * Runs new tokens of a session through every node; returns the last position's logits and
   * how long each node and layer took. With `allRows`, `logits` holds every position's of the
   * step, [tokens.length, n_vocab], each row the bytes a step ending there gives (a drafted
   * continuation verified in one forward: docs/gateway.md, "Speculative decoding by prompt
   * lookup"); with `logits` false, none (null): the positions only go into the sessions' caches
   * (a prompt prefilled in parts). When a step fails, what the nodes before the failure did is kept:
   * step(session, []) later finishes it, sending each node only what it has not run yet. Calls
   * for other sessions need not wait for this one: they go through the nodes concurrently; calls
   * for the same session run in call order. signal: when it fires, the step ends with its
   * reason (a local node's forward under way runs to its end first). trace: the request's
   * (protocol/traceparent.js), which a remote node's calls carry in their traceparent header.
   * draft: with a draft model on the last node (drafts), k tokens drafted after the step, answered
   * with its logits in the same call as `draft` (LayerNode.draftAfter: {after, token, ids}, the
   * ids drafted assuming each row's argmax is sampled); null when not asked or not drafted.
   * @example const [a, b] = await Promise.all([pipeline.step('a', tokensA), pipeline.step('b', tokensB)]);
   */
  step(session, tokens, { allRows = false, logits = true, draft = 0, signal, trace = null } = {}) {
    const entry = tokens.length > 0 ? { input: Array.from(tokens), rows: tokens.length, span: false } : null;
    return this.#stepEntry(session, entry, tokens, { allRows, logits, draft, signal, trace });
  }

  /**
   * step() for a media item's rows instead of tokens: rows [n, n_embd], the soft-token embeddings
   * an encoder gave (vision/encoder.js), go in at the session's next positions as they are (not
   * scaled as token embeddings are; on a model with per-layer embeddings their per-layer inputs
   * are the padding token's, as llama.cpp's: node 0's perLayerInputs of token 0 for each row).
   * span: the rows are attended both ways on the sliding layers (llama.cpp's Gemma 4 images on
   * every model but E2B and E4B: docs/vision.md, "An image in the decoder"), so the item goes
   * through every node in one call of its own, which each node's maxSpan must hold. Its rows are
   * one entry of the history: a cut inside them is refused.
   * @example await pipeline.stepMedia('chat-0', { rows: embd, span: true }, { logits: false });
   */
  stepMedia(session, { rows, span }, { allRows = false, logits = true, signal, trace = null } = {}) {
    const n = rows.length / this.header.info.n_embd;
    if (!Number.isInteger(n) || n < 1) {
      return Promise.reject(new LayerfoldError('invalid_argument', `stepMedia: rows has ${rows.length} floats, not a positive multiple of n_embd ${this.header.info.n_embd}`));
    }
    return this.#stepEntry(session, { input: rows, rows: n, span: Boolean(span), media: true }, [], { allRows, logits, draft: 0, signal, trace });
  }

  #stepEntry(session, entry, tokens, { allRows, logits, draft, signal, trace }) {
    const state = this.#session(session);
    return this.#inTurn(state, async () => {
      this.#stepping++;
      try {
        return await this.#step(state, session, entry, tokens, allRows, logits, draft, signal, trace);
      } finally {
        this.#stepping--;
      }
    });
  }

  /** True when the last node holds a draft model: step() drafts after a step when asked. */
  get drafts() {
    return this.nodes.at(-1).drafts === true;
  }

  async #step(state, session, newEntry, tokens, allRows, wantLogits, draftK, signal, trace) {
    if (newEntry) state.nodes[0].entries.push({ ...newEntry, exitState: null, perLayer: null, kvRows: null });
    const timings = [];
    const embed = { ms: 0 };
    let hidden = null;
    for (const [i, node] of this.nodes.entries()) {
      const history = state.nodes[i];
      const last = i === this.nodes.length - 1;
      const lastOnly = last && !allRows;
      const t = performance.now();
      hidden = null;
      // Normally one entry: this step's. After a failed step, also those it left behind.
      for (const entry of history.entriesFrom(history.positions)) {
        signal?.throwIfAborted();
        const input = await this.#call(i, () => this.#hiddenOf(i, entry, embed, signal, trace), signal);
        hidden = await this.#call(i, () => this.#shares[i].run(() => this.#forward(i, state, input, entry.exitState, lastOnly, signal, trace), signal), signal);
        history.positions += entry.rows;
        if (!last) {
          state.nodes[i + 1].entries.push({
            input: hidden, rows: entry.rows, span: entry.span,
            exitState: this.approx.earlyExit ? node.approxStats(state.wireId)?.early_exit ?? null : null,
            perLayer: input.perLayer, kvRows: withKvRows(input.kvRows, node.kvRowsOf?.(hidden)),
          });
        }
      }
      if (hidden === null) continue;
      timings.push({
        layers: node.layers, url: node.url, ms: performance.now() - t, layerMs: node.layerTimings(state.wireId),
        ...(approxModesOn(this.approx) ? { approx: node.approxStats(state.wireId) } : {}),
      });
    }
    if (hidden === null) throw new Error(`step: session "${session}" has no new tokens`);
    if (!wantLogits) return { logits: null, draft: null, timings, embedMs: embed.ms, headMs: 0 };
    const th = performance.now();
    signal?.throwIfAborted();
    const tail = this.nodes.at(-1);
    const rows = hidden.length / tail.nEmbd;
    const { logits, draft } = await this.#call(this.nodes.length - 1, () => (draftK > 0 && this.drafts && tokens.length >= rows
      ? tail.logitsAndDraft(hidden, { session: state.wireId, tokens: tokens.slice(tokens.length - rows), k: draftK, signal, trace })
      : tail.logitsAsync(hidden, { signal, trace }).then((only) => ({ logits: only, draft: null }))), signal);
    return { logits, draft, timings, embedMs: embed.ms, headMs: performance.now() - th };
  }

  // An entry's input as {hidden, perLayer, kvRows, span}: the first node's tokens embedded
  // (embed.ms accumulates the time that took) or a media item's rows as they are, with every
  // layer's per-layer input when the model has them (docs/forward-pass.md, "Per-layer inputs and
  // shared KV in a pipeline"; a media row's are the padding token's): the first node computes
  // them and they travel with the hidden states, as do the K/V rows of source layers that nodes
  // holding shared-KV layers without their source mirror.
  async #hiddenOf(i, entry, embed, signal, trace) {
    const span = entry.span === true;
    if (i > 0) return { hidden: entry.input, perLayer: entry.perLayer, kvRows: entry.kvRows, span };
    const t = performance.now();
    const node = this.nodes[0];
    const nEmbdPerLayer = this.header.info.n_embd_per_layer ?? 0;
    const ids = entry.media ? new Array(entry.rows).fill(0) : entry.input;
    const hidden = entry.media ? entry.input : await node.embed(entry.input, { signal, trace, nEmbdPerLayer });
    const perLayer = nEmbdPerLayer > 0 ? await node.perLayerInputs(ids, hidden, { nEmbdPerLayer, signal, trace }) : null;
    embed.ms += performance.now() - t;
    return { hidden, perLayer, kvRows: null, span };
  }

  // Node i's layers' slice of an entry's per-layer inputs [n_layer, rows, n_pl]: contiguous.
  #perLayerSlice(i, perLayer, rows) {
    if (!perLayer) return null;
    const [begin, end] = this.nodes[i].layers;
    const layerFloats = rows * this.header.info.n_embd_per_layer;
    return perLayer.subarray(begin * layerFloats, end * layerFloats);
  }

  // One forward of node i from its confirmed position; when the node lost the session (or it was
  // dropped for a refused cut), its history up to there is replayed first, then the forward
  // (again) (#rebuild).
  async #forward(i, state, { hidden, perLayer, kvRows, span }, exitState, lastOnly, signal, trace) {
    const node = this.nodes[i];
    const history = state.nodes[i];
    const args = {
      session: state.wireId, startPos: history.positions, hidden, lastOnly, approx: this.approx, exitState,
      perLayer: this.#perLayerSlice(i, perLayer, hidden.length / node.nEmbd), kvRows, signal, trace, ...(span ? { span } : {}),
    };
    if (history.held === history.positions) history.held = null;
    if (history.held === null) {
      try {
        return await node.forward(args);
      } catch (error) {
        if (!LOST_SESSION.has(error.code) || history.positions === 0) throw error;
        history.held = 0;
      }
    }
    for (let attempt = 1; ; attempt++) {
      try {
        const out = await this.#rebuild(i, state, args);
        history.held = null;
        return out;
      } catch (error) {
        if (!LOST_SESSION.has(error.code)) throw error;
        history.held = 0;
        if (attempt === MAX_REBUILDS) {
          error.message += ` (lost again while being replayed, ${attempt} times: does the node hold fewer sessions than are in flight?)`;
          throw error;
        }
      }
    }
  }

  // Node i's session replayed from its history (from the positions it holds: none after it was
  // lost, a checkpoint's after a cut returned there), then the forward `args`. Replays send the
  // entries as they were sent when early exit is on (each entry's last row exited on its own),
  // the model has per-layer inputs or the entries carry K/V rows; otherwise merged chunks a node accepts, which give the same
  // cache in fewer calls. A node that keeps its forwards' order (a local one) gets every call at once, and a
  // node that runs one call at a time lets no other session's forward come between them to evict
  // this one again (a node that batches may: then the replay is tried again). A node whose
  // forwards could overtake one another on the way (keepsForwardOrder false: a remote one) gets
  // each after the last.
  async #rebuild(i, state, args) {
    const node = this.nodes[i];
    const history = state.nodes[i];
    const from = history.held;
    if (from === 0) await node.dropSession(state.wireId, { signal: args.signal, trace: args.trace });
    const chunks = [];
    for (const { startPos, entry } of history.runFrom(from, this.header.info.n_embd_per_layer ?? 0)) {
      const input = await this.#hiddenOf(i, entry, { ms: 0 }, args.signal, args.trace);
      chunks.push({
        startPos, hidden: input.hidden, exitState: entry.exitState, perLayer: this.#perLayerSlice(i, input.perLayer, entry.rows), kvRows: input.kvRows,
        ...(input.span ? { span: true } : {}),
      });
    }
    // A media span goes alone, as it was sent: merged with other rows it would be another span.
    const asSent = this.approx.earlyExit || this.header.info.n_embd_per_layer > 0 || chunks.some((chunk) => chunk.kvRows || chunk.span);
    const calls = [...(asSent ? chunks : mergeChunks(chunks, node.nEmbd, from)).map((chunk) => ({ session: state.wireId, ...chunk, lastOnly: true, approx: this.approx, signal: args.signal, trace: args.trace })), args];
    this.replays += 1;
    if (!node.keepsForwardOrder) {
      let out;
      for (const call of calls) out = await node.forward(call);
      return out;
    }
    const outs = await Promise.allSettled(calls.map((call) => node.forward(call)));
    const failed = outs.find((o) => o.status === 'rejected');
    if (failed) throw failed.reason;
    return outs.at(-1).value;
  }

  // Errors name the node and the layers it serves; the reason of a fired signal (a request's
  // deadline, not the node's fault) goes on as it is.
  async #call(i, fn, signal) {
    try {
      return await fn();
    } catch (error) {
      if (signal?.aborted && error === signal.reason) throw error;
      error.message = `${nodeName(this.nodes[i], i)}: ${error.message}`;
      error.node = i;
      throw error;
    }
  }

  /**
   * Cuts the session back to its first n positions, once its steps asked for before have ended:
   * every node's history keeps its first n positions, and every node's session is cut to what
   * it then holds. A node whose sliding rings have moved on returns to its latest checkpoint
   * before n (checkpoint()), and the next step feeds it the positions from there to n again from
   * its history. A node that refuses the cut (no checkpoint before n) or no longer holds the
   * session has it dropped, and the next step rebuilds it from the shortened history; those
   * nodes are `rebuilt`. Either way the next step continues at n with the bytes a session
   * fed only those n positions gives. Refused, before anything changes, beyond the positions the
   * session holds, for a session the pipeline does not hold ('unknown_session'), and with early
   * exit on (the state a cut entry's last row exits in is not kept). Any other failure of a node's cut drops its session too (so the next step rebuilds it) and
   * is thrown, naming the node.
   * signal and trace, as step's: a cut under way when the signal fires ends with its reason.
   * -> {nPast: n, rebuilt: [node indices]}
   * @example const { rebuilt } = await pipeline.truncate('chat-0', 40); // rebuilt: [] when every node cut in place
   */
  truncate(session, n, { signal, trace = null } = {}) {
    const state = this.#sessions.get(session);
    if (!state) return Promise.reject(new LayerfoldError('unknown_session', `truncate: the pipeline holds no session "${session}"`));
    return this.#inTurn(state, async () => {
      const held = state.nodes[0].available;
      if (!(Number.isInteger(n) && n >= 0 && n <= held)) {
        throw new LayerfoldError('invalid_argument', `truncate: session "${session}" holds ${held} positions, cannot cut it to ${n}`);
      }
      const span = state.nodes[0].spanAcross(n);
      if (span) {
        throw new LayerfoldError('invalid_argument', `truncate: position ${n} of session "${session}" is inside a media item's rows ` +
          `[${span[0]}, ${span[1]}), which are attended as one: cut before or after them`);
      }
      if (this.approx.earlyExit) {
        throw new LayerfoldError('failed_precondition', `truncate: session "${session}" runs with early exit, whose state at a cut position is not kept: drop the session instead`);
      }
      const nPl = this.header.info.n_embd_per_layer ?? 0;
      const rebuilt = [];
      await Promise.all(this.nodes.map(async (node, i) => {
        const history = state.nodes[i];
        const holds = history.held ?? history.positions;
        history.cut(n, nPl);
        if (holds <= history.positions) return;
        try {
          // A node that returns to a checkpoint before n is fed the rest again at the next step.
          const reached = await this.#call(i, () => node.truncate(state.wireId, history.positions, { signal, trace }), signal);
          history.held = reached < history.positions ? reached : null;
        } catch (error) {
          // The node's session no longer matches its history either way: the next step replays it.
          rebuilt.push(i);
          history.held = 0;
          // Under the caller's signal: a request that ended does not wait here for a hanging node.
          await Promise.resolve().then(() => node.dropSession(state.wireId, { signal, trace })).catch(() => {});
          if (!CUT_REFUSED.has(error.code) && !LOST_SESSION.has(error.code)) throw error;
        }
      }));
      return { nPast: n, rebuilt: rebuilt.sort((a, b) => a - b) };
    });
  }

  /**
   * Keeps a checkpoint of the session on every node at the positions its steps asked for before
   * leave it (LayerNode.checkpoint, at most `keep` per node), so that a later cut to any position
   * from there on costs a replay from there rather than from the start (docs/forward-pass.md,
   * "Checkpoints"). A node still to be fed positions again (a cut that returned to an earlier
   * checkpoint) takes none. -> the node indices that took one
   * @example await pipeline.checkpoint('chat-0', { keep: 4 });
   */
  checkpoint(session, { keep, signal, trace = null } = {}) {
    const state = this.#sessions.get(session);
    if (!state) return Promise.reject(new LayerfoldError('unknown_session', `checkpoint: the pipeline holds no session "${session}"`));
    return this.#inTurn(state, async () => {
      const taken = [];
      await Promise.all(this.nodes.map(async (node, i) => {
        const history = state.nodes[i];
        if (history.held !== null || history.positions === 0) return;
        await this.#call(i, () => node.checkpoint(state.wireId, { keep, signal, trace }), signal);
        taken.push(i);
      }));
      return taken.sort((a, b) => a - b);
    });
  }

  /**
   * Forgets the session on every node, once its steps asked for before have ended. A step asked
   * for afterwards starts the session over (under a new wire id, so no node mistakes it for
   * the old one).
   */
  async dropSession(session) {
    const state = this.#sessions.get(session);
    if (!state) return;
    this.#sessions.delete(session);
    await this.#inTurn(state, () => Promise.all(this.nodes.map((node) => node.dropSession(state.wireId))));
  }

  /**
   * Drops every session once its steps under way have ended (remote nodes keep running), then
   * closes the local nodes, which must not close while a forward runs.
   */
  async close() {
    await Promise.allSettled([...this.#sessions.keys()].map((session) => this.dropSession(session)));
    for (const node of this.nodes) node.close();
    this.tokenizer.close();
  }
}
