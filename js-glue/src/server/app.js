// The layer node's HTTP API (docs/http-api.md) as a Hono app over web-standard Request and
// Response only: the Node container (node_host.js) and the edge worker mount this same app.
// Every check of a request happens before a session is touched, and engine calls go through one
// bounded queue, so a refused request leaves every KV cache as it was.
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { routePath } from 'hono/route';
import { timingSafeEqual } from 'hono/utils/buffer';

import { approxModesOn } from '../node/approx_modes.js';
import { logSoftmax, topK } from '../tokens/logits.js';
import { HttpError } from './http_error.js';
import { NodeState } from './node_state.js';
import { approxParameters, contentType, exitStateHeader, flag, hiddenStates, position, sessionId, tokenIds, topKParameter } from './request_checks.js';
import { SessionRecords } from './session_records.js';
import { WorkQueue } from './work_queue.js';

const F32 = 4;
const OCTETS = 'application/octet-stream';

// Positions a session of this node may hold: its own limit, else the model's context length.
function maxContext(node) {
  return node.maxContext || node.modelInfo.n_ctx_train || Infinity;
}

function octets(floats, headers = {}) {
  return new Response(new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength), {
    headers: { 'content-type': OCTETS, ...headers },
  });
}

// Engine errors that get past the checks still leave the cache as it was; say what they were.
function fromEngine(error) {
  if (error.code === 'evicted') return new HttpError('unknown_session', error.message, { extra: { reason: 'evicted' } });
  if (error.code === 'invalid_argument' || error.name === 'RangeError') return new HttpError('bad_parameter', error.message);
  return null;
}

/**
 * The layer-node app. `state` (a NodeState) says whether the node is loaded, how far loading
 * got and whether the process is shutting down; pass `node` alone for a node that is already
 * loaded. maxTokens bounds a request's rows (the body limit is maxTokens · n_embd · 4 bytes);
 * maxQueue bounds the requests waiting for the engine. observer receives optional hooks:
 * request(method, route, status, ms), tokens(n), layers(firstLayer, msPerLayer), error(code,
 * message), and metrics() -> {contentType, text} to serve GET /metrics.
 * @example
 * const app = createLayerNodeApp({ node, authToken: process.env.AUTH_TOKEN });
 * const response = await app.fetch(new Request('http://node/v1/info', { headers: { authorization: `Bearer ${token}` } }));
 */
