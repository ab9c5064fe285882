// RemoteNode: a layer node served over HTTP (docs/http-api.md), with LayerNode's shape so that a
// pipeline mixes local and remote nodes. Its calls go through a NodeClient (node_client.js: one
// retry, after the node says it is ready again, signals, spans), a forward with an
// Idempotency-Key so that a forward whose response was lost is answered from the node's memory
// rather than run twice. Every answer is read within a size bound and checked before use
// (node_answer.js).
import { approxQuery } from '../protocol/approx_options.js';
import { decodeDraft, DRAFT, draftQuery } from '../protocol/draft.js';
import { decodeEmbedAnswer, embedAnswerBytes, encodeEmbedRequest } from '../protocol/embed_body.js';
import { decodeForwardAnswer, encodeForwardBody, forwardAnswerBytes } from '../protocol/forward_body.js';
import { decodePerLayerInputsAnswer, perLayerInputsBytes } from '../protocol/per_layer_inputs_body.js';
import { APPROX_STATS, decodeApproxStats, decodeLayerMs, encodeExitState, EXIT_STATE, LAYER_MS } from '../protocol/forward_headers.js';
import { decodeNodeInfo } from '../protocol/node_info.js';
import { LayerfoldError } from '../wasm/capi.js';
import { NodeClient } from './node_client.js';
import { checkKvRowValues, checkValues, MAX_JSON_BYTES, readExact, readJson } from './node_answer.js';

// A session's DELETE is clean-up after a request that already ended: it may wait this long for
// a node that is busy or gone, not the forward's timeout.
const DROP_TIMEOUT_MS = 10_000;

export class RemoteNode {
  /**
   * Connects to a layer node and reads what it serves (GET /v1/info), waiting up to
   * readyTimeoutMs for it to finish loading; a node nothing answers for is an error at once.
   * @param {string} url e.g. "http://10.0.0.7:8080"
   * @param {{authToken?: string, timeoutMs?: number, readyTimeoutMs?: number}} [options]
   *   authToken: sent as a bearer token; timeoutMs: per request (a forward of many layers over a
   *   long prompt takes a while: default 10 min)
   * @example const node = await RemoteNode.open('http://127.0.0.1:8080', { authToken: process.env.AUTH_TOKEN });
   */
  static async open(url, { authToken, timeoutMs = 600_000, readyTimeoutMs = 120_000 } = {}) {
    const node = new RemoteNode(url, { authToken, timeoutMs, readyTimeoutMs });
    await node.#client.waitReady({ unreachableIsFatal: true });
    node.#setInfo(await readJson(await node.#client.request('GET', '/v1/info'), MAX_JSON_BYTES, 'GET /v1/info'));
    return node;
  }

  #client;
  #info = null;
  #layerMs = new Map();  // session -> ms per layer of its last forward
  #approxStats = new Map();  // session -> what the approximate modes did in its last forward
  #perLayer = new WeakMap();  // hidden states from embed() -> the per-layer inputs answered with them
  #kvRowsOut = new WeakMap();  // a forward's output -> the K/V rows answered with it

  constructor(url, options) {
    this.#client = new NodeClient(url, options);
    this.url = this.#client.url;
  }

