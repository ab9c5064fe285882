// The calls of one node's server (a layer node, an encoder node: docs/http-api.md) as a client
// makes them. A request that fails on the way (connection refused or reset, timeout, 429, 503) is
// tried once more, after the node says it is ready again; the caller's idempotency key goes with
// both, so a forward whose response was lost is answered from the node's memory rather than run
// twice. Every call takes the caller's AbortSignal (a request's deadline, its client going away):
// the fetch, the back-off and the wait for the node to be ready again all end when it fires, with
// its reason. A call made for a request (trace: the span of its step, telemetry/spans.js) runs in
// a span of its own, which its traceparent header names, so the node's span of the call is its
// child. The answer's body is left to the caller, who reads it within its size (node_answer.js).
import { redactUrl } from '../log/redact.js';
import { formatTraceparent, TRACEPARENT } from '../protocol/traceparent.js';
import { inSpan, SpanKind } from '../telemetry/spans.js';
import { LayerfoldError } from '../wasm/capi.js';
import { deadlineSignal } from './deadline.js';
import { MAX_JSON_BYTES, readText } from './node_answer.js';

const READY_POLL_MS = 200;

// Resolves after ms, or rejects with the signal's reason as soon as it fires.
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

// Failures worth one more attempt: the node restarted, is loading, is shutting down, or is busy.
function retryable(status) {
  return status === 429 || status === 502 || status === 503 || status === 504;
}

export class NodeClient {
  #authToken;

  /**
   * @param {string} url the server's base URL, e.g. "http://10.0.0.7:8080"
   * @param {{authToken?: string, timeoutMs: number, readyTimeoutMs: number}} options authToken:
   *   sent as a bearer token; timeoutMs: a call's default deadline; readyTimeoutMs: how long a
   *   node that is loading or restarting is waited for
   * @example const client = new NodeClient('http://127.0.0.1:8080', { timeoutMs: 60_000, readyTimeoutMs: 120_000 });
   */
  constructor(url, { authToken, timeoutMs, readyTimeoutMs }) {
    this.url = url.replace(/\/+$/, '');
    this.#authToken = authToken;
    this.timeoutMs = timeoutMs;
    this.readyTimeoutMs = readyTimeoutMs;
  }

  /**
   * Polls /readyz until it answers 200; a node that never gets ready is an error naming it.
   * unreachableIsFatal: at open, no answer at all means a wrong address, not a restart.
   * @example await client.waitReady({ unreachableIsFatal: true });
   */
  async waitReady({ unreachableIsFatal = false, signal } = {}) {
    const deadline = Date.now() + this.readyTimeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      try {
        const response = await fetch(`${this.url}/readyz`, { signal: deadlineSignal(signal, 5000) });
        await response.body?.cancel();
        if (response.ok) return;
        last = `HTTP ${response.status}`;
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        last = error.cause?.code ?? error.message;
        if (unreachableIsFatal) throw new LayerfoldError('unavailable', `${this.url} is unreachable (${last})`);
      }
      await sleep(READY_POLL_MS, signal);
    }
    throw new LayerfoldError('unavailable', `${this.url} is not ready after ${this.readyTimeoutMs} ms (${last})`);
  }

  /**
   * The response of a call whose status is 2xx, its body unread, in a client span of the call
   * (its route, a session id left out) within `trace`, ended once the answer's headers are in; a
   * node's refusal as a LayerfoldError of its code (`status` the HTTP status, `nPast` where it
   * said). once: no second attempt (for clean-up calls that must not wait for a node to come
   * back). signal: the caller's; when it fires, the call ends at once with its reason.
   * @example const response = await client.request('GET', '/v1/info', { signal });
   */
  request(method, path, { trace, ...options } = {}) {
    const route = path.split('?')[0].replace(/^\/v1\/sessions\/[^/]+/, '/v1/sessions/{id}');
    return inSpan(trace, `${method} ${route}`, { 'server.address': redactUrl(this.url) }, (span) =>
      this.#send(method, path, span ? { ...options, headers: { ...options.headers, [TRACEPARENT]: formatTraceparent(span) } } : options), SpanKind.CLIENT);
  }

  async #send(method, path, { body, contentType, idempotencyKey, once = false, headers: extra = {}, signal, timeoutMs = this.timeoutMs } = {}) {
    const headers = { ...extra };
    if (this.#authToken) headers.authorization = `Bearer ${this.#authToken}`;
    if (contentType) headers['content-type'] = contentType;
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const callSignal = deadlineSignal(signal, timeoutMs);
      let response;
      try {
        response = await fetch(`${this.url}${path}`, { method, headers, body, signal: callSignal });
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        const cause = error.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (error.cause?.code ?? error.message);
        if (once) throw new LayerfoldError('unavailable', `${method} ${path} failed: ${cause}`);
        if (attempt === 2) throw new LayerfoldError('unavailable', `${method} ${path} failed twice: ${cause}`);
        await this.waitReady({ signal });
        continue;
      }
      if (response.ok) return response;
      const error = await NodeClient.#errorOf(response, method, path, signal);
      if (once || attempt === 2 || !retryable(response.status)) throw error;
      const retryAfter = Number(response.headers.get('retry-after'));
      if (response.status === 429) await sleep(Math.min(Number.isFinite(retryAfter) ? retryAfter * 1000 : 1000, 30_000), signal);
      else await this.waitReady({ signal });
    }
  }

  static async #errorOf(response, method, path, signal) {
    const text = await readText(response, MAX_JSON_BYTES, `${method} ${path}`, signal) ?? `(an error body of more than ${MAX_JSON_BYTES} bytes)`;
    let body = null;
    try {
      body = JSON.parse(text).error;
    } catch {
      // not a node's JSON error: report the status and the start of the text
    }
    const error = new LayerfoldError(body?.code ?? `http_${response.status}`,
      `${method} ${path}: HTTP ${response.status} ${body?.message ?? text.slice(0, 200)}`);
    error.status = response.status;
    if (body?.n_past !== undefined) error.nPast = body.n_past;
    return error;
  }
}
