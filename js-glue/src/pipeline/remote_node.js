// RemoteNode: a layer node served over HTTP (docs/http-api.md), with LayerNode's shape so that a
// pipeline mixes local and remote nodes. A request that fails on the way (connection refused or
// reset, timeout, 429, 503) is tried once more, after the node says it is ready again, with the
// same Idempotency-Key: a forward whose response was lost is answered from the node's memory
// rather than run twice.
import { approxQuery } from '../node/approx_modes.js';
import { kvRowBytes, packKvRows, unpackKvRows } from '../node/kv_rows.js';
import { LayerfoldError } from '../wasm/capi.js';

const READY_POLL_MS = 200;

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Failures worth one more attempt: the node restarted, is loading, is shutting down, or is busy.
function retryable(status) {
  return status === 429 || status === 502 || status === 503 || status === 504;
}

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
    await node.#waitReady({ unreachableIsFatal: true });
    node.#setInfo(await (await node.#request('GET', '/v1/info')).json());
    return node;
  }

  #authToken;
  #timeoutMs;
  #readyTimeoutMs;
  #info = null;
  #layerMs = new Map();  // session -> ms per layer of its last forward
  #approxStats = new Map();  // session -> what the approximate modes did in its last forward
  #perLayer = new WeakMap();  // hidden states from embed() -> the per-layer inputs answered with them
  #kvRowsOut = new WeakMap();  // a forward's output -> the K/V rows answered with it

  constructor(url, { authToken, timeoutMs, readyTimeoutMs }) {
    this.url = url.replace(/\/+$/, '');
    this.#authToken = authToken;
    this.#timeoutMs = timeoutMs;
    this.#readyTimeoutMs = readyTimeoutMs;
  }

  #setInfo(info) {
    this.#info = info;
    this.layers = info.layers;
    this.nEmbd = info.n_embd;
    this.nVocab = info.n_vocab;
    this.nLayer = info.n_layer;
    this.withEmbedding = info.has_embed;
    this.withHead = info.has_head;
    const kvLayers = (list = []) => list.map(({ layer, bytes_per_token: bytesPerToken }) => ({ layer, bytesPerToken }));
    this.kvRowsIn = kvLayers(info.kv_rows_in);
    this.kvRowsOut = kvLayers(info.kv_rows_out);
  }

  // Polls /readyz until it answers 200; a node that never gets ready is an error naming it.
  // unreachableIsFatal: at open, no answer at all means a wrong address, not a restart.
  async #waitReady({ unreachableIsFatal = false } = {}) {
    const deadline = Date.now() + this.#readyTimeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      try {
        const response = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(5000) });
        await response.body?.cancel();
        if (response.ok) return;
        last = `HTTP ${response.status}`;
      } catch (error) {
        last = error.cause?.code ?? error.message;
        if (unreachableIsFatal) throw new LayerfoldError('unavailable', `${this.url} is unreachable (${last})`);
      }
      await sleep(READY_POLL_MS);
    }
    throw new LayerfoldError('unavailable', `${this.url} is not ready after ${this.#readyTimeoutMs} ms (${last})`);
  }

  // once: no second attempt (for clean-up calls that must not wait for a node to come back).
  async #request(method, path, { body, contentType, idempotencyKey, once = false, headers: extra = {} } = {}) {
    const headers = { ...extra };
    if (this.#authToken) headers.authorization = `Bearer ${this.#authToken}`;
    if (contentType) headers['content-type'] = contentType;
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    for (let attempt = 1; ; attempt++) {
      let response;
      try {
        response = await fetch(`${this.url}${path}`, { method, headers, body, signal: AbortSignal.timeout(this.#timeoutMs) });
      } catch (error) {
        const cause = error.name === 'TimeoutError' ? `no answer within ${this.#timeoutMs} ms` : (error.cause?.code ?? error.message);
        if (once) throw new LayerfoldError('unavailable', `${method} ${path} failed: ${cause}`);
        if (attempt === 2) throw new LayerfoldError('unavailable', `${method} ${path} failed twice: ${cause}`);
        await this.#waitReady();
        continue;
      }
      if (response.ok) return response;
      const error = await RemoteNode.#errorOf(response, method, path);
      if (once || attempt === 2 || !retryable(response.status)) throw error;
      const retryAfter = Number(response.headers.get('retry-after'));
      if (response.status === 429) await sleep(Math.min(Number.isFinite(retryAfter) ? retryAfter * 1000 : 1000, 30_000));
      else await this.#waitReady();
    }
  }

  static async #errorOf(response, method, path) {
    const text = await response.text();
    let body = null;
    try {
      body = JSON.parse(text).error;
    } catch {
      // not a layer node's JSON error: report the status and the start of the text
    }
    const error = new LayerfoldError(body?.code ?? `http_${response.status}`,
      `${method} ${path}: HTTP ${response.status} ${body?.message ?? text.slice(0, 200)}`);
    error.status = response.status;
    if (body?.n_past !== undefined) error.nPast = body.n_past;
    return error;
  }

  static #floats(buffer) {
    return new Float32Array(buffer);
  }

  // The forward body of a model with per-layer embeddings: the hidden states, then the node's
  // layers' per-layer inputs.
  static #joined(hidden, perLayer) {
    const both = new Float32Array(hidden.length + perLayer.length);
    both.set(hidden);
    both.set(perLayer, hidden.length);
    return both;
  }

  static #bytes(floats) {
    return new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
  }

  // The forward body: the hidden states, the node's layers' per-layer inputs, the K/V rows of
  // the source layers it mirrors.
  #forwardBody(hidden, perLayer, kvRows, n) {
    const floats = RemoteNode.#bytes(perLayer ? RemoteNode.#joined(hidden, perLayer) : hidden);
    if (this.kvRowsIn.length === 0) return floats;
    const body = new Uint8Array(floats.byteLength + n * kvRowBytes(this.kvRowsIn));
    body.set(floats);
    body.set(packKvRows(this.kvRowsIn, kvRows, n), floats.byteLength);
    return body;
  }

  /** token ids -> hidden [n, n_embd] (the node holding layer 0). */
  async embed(tokens) {
    const response = await this.#request('POST', '/v1/embed', {
      body: JSON.stringify({ tokens: Array.from(tokens) }), contentType: 'application/json',
    });
    const both = RemoteNode.#floats(await response.arrayBuffer());
    const hiddenFloats = tokens.length * this.nEmbd;
    const hidden = both.subarray(0, hiddenFloats);
    // A model with per-layer embeddings answers every layer's inputs after the hidden states.
    if (both.length > hiddenFloats) this.#perLayer.set(hidden, both.subarray(hiddenFloats));
    return hidden;
  }

  /** The per-layer inputs [n_layer, n, n_pl] the node answered with the embed() that gave `hidden`. */
  perLayerInputs(tokens, hidden) {
    const perLayer = this.#perLayer.get(hidden);
    if (!perLayer) throw new LayerfoldError('bad_response', 'the node sent no per-layer inputs with these hidden states');
    return perLayer;
  }

  /**
   * hidden [n, n_embd] at positions startPos.. -> hidden [n or 1, n_embd], as LayerNode.forward.
   * @example const out = await node.forward({ session: 's1', startPos: 0, hidden, lastOnly: true });
   */
  async forward({ session, startPos, hidden, lastOnly = false, approx = {}, exitState = null, perLayer = null, kvRows = null }) {
    const n = hidden.length / this.nEmbd;
    if (!Number.isInteger(n) || n < 1) {
      throw new RangeError(`hidden has ${hidden.length} floats, not a positive multiple of n_embd ${this.nEmbd}`);
    }
    const query = new URLSearchParams({ start_pos: String(startPos) });
    if (lastOnly) query.set('last_only', '1');
    for (const [name, value] of approxQuery(approx)) query.set(name, value);
    const response = await this.#request('POST', `/v1/sessions/${encodeURIComponent(session)}/forward?${query}`, {
      body: this.#forwardBody(hidden, perLayer, kvRows, n), contentType: 'application/octet-stream',
      idempotencyKey: crypto.randomUUID(),
      headers: exitState ? { 'x-layerfold-exit-state': JSON.stringify({ exit_layer: exitState.exit_layer, recent_updates: exitState.recent_updates }) } : {},
    });
    const layerMs = response.headers.get('x-layerfold-layer-ms');
    this.#layerMs.set(session, layerMs ? layerMs.split(',').map(Number) : []);
    const approxStats = response.headers.get('x-layerfold-approx');
    this.#approxStats.set(session, approxStats ? JSON.parse(approxStats) : null);
    const answer = await response.arrayBuffer();
    const floatBytes = 4 * (lastOnly ? 1 : n) * this.nEmbd;
    const expected = floatBytes + n * kvRowBytes(this.kvRowsOut);
    if (answer.byteLength !== expected) {
      throw new LayerfoldError('bad_response', `forward answered ${answer.byteLength} bytes, expected ${expected}` +
        (this.kvRowsOut.length ? ` (${floatBytes} of hidden states, then the K/V rows of layers ${this.kvRowsOut.map((l) => l.layer).join(', ')})` : ''));
    }
    const out = RemoteNode.#floats(answer.slice(0, floatBytes));
    if (this.kvRowsOut.length) this.#kvRowsOut.set(out, unpackKvRows(this.kvRowsOut, new Uint8Array(answer, floatBytes), n));
    return out;
  }

  /** The K/V rows the forward that answered `out` handed out, as LayerNode.kvRowsOf. */
  kvRowsOf(out) {
    return this.#kvRowsOut.get(out) ?? null;
  }

  /** hidden [rows, n_embd] -> logits [rows, n_vocab] (the node holding the head). */
  async logits(hidden) {
    const response = await this.#request('POST', '/v1/logits', { body: RemoteNode.#bytes(hidden), contentType: 'application/octet-stream' });
    return RemoteNode.#floats(await response.arrayBuffer());
  }

  /** logits(), as a LayerNode's logitsAsync: the node's server shares LM-head passes among concurrent requests. */
  logitsAsync(hidden) {
    return this.logits(hidden);
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
   * Cuts the session back to its first nPast positions, as LayerNode.truncate (a repeat changes
   * nothing, so a retry is safe); the node's refusals keep their codes (unknown_session,
   * cut_refused, bad_parameter). -> nPast
   */
  async truncate(session, nPast) {
    const response = await this.#request('POST', `/v1/sessions/${encodeURIComponent(session)}/truncate?n_past=${nPast}`);
    return (await response.json()).n_past;
  }

  /** Forgets the session on the node; false when the node did not hold it. One attempt only. */
  async dropSession(session) {
    this.#layerMs.delete(session);
    this.#approxStats.delete(session);
    try {
      await this.#request('DELETE', `/v1/sessions/${encodeURIComponent(session)}`, { once: true });
      return true;
    } catch (error) {
      if (error.status === 404) return false;
      throw error;
    }
  }

  /** What the node said of itself when it was opened (LayerNode.info's shape, plus url). */
  info() {
    const i = this.#info;
    return {
      url: this.url, model: i.model, layers: i.layers, nEmbd: i.n_embd, nVocab: i.n_vocab, build: i.build,
      threads: i.threads, sessions: i.sessions, wasmMemoryBytes: i.wasm_memory_bytes, kvBytes: i.kv_bytes,
    };
  }

  close() {
    this.#layerMs.clear();
    this.#approxStats.clear();
  }
}
