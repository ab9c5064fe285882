// The layer node's HTTP API (docs/http-api.md) as a Hono app over web-standard Request and
// Response only: the Node container (node_host.js) and the edge worker mount this same app.
// Every check of a request happens before a session is touched, and engine calls go through one
// bounded queue (a session's calls in order, different sessions' forwards together, which the
// node batches), so a refused request leaves every KV cache as it was. What one request can make
// the node hold is bounded: its body is read only once the queue admitted it, under a deadline
// and the body limit; its answer is streamed as the client reads it (answer_stream.js), logits
// a few rows at a time (logits_answer.js); and it keeps its place in the queue until its answer
// is sent, so at most max_queue + 1 requests hold memory at once.
import { Hono } from 'hono';
import { routePath } from 'hono/route';
import { timingSafeEqual } from 'hono/utils/buffer';

import { approxFromQuery, approxModesOn } from '../protocol/approx_options.js';
import { DEFAULT_CHECKPOINTS, MAX_CHECKPOINTS } from '../protocol/checkpoints.js';
import { DRAFT, encodeDraft, readDraftQuery } from '../protocol/draft.js';
import { decodeEmbedRequest, encodeEmbedAnswer } from '../protocol/embed_body.js';
import { decodeForwardBody, encodeForwardAnswer, forwardRowBytes } from '../protocol/forward_body.js';
import { APPROX_STATS, decodeExitState, encodeApproxStats, encodeLayerMs, EXIT_STATE, LAYER_MS } from '../protocol/forward_headers.js';
import { encodeEncoderInfo } from '../protocol/encode_body.js';
import { encodeNodeInfo } from '../protocol/node_info.js';
import { bytesResponse, streamedResponse } from './answer_stream.js';
import { HttpError } from './http_error.js';
import { encodeRoutes } from './encode_routes.js';
import { checkLogitsSize, chunkRows, DEFAULT_MAX_LOGITS_BYTES, topKRows } from './logits_answer.js';
import { NodeState } from './node_state.js';
import { redactSecrets } from '../log/redact.js';
import { TRACEPARENT } from '../protocol/traceparent.js';
import { endRequestSpan, serverSpan } from '../telemetry/spans.js';
import { checkDeclaredLength, readBody } from './request_body.js';
import { contentType, finiteValues, flag, hiddenStates, idempotencyKey, position, sessionId, topKParameter } from './request_checks.js';
import { requestFingerprint, SessionRecords } from './session_records.js';
import { WorkQueue } from './work_queue.js';

const F32 = 4;

const OCTETS = 'application/octet-stream';

// Positions a session of this node may hold: its own limit, else the model's context length.
function maxContext(node) {
  return node.maxContext || node.modelInfo.n_ctx_train || Infinity;
}

/** Default deadline for a request's body to arrive once admitted. */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
/** Default time a client may read nothing of an answer before its connection is closed. */
export const DEFAULT_SEND_TIMEOUT_MS = 30_000;

/**
 * The bearer token as given, or a TypeError naming what is wrong with it: an empty token would
 * be no authentication at all, and one with whitespace or a character outside visible ASCII
 * (a trailing newline from a secret file) could never match an Authorization header.
 * @example checkAuthToken(process.env.AUTH_TOKEN) // undefined when unset
 */
export function checkAuthToken(token) {
  if (token === undefined || token === null) return undefined;
  if (typeof token !== 'string' || token === '') throw new TypeError('AUTH_TOKEN (authToken) is set but empty: set a token, or leave it unset');
  const bad = /[^\x21-\x7e]/.exec(token);
  if (bad) {
    throw new TypeError(`AUTH_TOKEN (authToken) contains ${/\s/.test(bad[0]) ? 'whitespace' : 'a character outside visible ASCII'} at position ${bad.index} ` +
      '(a trailing newline from a secret file?): a bearer token is one word of visible ASCII characters');
  }
  return token;
}

