// The layer node's HTTP errors: a stable code, the status it travels with, and a message naming
// the problem. The JSON body is the same from the Node container and the edge worker. Messages
// are redacted on the way out (redact.js): an engine or source message may quote a model URL.
import { redactSecrets } from '../log/redact.js';

// client_closed (499, nginx's number) is never seen by a client: it is the status a request is
// logged with when its client went away before the answer.
const STATUS_BY_CODE = {
  bad_length: 400, not_finite: 400, bad_parameter: 400, bad_session_id: 400, context_full: 400, answer_too_large: 400,
  unauthorized: 401, unknown_session: 404, not_found: 404, method_not_allowed: 405, body_timeout: 408, position_mismatch: 409, cut_refused: 409,
  too_large: 413, bad_content_type: 415, idempotency_mismatch: 422, queue_full: 429, client_closed: 499,
  not_ready: 503, shutting_down: 503, internal: 500,
};

export class HttpError extends Error {
  /**
   * extra: more fields of the JSON error (e.g. n_past); headers: response headers (e.g. Retry-After).
   * @example throw new HttpError('position_mismatch', 'start_pos 3 but the session holds 5 positions', { extra: { n_past: 5 } });
   */
  constructor(code, message, { extra = {}, headers = {} } = {}) {
    super(redactSecrets(message));
    if (!(code in STATUS_BY_CODE)) throw new TypeError(`unknown HTTP error code "${code}"`);
    this.code = code;
    this.status = STATUS_BY_CODE[code];
    this.extra = extra;
    this.headers = headers;
  }

  /** The response: JSON {"error": {"code", "message", ...extra}}. */
  toResponse() {
    return new Response(JSON.stringify({ error: { code: this.code, message: this.message, ...this.extra } }), {
      status: this.status,
      headers: { 'content-type': 'application/json', ...this.headers },
    });
  }
}
