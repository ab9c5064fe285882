// The gateway's errors in the shape OpenAI's API sends them ({"error": {message, type, param,
// code}}), with the status the official clients map to their exception classes (400
// BadRequestError, 401 AuthenticationError, 404 NotFoundError, 429 RateLimitError, 5xx
// InternalServerError). Errors of the layer-node app's pieces reused here (HttpError: the
// queue's 429, a body too large) are translated, not re-thrown as 500s; a remote node that
// answered wrongly, failed or could not be reached is a 502 naming it (its URL, redacted).
import { HttpError } from '../server/http_error.js';
import { redactSecrets } from '../log/redact.js';

const TYPE_BY_STATUS = {
  400: 'invalid_request_error', 401: 'invalid_request_error', 404: 'invalid_request_error', 408: 'timeout',
  413: 'invalid_request_error', 415: 'invalid_request_error', 429: 'rate_limit_exceeded', 499: 'client_closed', 500: 'server_error',
  502: 'server_error', 503: 'server_error', 504: 'timeout',
};

export class OpenAIError extends Error {
  /**
   * @param {number} status HTTP status
   * @param {string} message names the problem
   * @param {{param?: string, code?: string, headers?: object}} [more] param: the request field at fault
   * @example throw new OpenAIError(400, 'temperature must be a number in [0, 2]', { param: 'temperature' });
   */
  constructor(status, message, { param = null, code = null, headers = {} } = {}) {
    super(redactSecrets(message));
    if (!(status in TYPE_BY_STATUS)) throw new TypeError(`no OpenAI error type for status ${status}`);
    this.status = status;
    this.type = TYPE_BY_STATUS[status];
    this.param = param;
    this.code = code;
    this.headers = headers;
  }

  /** The error as OpenAI's JSON body, for a response or a stream's error event. */
  toJSON() {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }

  toResponse() {
    return new Response(JSON.stringify(this.toJSON()), { status: this.status, headers: { 'content-type': 'application/json', ...this.headers } });
  }
}

/** A bad request field: 400 invalid_request_error naming it. */
export function badParam(param, message) {
  return new OpenAIError(400, message, { param, code: 'invalid_value' });
}

// A remote node's failures (RemoteNode, an encoder node's RemoteEncoder): the OpenAI code each travels under.
const NODE_FAILURES = { bad_response: 'bad_node_answer', unavailable: 'node_unavailable' };

/**
 * Any error thrown while serving -> an OpenAIError: a remote node's bad answer, absence or
 * HTTP error becomes 502 (bad_node_answer, node_unavailable, node_error), other engine failures
 * 500 server_error, each with its reason, which never carries a secret.
 */
export function toOpenAIError(error) {
  if (error instanceof OpenAIError) return error;
  if (error instanceof HttpError) {
    const status = error.status in TYPE_BY_STATUS ? error.status : 400;
    return new OpenAIError(status, error.message, { code: error.code, headers: error.headers });
  }
  if (error.code === 'client_closed') return new OpenAIError(499, error.message, { code: 'client_closed' });
  if (Object.hasOwn(NODE_FAILURES, error.code ?? '')) return new OpenAIError(502, `a node failed: ${error.message}`, { code: NODE_FAILURES[error.code] });
  // Only a remote node's answer carries an HTTP status (NodeClient's errors of a non-2xx answer).
  if (Number.isInteger(error.status)) return new OpenAIError(502, `a node failed: ${error.code}: ${error.message}`, { code: 'node_error' });
  return new OpenAIError(500, `the pipeline failed: ${error.code ?? error.name}: ${error.message}`, { code: 'pipeline_error' });
}