// Errors of the wire format's decoders (protocol/) and of the engine, whose checks come after
// this app's and still leave the cache as it was; say what they were. An approximate mode's key
// or value is checked by the engine alone: its invalid_argument names it.
function fromEngine(error) {
  if (error.code === 'bad_length') return new HttpError('bad_length', error.message);
  if (error.code === 'evicted') return new HttpError('unknown_session', error.message, { extra: { reason: 'evicted' } });
  if (error.code === 'unknown_session') return new HttpError('unknown_session', error.message);
  if (error.code === 'invalid_argument' || error.name === 'RangeError') return new HttpError('bad_parameter', error.message);
  return null;
}

/**
 * The layer-node app. `state` (a NodeState) says whether the node is loaded, how far loading
 * got and whether the process is shutting down; pass `node` alone for a node that is already
 * loaded. maxTokens bounds a request's rows (the body limit is maxTokens · n_embd · 4 bytes);
 * maxQueue bounds the requests admitted besides the running one (429 beyond it); maxLogitsBytes
 * bounds one logits request (rows × n_vocab × 4); bodyTimeoutMs is the deadline of a body once
 * admitted (408), sendTimeoutMs how long a client may read nothing of an answer, after which
 * closeConnection(c) (the host's, when it has one) cuts it off. An answer holds its request's
 * place in the queue until it has been read or abandoned: a host must read or cancel each body.
 * observer receives optional hooks: request(method, route, status, ms, trace), tokens(n),
 * layers(firstLayer, msPerLayer), error(code, message), answerLost(route, outcome, message, trace),
 * batch({entries, rows, waitMs}) after each engine step of forwards (LayerNode.observeBatches),
 * and metrics() -> {contentType, text} to serve GET /metrics.
 * @example
 * const app = createLayerNodeApp({ node, authToken: process.env.AUTH_TOKEN });
 * const response = await app.fetch(new Request('http://node/v1/info', { headers: { authorization: `Bearer ${token}` } }));
 */