  // The sizes every later answer is checked against (decodeNodeInfo refuses what are not sizes).
  #setInfo(info) {
    const { layers, nLayer, nEmbd, nVocab, withEmbedding, withHead, kvRowsIn, kvRowsOut, cacheTypeK, cacheTypeV, maxSpan, ...rest } = decodeNodeInfo(info);
    this.#info = rest;
    Object.assign(this, { layers, nLayer, nEmbd, nVocab, withEmbedding, withHead, kvRowsIn, kvRowsOut, cacheTypeK, cacheTypeV, maxSpan });
    /** True on a node with a draft model: logitsAndDraft() drafts. */
    this.drafts = rest.drafter !== null;
  }

  /**
   * False: forwards sent at once may reach the node in another order than they were called
   * (LayerNode's is true), so a pipeline sends a session's calls to it one after another.
   */
  get keepsForwardOrder() {
    return false;
  }

  static #bytes(floats) {
    return new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
  }

  /**
   * token ids -> hidden [n, n_embd] (the node holding layer 0). nEmbdPerLayer: the model's
   * per-layer input width (0: none), whose inputs [n_layer, n, n_pl] the node answers after the
   * hidden states (perLayerInputs()).
   * @example const hidden = await node.embed([2, 818], { signal: AbortSignal.timeout(30_000) });
   */
  async embed(tokens, { signal, trace, nEmbdPerLayer = 0 } = {}) {
    const response = await this.#client.request('POST', '/v1/embed', {
      body: encodeEmbedRequest(tokens), contentType: 'application/json', signal, trace,
    });
    const shape = { nEmbd: this.nEmbd, nLayer: this.nLayer, nEmbdPerLayer };
    const answer = await readExact(response, embedAnswerBytes(shape, tokens.length), 'POST /v1/embed', signal);
    const { hidden, perLayer } = decodeEmbedAnswer(answer, shape, tokens.length);
    checkValues(hidden, this.nEmbd, 'POST /v1/embed: hidden states');
    if (perLayer) {
      checkValues(perLayer, nEmbdPerLayer, 'POST /v1/embed: per-layer inputs');
      this.#perLayer.set(hidden, perLayer);
    }
    return hidden;
  }

  /**
   * Every layer's per-layer inputs [n_layer, n, n_pl] of `hidden`, as LayerNode.perLayerInputs:
   * those the node answered with the embed() that gave it, else (rows of no token, a media
   * item's, whose `tokens` are the padding token 0) the node's answer to POST /v1/per-layer-inputs.
   * nEmbdPerLayer: the model's per-layer input width.
   * @example const perLayer = await node.perLayerInputs(new Array(rows).fill(0), rows, { nEmbdPerLayer: 256, signal });
   */
  async perLayerInputs(tokens, hidden, { nEmbdPerLayer = 0, signal, trace } = {}) {
    const held = this.#perLayer.get(hidden);
    if (held) return held;
    const n = hidden.length / this.nEmbd;
    if (!(nEmbdPerLayer > 0) || tokens.length !== n || Array.from(tokens).some((t) => t !== 0)) {
      throw new LayerfoldError('invalid_argument', `perLayerInputs: rows that did not come from embed() stand for no token: expected ${n} ` +
        `padding tokens (0) and the model's nEmbdPerLayer, got tokens [${Array.from(tokens).slice(0, 8)}${tokens.length > 8 ? ', ...' : ''}] and nEmbdPerLayer ${nEmbdPerLayer}`);
    }
    const what = 'POST /v1/per-layer-inputs';
    const response = await this.#client.request('POST', '/v1/per-layer-inputs', { body: RemoteNode.#bytes(hidden), contentType: 'application/octet-stream', signal, trace });
    const shape = { nLayer: this.nLayer, nEmbdPerLayer };
    const perLayer = decodePerLayerInputsAnswer(await readExact(response, perLayerInputsBytes(shape, n), what, signal), shape, n);
    checkValues(perLayer, nEmbdPerLayer, what);
    return perLayer;
  }

  /**
   * hidden [n, n_embd] at positions startPos.. -> hidden [n or 1, n_embd], as LayerNode.forward.
   * @example const out = await node.forward({ session: 's1', startPos: 0, hidden, lastOnly: true });
   */
  async forward({ session, startPos, hidden, lastOnly = false, approx = {}, exitState = null, perLayer = null, kvRows = null, span = false, signal, trace }) {
    const n = hidden.length / this.nEmbd;
    if (!Number.isInteger(n) || n < 1) {
      throw new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.nEmbd}`);
    }
    const query = new URLSearchParams({ start_pos: String(startPos) });
    if (lastOnly) query.set('last_only', '1');
    if (span) query.set('span', '1');
    for (const [name, value] of approxQuery(approx)) query.set(name, value);
    const what = 'POST /v1/sessions/{id}/forward';
    const response = await this.#client.request('POST', `/v1/sessions/${encodeURIComponent(session)}/forward?${query}`, {
      body: encodeForwardBody({ hidden, perLayer, kvRows }, this), contentType: 'application/octet-stream',
      idempotencyKey: crypto.randomUUID(), signal, trace,
      headers: exitState ? { [EXIT_STATE]: encodeExitState(exitState) } : {},
    });
    const floatBytes = forwardAnswerBytes({ nEmbd: this.nEmbd }, n, { lastOnly });
    const kvNote = this.kvRowsOut.length ? ` (${floatBytes} of hidden states, then the K/V rows of layers ${this.kvRowsOut.map((l) => l.layer).join(', ')})` : '';
    const answer = await readExact(response, forwardAnswerBytes(this, n, { lastOnly }), what + kvNote, signal);
    const { hidden: out, kvRows: kvRowsOut } = decodeForwardAnswer(answer, this, n, { lastOnly });
    checkValues(out, this.nEmbd, `${what}: hidden states`);
    for (const { layer, bytesPerToken } of kvRowsOut ? this.kvRowsOut : []) {
      checkKvRowValues(kvRowsOut[layer], bytesPerToken, this, `${what}: layer ${layer}'s K/V rows`);
    }
    const approxStats = decodeApproxStats(response.headers.get(APPROX_STATS), what);
    // Only an answer that passed every check leaves a trace here.
    this.#layerMs.set(session, decodeLayerMs(response.headers.get(LAYER_MS)));
    this.#approxStats.set(session, approxStats);
    if (kvRowsOut) this.#kvRowsOut.set(out, kvRowsOut);
    return out;
  }

  /** The K/V rows the forward that answered `out` handed out, as LayerNode.kvRowsOf. */
  kvRowsOf(out) {
    return this.#kvRowsOut.get(out) ?? null;
  }

  /**
   * hidden [rows, n_embd] -> logits [rows, n_vocab] (the node holding the head).
   * @example const logits = await node.logits(hidden, { signal });
   */
  async logits(hidden, { signal, trace } = {}) {
    const response = await this.#client.request('POST', '/v1/logits', { body: RemoteNode.#bytes(hidden), contentType: 'application/octet-stream', signal, trace });
    const rows = hidden.length / this.nEmbd;
    const logits = new Float32Array(await readExact(response, 4 * rows * this.nVocab, 'POST /v1/logits', signal));
    checkValues(logits, this.nVocab, 'POST /v1/logits');
    return logits;
  }

  /**
   * A step's logits and MTP drafts after it in one call, as LayerNode.logitsAndDraft: the drafts
   * travel in the answer's x-layerfold-draft header (protocol/draft.js).
   * @example const { logits, draft } = await node.logitsAndDraft(hidden, { session, tokens: [17], k: 4, signal });
   */
  async logitsAndDraft(hidden, { session, tokens, k, signal, trace } = {}) {
    const query = new URLSearchParams(draftQuery({ session, tokens, k }));
    const response = await this.#client.request('POST', `/v1/logits?${query}`, { body: RemoteNode.#bytes(hidden), contentType: 'application/octet-stream', signal, trace });
    const rows = hidden.length / this.nEmbd;
    const draft = decodeDraft(response.headers.get(DRAFT), { rows, k, nVocab: this.nVocab });
    const logits = new Float32Array(await readExact(response, 4 * rows * this.nVocab, 'POST /v1/logits', signal));
    checkValues(logits, this.nVocab, 'POST /v1/logits');
    return { logits, draft };
  }

  /** logits(), as a LayerNode's logitsAsync: the node's server shares LM-head passes among concurrent requests. */
  logitsAsync(hidden, options) {
    return this.logits(hidden, options);
  }

  /** Milliseconds each layer took in the session's last forward, as the node measured them. */
  layerTimings(session) {
    return this.#layerMs.get(session) ?? [];
  }

  /** What the approximate modes did in the session's last forward, as the node reported it. */
  approxStats(session) {
    return this.#approxStats.get(session) ?? null;
  }

  /**
   * Cuts the session back to its first nPast positions, or to its latest checkpoint before them,
   * as LayerNode.truncate (a repeat changes nothing, so a retry is safe); the node's refusals
   * keep their codes (unknown_session, cut_refused, bad_parameter). -> the positions it then holds
   */
  async truncate(session, nPast, { signal, trace } = {}) {
    const what = 'POST /v1/sessions/{id}/truncate';
    const response = await this.#client.request('POST', `/v1/sessions/${encodeURIComponent(session)}/truncate?n_past=${nPast}`, { signal, trace });
    const answer = await readJson(response, MAX_JSON_BYTES, what, signal);
    if (!(Number.isInteger(answer?.n_past) && answer.n_past >= 0 && answer.n_past <= nPast)) {
      throw new LayerfoldError('bad_response', `${what}: asked to cut to ${nPast}, answered n_past ${JSON.stringify(answer?.n_past)?.slice(0, 40)}`);
    }
    return answer.n_past;
  }

  /** Keeps a checkpoint of the session, as LayerNode.checkpoint (a repeat changes nothing). -> the position checkpointed */
  async checkpoint(session, { keep, signal, trace } = {}) {
    const what = 'POST /v1/sessions/{id}/checkpoint';
    const query = keep === undefined ? '' : `?keep=${keep}`;
    const response = await this.#client.request('POST', `/v1/sessions/${encodeURIComponent(session)}/checkpoint${query}`, { signal, trace });
    const answer = await readJson(response, MAX_JSON_BYTES, what, signal);
    if (!(Number.isInteger(answer?.n_past) && answer.n_past >= 0)) {
      throw new LayerfoldError('bad_response', `${what}: answered n_past ${JSON.stringify(answer?.n_past)?.slice(0, 40)}`);
    }
    return answer.n_past;
  }

  /**
   * Forgets the session on the node; false when the node did not hold it. One attempt only,
   * of at most DROP_TIMEOUT_MS.
   */
  async dropSession(session, { signal, trace } = {}) {
    this.#layerMs.delete(session);
    this.#approxStats.delete(session);
    try {
      const response = await this.#client.request('DELETE', `/v1/sessions/${encodeURIComponent(session)}`, { once: true, signal, trace, timeoutMs: DROP_TIMEOUT_MS });
      await response.body?.cancel();
      return true;
    } catch (error) {
      if (error.status === 404) return false;
      throw error;
    }
  }

  /** What the node said of itself when it was opened (LayerNode.info's shape, plus url). */
  info() {
    const { model, build, threads, sessions, wasmMemoryBytes, kvBytes } = this.#info;
    return { url: this.url, model, layers: this.layers, nEmbd: this.nEmbd, nVocab: this.nVocab, build, threads, sessions, wasmMemoryBytes, kvBytes };
  }

  close() {
    this.#layerMs.clear();
    this.#approxStats.clear();
  }
}