export function createLayerNodeApp({ node, authToken, maxTokens = 2048, maxQueue = 16, observer = {}, state = NodeState.of(node) } = {}) {
  if (!state) throw new TypeError('createLayerNodeApp needs a node or a state');
  const queue = new WorkQueue(maxQueue);
  const run = (job) => state.track(queue.run(job));
  const records = new SessionRecords();
  const app = new Hono();
  let limit = null;  // the body-limit middleware, made once the node (and so n_embd) is known

  app.use('*', async (c, next) => {
    const t0 = performance.now();
    await next();
    observer.request?.(c.req.method, routePath(c, -1), c.res.status, performance.now() - t0);
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
  app.post('/v1/*', (c, next) => {
    const maxBytes = maxTokens * state.node.nEmbd * F32;
    limit ??= bodyLimit({
      maxSize: maxBytes,
      onError: () => {
        throw new HttpError('too_large', `body above ${maxBytes} bytes (max_tokens ${maxTokens} · n_embd ${state.node.nEmbd} · 4)`);
      },
    });
    return limit(c, next);
  });

  app.get('/v1/info', (c) => {
    const n = state.node;
    const info = n.info();
    return c.json({
      model: info.model, layers: n.layers, n_layer: n.nLayer, n_embd: n.nEmbd, n_vocab: n.nVocab,
      has_embed: n.withEmbedding, has_head: n.withHead, build: info.build, threads: info.threads,
      sessions: info.sessions, kv_bytes: info.kvBytes, wasm_memory_bytes: info.wasmMemoryBytes,
      max_sessions: n.maxSessions, max_context: maxContext(n), max_tokens: maxTokens,
    });
  });

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

  // Through the queue: a session must not be freed while a forward uses it.
  app.delete('/v1/sessions/:id', async (c) => {
    const id = sessionId(c.req.param('id'));
    await run(() => {
      held(id);
      state.node.dropSession(id);
      records.deleted(id);
    });
    return c.body(null, 204);
  });

  app.post('/v1/sessions/:id/forward', async (c) => {
    const n = state.node;
    const id = sessionId(c.req.param('id'));
    const startPos = position(c.req.query('start_pos'), 'start_pos');
    const lastOnly = flag(c.req.query('last_only'), 'last_only');
    const approx = approxParameters((name) => c.req.query(name));
    const exitState = exitStateHeader(c.req.header('x-layerfold-exit-state'));
    contentType(c.req.header('content-type'), OCTETS);
    const hidden = hiddenStates(await c.req.arrayBuffer(), n.nEmbd);
    const rows = hidden.length / n.nEmbd;
    const limitCtx = maxContext(n);
    if (startPos + rows > limitCtx) {
      throw new HttpError('context_full', `start_pos ${startPos} + ${rows} positions exceed the node's max context ${limitCtx}`);
    }
    const key = c.req.header('idempotency-key');
    const reply = await run(async () => {
      const stored = n.sessionLength(id) !== null && records.replay(id, key, startPos, lastOnly);
      if (stored) return { ...stored, replayed: true };
      const nPast = startPos === 0 ? n.sessionLength(id) ?? 0 : held(id);
      if (nPast !== startPos) {
        throw new HttpError('position_mismatch', `start_pos ${startPos} but session "${id}" holds ${nPast} positions: send start_pos=${nPast}`,
          { extra: { n_past: nPast } });
      }
      const out = await n.forward({ session: id, startPos, hidden, lastOnly, approx, exitState });
      records.created(id);
      const result = { out, nPast: n.sessionLength(id), layerMs: n.layerTimings(id), approxStats: approxModesOn(approx) ? n.approxStats(id) : null };
      if (key !== undefined) records.remember(id, key, startPos, lastOnly, result, (other) => n.sessionLength(other) !== null);
      return result;
    });
    if (!reply.replayed) {
      observer.tokens?.(rows);
      observer.layers?.(n.layers[0], reply.layerMs);
    }
    return octets(reply.out, {
      'x-layerfold-n-past': String(reply.nPast),
      'x-layerfold-layer-ms': reply.layerMs.map((ms) => ms.toFixed(3)).join(','),
      ...(reply.approxStats ? { 'x-layerfold-approx': JSON.stringify(reply.approxStats) } : {}),
      ...(reply.replayed ? { 'x-layerfold-replayed': '1' } : {}),
    });
  });

  app.post('/v1/embed', async (c) => {
    const n = state.node;
    if (!n.withEmbedding) throw new HttpError('not_found', `this node serves layers ${n.layers[0]}-${n.layers[1] - 1}: the token embedding is on the node serving layer 0`);
    contentType(c.req.header('content-type'), 'application/json');
    const tokens = tokenIds(await c.req.text(), n.nVocab, maxTokens);
    return octets(await run(() => n.embed(tokens)));
  });

  app.post('/v1/logits', async (c) => {
    const n = state.node;
    if (!n.withHead) throw new HttpError('not_found', `this node serves layers ${n.layers[0]}-${n.layers[1] - 1}: the output head is on the node serving the last layer`);
    const k = topKParameter(c.req.query('top_k'), n.nVocab);
    contentType(c.req.header('content-type'), OCTETS);
    const hidden = hiddenStates(await c.req.arrayBuffer(), n.nEmbd);
    const logits = await run(() => n.logits(hidden));
    if (k === null) return octets(logits);
    const rows = Array.from({ length: hidden.length / n.nEmbd }, (_, r) => {
      const row = logits.subarray(r * n.nVocab, (r + 1) * n.nVocab);
      const logProbs = logSoftmax(row);
      return { top: topK(row, k).map((id) => ({ id, logit: row[id], p: Math.exp(logProbs[id]) })) };
    });
    return c.json({ rows });
  });

  // A known path with another method: 405 naming the allowed ones.
  for (const [path, allow] of [['/v1/info', 'GET'], ['/v1/sessions/:id', 'GET, DELETE'], ['/v1/sessions/:id/forward', 'POST'],
    ['/v1/embed', 'POST'], ['/v1/logits', 'POST'], ['/healthz', 'GET'], ['/readyz', 'GET'], ['/metrics', 'GET']]) {
    app.all(path, (c) => {
      throw new HttpError('method_not_allowed', `${c.req.method} ${path}: allowed ${allow}`, { headers: { allow } });
    });
  }
  return app;
}