export function createLayerNodeApp({ node, authToken, maxTokens = 2048, maxQueue = 16, maxLogitsBytes = DEFAULT_MAX_LOGITS_BYTES,
  bodyTimeoutMs = DEFAULT_BODY_TIMEOUT_MS, sendTimeoutMs = DEFAULT_SEND_TIMEOUT_MS, closeConnection = null,
  observer = {}, state = NodeState.of(node) } = {}) {
  if (!state) throw new TypeError('createLayerNodeApp needs a node or a state');
  checkAuthToken(authToken);
  const queue = new WorkQueue(maxQueue);
  const records = new SessionRecords();
  const app = new Hono();
  // What the node's forward bodies hold (protocol/forward_body.js): per row the hidden state,
  // (models with per-layer embeddings) the node's layers' per-layer inputs, the K/V rows of the
  // source layers it mirrors.
  const shape = (n) => ({
    nEmbd: n.nEmbd, perLayerFloats: (n.layers[1] - n.layers[0]) * (n.nEmbdPerLayer ?? 0), kvRowsIn: n.kvRowsIn ?? [], kvRowsOut: n.kvRowsOut ?? [],
  });
  const rowBytes = (n) => forwardRowBytes(shape(n));
  const maxBodyBytes = () => maxTokens * rowBytes(state.node);
  const describeLimit = () => `the limit is ${maxBodyBytes()} bytes (max_tokens ${maxTokens} · ${rowBytes(state.node)} bytes per row)`;

  // An engine call in the queue's order (after the session's earlier calls), counted until it
  // settles so a shutdown waits for it.
  const engine = (ticket, job, session) => state.track(ticket.run(job, session));
  // The node's engine steps reach the observer once per node (the state's node is set once loaded).
  const observed = new WeakSet();
  const observeBatches = (n) => {
    if (observed.has(n) || !observer.batch || !n.observeBatches) return;
    observed.add(n);
    n.observeBatches((batch) => observer.batch(batch));
  };

  // Admits the request (429 beyond the queue), reads its body under the deadline and the limit
  // (the layer calls' unless the route has its own), and hands both to handle(body, ticket) ->
  // Response. The ticket goes with the answer (answer() releases it once sent), or back at once
  // when the request fails.
  const withBody = async (c, handle, limit = { maxBytes: maxBodyBytes(), describeLimit }) => {
    const ticket = queue.admit();
    try {
      return await handle(await readBody(c.req.raw, { ...limit, timeoutMs: bodyTimeoutMs }), ticket);
    } catch (error) {
      ticket.release();
      throw error;
    }
  };
  // The answer's end gives the ticket back; an answer that did not reach its client is reported.
  const streaming = (c, ticket) => ({
    sendTimeoutMs,
    onStall: closeConnection && (() => closeConnection(c)),
    end: (outcome, error) => {
      ticket.release();
      if (outcome !== 'done') observer.answerLost?.(routePath(c, -1), outcome, error?.message ?? String(error ?? ''), c.get('trace'));
    },
  });
  const answer = (c, ticket, bytes, headers) => bytesResponse(bytes, headers, streaming(c, ticket));

  // Each request in a span of the caller's trace (traceparent), or of a new one: its log lines
  // carry it. The span ends once the answer's headers are out (its body streams on).
  app.use('*', async (c, next) => {
    const t0 = performance.now();
    const span = serverSpan(c.req.method, c.req.header(TRACEPARENT));
    c.set('trace', span);
    await next();
    endRequestSpan(c, span);
    observer.request?.(c.req.method, routePath(c, -1), c.res.status, performance.now() - t0, span);
  });

  app.onError((error, c) => {
    const known = error instanceof HttpError ? error : fromEngine(error);
    const reply = known ?? new HttpError('internal', `${c.req.method} ${routePath(c, -1)} failed: ${error.code ?? error.name}: ${error.message}`);
    observer.error?.(reply.code, reply.message);
    return reply.toResponse();
  });
  app.notFound((c) => new HttpError('not_found', `no route ${c.req.method} ${new URL(c.req.url).pathname.slice(0, 200)}`).toResponse());

  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', (c) => (state.ready
    ? c.json({ ready: true })
    : c.json({ ready: false, ...(state.shuttingDown ? { shutting_down: true } : {}), progress: { bytes: state.progress.bytes, total_bytes: state.progress.totalBytes } }, 503)));

  if (authToken) {
    // Hono's bearerAuth answers 400 to a malformed header; the protocol says 401 for any missing
    // or wrong token. timingSafeEqual compares SHA-256 digests, so the time says nothing of the token.
    const authorize = async (c, next) => {
      const match = /^Bearer +(\S+)$/i.exec(c.req.header('authorization') ?? '');
      if (!match || !(await timingSafeEqual(authToken, match[1]))) {
        throw new HttpError('unauthorized', 'missing or wrong bearer token (Authorization: Bearer <token>)', { headers: { 'www-authenticate': 'Bearer' } });
      }
      await next();
    };
    app.use('/v1/*', authorize);
    app.use('/metrics', authorize);
  }

  app.get('/metrics', async () => {
    if (!observer.metrics) throw new HttpError('not_found', 'this host serves no metrics');
    const { contentType: type, text } = await observer.metrics();
    return new Response(text, { headers: { 'content-type': type } });
  });

  app.use('/v1/*', async (c, next) => {
    if (state.shuttingDown) throw new HttpError('shutting_down', 'the node is shutting down: send the request to another instance');
    if (!state.ready) {
      throw new HttpError('not_ready', `the node is loading its weights (${state.progress.bytes} of ${state.progress.totalBytes} bytes): poll /readyz`,
        { headers: { 'retry-after': '1' } });
    }
    await next();
  });
  // A declared Content-Length above the limit is refused before anything else is done; an encode
  // call's limit is its own, known from its query (encode_routes.js).
  app.post('/v1/*', async (c, next) => {
    if (!c.req.path.startsWith('/v1/encode/')) checkDeclaredLength(c.req.raw, maxBodyBytes(), describeLimit);
    await next();
  });

  app.get('/v1/info', (c) => {
    const n = state.node;
    return c.json({
      ...encodeNodeInfo(n, { model: redactSecrets(n.info().model), maxContext: maxContext(n), maxTokens, maxLogitsBytes }),
      encoder: encodeEncoderInfo(state.encoder?.config ?? null, state.encoder ?? {}),
    });
  });

  app.route('/v1/encode', encodeRoutes({ state, withBody, engine, answer }));

  // The session the node holds, or a 404 saying why it does not.
  const held = (id) => {
    const nPast = state.node.sessionLength(id);
    if (nPast !== null) return nPast;
    const why = records.whyGone(id);
    throw new HttpError('unknown_session', why
      ? `session "${id}" was evicted (least recently used beyond the node's session or KV-memory limit): start it again from position 0`
      : `session "${id}" is unknown to this node (never created, deleted, or lost in a restart): start it again from position 0`,
    { extra: why ? { reason: why } : {} });
  };

  app.get('/v1/sessions/:id', (c) => {
    const id = sessionId(c.req.param('id'));
    return c.json({ id, n_past: held(id), kv_bytes: state.node.sessionBytes(id) });
  });

  // Through the queue, after the session's forwards: a session must not be freed while one uses it.
  app.delete('/v1/sessions/:id', async (c) => {
    const id = sessionId(c.req.param('id'));
    await state.track(queue.run(() => {
      held(id);
      state.node.dropSession(id);
      records.deleted(id);
    }, id));
    return c.body(null, 204);
  });

  // In the session's line, after its forwards; cutting to the length it holds changes nothing, so
  // a repeat is harmless. A cut the engine refuses leaves the session as it was.
  app.post('/v1/sessions/:id/truncate', async (c) => {
    const id = sessionId(c.req.param('id'));
    const nPast = position(c.req.query('n_past'), 'n_past');
    const n = state.node;
    const cut = await state.track(queue.run(async () => {
      const length = held(id);
      if (nPast > length) {
        throw new HttpError('bad_parameter', `n_past ${nPast} but session "${id}" holds ${length} positions: a cut keeps at most what it holds`, { extra: { n_past: length } });
      }
      if (nPast === length) return length;
      let reached;
      try {
        reached = await n.truncate(id, nPast);
      } catch (error) {
        if (error.code !== 'failed_precondition') throw error;
        throw new HttpError('cut_refused', `session "${id}": ${error.message}`, { extra: { n_past: length } });
      }
      records.truncated(id);
      return reached;
    }, id));
    return c.json({ id, n_past: cut });
  });

  // In the session's line, after its forwards: the checkpoint is of the length they leave.
  app.post('/v1/sessions/:id/checkpoint', async (c) => {
    const id = sessionId(c.req.param('id'));
    const raw = c.req.query('keep');
    const keep = raw === undefined ? DEFAULT_CHECKPOINTS : position(raw, 'keep');
    if (keep < 1 || keep > MAX_CHECKPOINTS) throw new HttpError('bad_parameter', `keep=${keep}: a session keeps 1 to ${MAX_CHECKPOINTS} checkpoints`);
    const nPast = await state.track(queue.run(async () => {
      held(id);
      return state.node.checkpoint(id, { keep });
    }, id));
    return c.json({ id, n_past: nPast, kv_bytes: state.node.sessionBytes(id) });
  });

  app.post('/v1/sessions/:id/forward', async (c) => {
    const n = state.node;
    const id = sessionId(c.req.param('id'));
    const startPos = position(c.req.query('start_pos'), 'start_pos');
    const { start_pos: _startPos, last_only: lastOnlyText, span: spanText, ...approxParameters } = c.req.query();
    const lastOnly = flag(lastOnlyText, 'last_only');
    const span = flag(spanText, 'span');
    // Every other query parameter is an approximate mode's, for the engine to check.
    const approx = approxFromQuery(Object.entries(approxParameters));
    const exitState = decodeExitState(c.req.header(EXIT_STATE));
    const key = idempotencyKey(c.req.header('idempotency-key'));
    contentType(c.req.header('content-type'), OCTETS);
    observeBatches(n);
    return withBody(c, async (body, ticket) => {
      const form = shape(n);
      const { rows, hidden, perLayer, kvRows } = decodeForwardBody(body, form);
      finiteValues(hidden, n.nEmbd, 'hidden states');
      if (perLayer) finiteValues(perLayer, n.nEmbdPerLayer, 'per-layer inputs');
      const limitCtx = maxContext(n);
      if (startPos + rows > limitCtx) {
        throw new HttpError('context_full', `start_pos ${startPos} + ${rows} positions exceed the node's max context ${limitCtx}`);
      }
      const fingerprint = key === undefined ? null : await requestFingerprint({ session: id, startPos, lastOnly, span, approx, exitState, body });
      const reply = await engine(ticket, async () => {
        const stored = n.sessionLength(id) !== null && records.replay(id, key, fingerprint);
        if (stored) return { ...stored, replayed: true };
        const nPast = startPos === 0 ? n.sessionLength(id) ?? 0 : held(id);
        if (nPast !== startPos) {
          throw new HttpError('position_mismatch', `start_pos ${startPos} but session "${id}" holds ${nPast} positions: send start_pos=${nPast}`,
            { extra: { n_past: nPast } });
        }
        const hiddenOut = await n.forward({ session: id, startPos, hidden, lastOnly, approx, exitState, perLayer, kvRows, span });
        const out = encodeForwardAnswer(hiddenOut, form.kvRowsOut.length ? n.kvRowsOf(hiddenOut) : null, form, rows);
        records.created(id);
        const result = { out, nPast: n.sessionLength(id), layerMs: n.layerTimings(id), approxStats: approxModesOn(approx) ? n.approxStats(id) : null };
        if (key !== undefined) records.remember(id, key, fingerprint, result, (other) => n.sessionLength(other) !== null);
        return result;
      }, id);
      if (!reply.replayed) {
        observer.tokens?.(rows);
        observer.layers?.(n.layers[0], reply.layerMs);
      }
      return answer(c, ticket, reply.out, {
        'content-type': OCTETS,
        'x-layerfold-n-past': String(reply.nPast),
        [LAYER_MS]: encodeLayerMs(reply.layerMs),
        ...(reply.approxStats ? { [APPROX_STATS]: encodeApproxStats(reply.approxStats) } : {}),
        ...(reply.replayed ? { 'x-layerfold-replayed': '1' } : {}),
      });
    });
  });

  app.post('/v1/embed', async (c) => {
    const n = state.node;
    if (!n.withEmbedding) throw new HttpError('not_found', `this node serves layers ${n.layers[0]}-${n.layers[1] - 1}: the token embedding is on the node serving layer 0`);
    contentType(c.req.header('content-type'), 'application/json');
    return withBody(c, async (body, ticket) => {
      const tokens = decodeEmbedRequest(new TextDecoder().decode(body), { nVocab: n.nVocab, maxTokens });
      const embedded = await engine(ticket, async () => {
        const hidden = n.embed(tokens);
        return encodeEmbedAnswer(hidden, n.nEmbdPerLayer > 0 ? await n.perLayerInputs(tokens, hidden) : null);
      });
      return answer(c, ticket, embedded, { 'content-type': OCTETS });
    });
  });

  // Rows that stand for no token (a media item's soft tokens) need the per-layer inputs that
  // llama.cpp gives embedding rows: the padding token 0's row of the table with the rows' own
  // projection, which only the node holding the table and the projection computes.
  app.post('/v1/per-layer-inputs', async (c) => {
    const n = state.node;
    if (!n.withEmbedding) throw new HttpError('not_found', `this node serves layers ${n.layers[0]}-${n.layers[1] - 1}: per-layer inputs are computed on the node serving layer 0`);
    if (!(n.nEmbdPerLayer > 0)) throw new HttpError('bad_parameter', 'this model has no per-layer embeddings (n_embd_per_layer 0): its rows need no per-layer inputs');
    contentType(c.req.header('content-type'), OCTETS);
    const limit = { maxBytes: maxTokens * n.nEmbd * F32, describeLimit: () => `the limit is ${maxTokens * n.nEmbd * F32} bytes (max_tokens ${maxTokens} rows of n_embd ${n.nEmbd} float32)` };
    checkDeclaredLength(c.req.raw, limit.maxBytes, limit.describeLimit);
    return withBody(c, async (body, ticket) => {
      const rows = hiddenStates(body, n.nEmbd);
      const perLayer = await engine(ticket, () => n.perLayerInputs(new Int32Array(rows.length / n.nEmbd), rows));
      return answer(c, ticket, perLayer, { 'content-type': OCTETS });
    }, limit);
  });

  // A drafting call's query (protocol/draft.js), or null; a bad one is a 400 naming it.
  const draftAsked = (c, n, k) => {
    let asked;
    try {
      asked = readDraftQuery({ draft: c.req.query('draft'), session: c.req.query('session'), tokens: c.req.query('tokens') }, n.nVocab);
    } catch (error) {
      throw new HttpError('bad_parameter', error.message);
    }
    if (asked === null) return null;
    if (k !== null) throw new HttpError('bad_parameter', 'draft and top_k: a drafting step answers its whole logits');
    if (!n.drafts) throw new HttpError('bad_parameter', 'draft: this node has no draft model (serve --draft-model)');
    return { ...asked, session: sessionId(asked.session) };
  };

  // Logits are computed chunkRows() rows per engine call; the binary answer streams them as the
  // client pulls, so the node holds one chunk of it at a time whatever the request's size. A
  // drafting call (draft=k) is a decode step's few rows (at most MAX_DRAFT + 1): its logits are
  // held whole, then its drafts made in the session's line (after its forwards) and sent in the
  // x-layerfold-draft header before them.
  app.post('/v1/logits', async (c) => {
    const n = state.node;
    if (!n.withHead) throw new HttpError('not_found', `this node serves layers ${n.layers[0]}-${n.layers[1] - 1}: the output head is on the node serving the last layer`);
    const k = topKParameter(c.req.query('top_k'), n.nVocab);
    const draft = draftAsked(c, n, k);
    contentType(c.req.header('content-type'), OCTETS);
    return withBody(c, async (body, ticket) => {
      const hidden = hiddenStates(body, n.nEmbd);
      const rows = hidden.length / n.nEmbd;
      checkLogitsSize({ rows, nVocab: n.nVocab, k, maxLogitsBytes });
      const step = chunkRows(n.nVocab);
      // Its own line: concurrent requests' chunks reach the node together and share LM-head passes.
      const line = Symbol('a logits request');
      const logitsFrom = (r) => engine(ticket, () => n.logitsAsync(hidden.subarray(r * n.nEmbd, Math.min(rows, r + step) * n.nEmbd)), line);
      if (draft !== null) {
        if (draft.tokens.length !== rows) throw new HttpError('bad_parameter', `tokens: ${draft.tokens.length} tokens for a step of ${rows} rows`);
        const logits = new Float32Array(rows * n.nVocab);
        for (let r = 0; r < rows; r += step) logits.set(await logitsFrom(r), r * n.nVocab);
        const drafted = await engine(ticket, async () => {
          held(draft.session);
          return n.draftAfter(draft.session, { tokens: draft.tokens, hidden, logits, k: draft.k });
        }, draft.session);
        const bytes = new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength);
        return answer(c, ticket, bytes, { 'content-type': OCTETS, [DRAFT]: encodeDraft(drafted) });
      }
      if (k !== null) {
        const top = [];
        for (let r = 0; r < rows; r += step) top.push(...topKRows(await logitsFrom(r), n.nVocab, k));
        return answer(c, ticket, new TextEncoder().encode(JSON.stringify({ rows: top })), { 'content-type': 'application/json' });
      }
      // The first chunk before the status is sent, so an engine error is still a proper answer.
      let chunk = await logitsFrom(0);
      let next = step;
      const asBytes = (floats) => new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
      return streamedResponse({
        ...streaming(c, ticket),
        headers: { 'content-type': OCTETS, 'content-length': String(rows * n.nVocab * F32) },
        next: async () => {
          if (chunk === null) {
            if (next >= rows) return null;
            chunk = await logitsFrom(next);
            next += step;
          }
          const bytes = asBytes(chunk);
          chunk = null;
          return bytes;
        },
      });
    });
  });

  // A known path with another method: 405 naming the allowed ones.
  for (const [path, allow] of [['/v1/info', 'GET'], ['/v1/sessions/:id', 'GET, DELETE'], ['/v1/sessions/:id/forward', 'POST'], ['/v1/sessions/:id/truncate', 'POST'], ['/v1/sessions/:id/checkpoint', 'POST'],
    ['/v1/embed', 'POST'], ['/v1/per-layer-inputs', 'POST'], ['/v1/logits', 'POST'], ['/healthz', 'GET'], ['/readyz', 'GET'], ['/metrics', 'GET']]) {
    app.all(path, (c) => {
      throw new HttpError('method_not_allowed', `${c.req.method} ${path}: allowed ${allow}`, { headers: { allow } });
    });
  }
  return app;
}
