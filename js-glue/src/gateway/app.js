// The OpenAI-compatible gateway as a Hono app over web-standard Request and Response only, so
// the Node host (host.js) and an edge worker can mount the same app: /v1/models,
// /v1/completions and /v1/chat/completions, streamed (server-sent events) or whole, each
// answered by the library's Model (generation/model.js) over the open pipeline. Requests are
// admitted into the Model's bounded line (429 with Retry-After beyond it) before their body is
// read, and stop at the next step when their client goes away or their deadline passes.
import { Hono } from 'hono';
import { routePath } from 'hono/route';
import { timingSafeEqual } from 'hono/utils/buffer';

import { streamedResponse } from '../server/answer_stream.js';
import { checkAuthToken, DEFAULT_BODY_TIMEOUT_MS, DEFAULT_SEND_TIMEOUT_MS } from '../server/app.js';
import { checkDeclaredLength, readBody } from '../server/request_body.js';
import { isSynthetic } from '../gguf/header.js';
import { TRACEPARENT } from '../protocol/traceparent.js';
import { endRequestSpan, nameRequestSpan, serverSpan } from '../telemetry/spans.js';
import { OpenAIError, toOpenAIError } from '../generation/errors.js';
import { chatRequest, completionRequest } from '../generation/params.js';
import { Model } from '../generation/model.js';
import { SSE_HEADERS, sseEvent } from './sse.js';

// A browser page may send another site a text/plain or form body without asking first; a JSON
// content type makes it ask (a CORS preflight, which the gateway never grants), so a generation
// is read only from a body sent as JSON.
function checkJsonContentType(request) {
  const type = request.headers.get('content-type')?.split(';')[0].trim().toLowerCase();
  if (type !== 'application/json') {
    throw new OpenAIError(415, `the request body must be sent as application/json, not ${type ? type : 'without a Content-Type'}`, { code: 'unsupported_media_type' });
  }
}

/** Default bound of a request body (a long conversation's JSON). */
export const DEFAULT_MAX_BODY_BYTES = 4 << 20;
/** Default deadline of a whole request, prompt to last token. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 600_000;

/**
 * The gateway app. `state` is a NodeState whose node is the Pipeline (set once it is open);
 * modelId names the model in /v1/models and must be the request's model. maxQueue: requests
 * admitted besides one (429 beyond); maxCachedSessions: finished chats' sessions kept for
 * prefix reuse; checkpoints: the checkpoints a chat's session keeps per node (Model's); requestTimeoutMs: a request's deadline; sendTimeoutMs: how long a client may
 * read nothing of a stream before closeConnection(c) cuts it; speculative: prompt lookup's
 * options ({minNgram, maxNgram, maxDraft}: PromptLookup) to decode with drafts, or null;
 * encodePrompt(input): a prompt's tokens from tokens/prompt_input.js's input, off the event loop
 * (the Node host's TokenizerThread); omitted, prompts are tokenized inline (an edge isolate).
 * openGrammar(pipeline, endIds): the grammar engine of the pipeline's vocabulary (a
 * tokens/grammar/engine.js GrammarEngine, or the Node host's GrammarThread, which runs one off the
 * event loop) for response_format and enforced tool calls; omitted, those are refused with a 400.
 * media(): the MediaInput reading chats' images (generation/media.js), or null: images refused.
 * observer hooks (all optional): request(method, route, status, ms, trace), promptTokens(n, cached),
 * firstToken(ms), interToken(ms), drafts(drafted, accepted), finished(completionTokens | null, ms, trace),
 * error(type, code, message), metrics() -> {contentType, text}.
 * @example
 * const app = createGatewayApp({ state: NodeState.of(pipeline), modelId: 'tiny', authToken: process.env.AUTH_TOKEN });
 */
export function createGatewayApp({ state, modelId, authToken, maxQueue = 16, maxCachedSessions = 16, checkpoints, requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS,
  maxBodyBytes = DEFAULT_MAX_BODY_BYTES, bodyTimeoutMs = DEFAULT_BODY_TIMEOUT_MS, sendTimeoutMs = DEFAULT_SEND_TIMEOUT_MS,
  speculative = null, encodePrompt, openGrammar = null, media = () => null, closeConnection = null, observer = {} }) {
  checkAuthToken(authToken);
  const app = new Hono();
  let model = null;
  const ready = () => {
    if (state.shuttingDown) throw new OpenAIError(503, 'the gateway is shutting down: send the request to another instance', { code: 'shutting_down' });
    if (!state.ready) throw new OpenAIError(503, 'the gateway is still opening its pipeline: retry shortly', { code: 'not_ready', headers: { 'retry-after': '1' } });
    if (model?.pipeline !== state.node) model = new Model(state.node, { id: modelId, maxQueue, maxCachedSessions, checkpoints, speculative, encodePrompt, openGrammar, media: media() });
    return model;
  };

  // Each request continues its caller's trace (traceparent) or starts one, in a span of its own
  // that every node call it makes carries on and its log lines name. A generation's span ends
  // with its Run (a stream goes on after this returns, and its outcome is the span's rather than
  // a status code); any other request's here.
  app.use('*', async (c, next) => {
    const t0 = performance.now();
    const span = serverSpan(c.req.method, c.req.header(TRACEPARENT));
    c.set('trace', span);
    await next();
    if (!c.get('spanOwnedByRun')) endRequestSpan(c, span);
    observer.request?.(c.req.method, routePath(c, -1), c.res.status, performance.now() - t0, span);
  });
  app.onError((error, c) => {
    const reply = toOpenAIError(error);
    observer.error?.(reply.type, reply.code, reply.message);
    return reply.toResponse();
  });
  app.notFound((c) => new OpenAIError(404, `no route ${c.req.method} ${new URL(c.req.url).pathname.slice(0, 200)}`, { code: 'not_found' }).toResponse());

  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', (c) => c.json({ ready: state.ready }, state.ready ? 200 : 503));

  if (authToken) {
    // As the layer node: any missing or wrong token is a 401, compared through SHA-256 digests
    // so the time taken says nothing of the token.
    const authorize = async (c, next) => {
      const match = /^Bearer +(\S+)$/i.exec(c.req.header('authorization') ?? '');
      if (!match || !(await timingSafeEqual(authToken, match[1]))) {
        throw new OpenAIError(401, 'missing or wrong API key (Authorization: Bearer <key>)', { code: 'invalid_api_key', headers: { 'www-authenticate': 'Bearer' } });
      }
      await next();
    };
    app.use('/v1/*', authorize);
    app.use('/metrics', authorize);
  }

  app.get('/metrics', async () => {
    if (!observer.metrics) throw new OpenAIError(404, 'this host serves no metrics', { code: 'not_found' });
    const { contentType, text } = await observer.metrics();
    return new Response(text, { headers: { 'content-type': contentType } });
  });

  const modelNotFound = (id) => new OpenAIError(404, `the model "${id}" does not exist; this gateway serves "${modelId}"`, { param: 'model', code: 'model_not_found' });
  // synthetic: whether make-model made the model (random weights), known once the pipeline is open.
  const modelObject = () => ({ id: modelId, object: 'model', created: 0, owned_by: 'layerfold', ...(state.node && { synthetic: isSynthetic(state.node.header) }) });
  app.get('/v1/models', (c) => c.json({ object: 'list', data: [modelObject()] }));
  app.get('/v1/models/:id{.+}', (c) => {
    if (c.req.param('id') !== modelId) throw modelNotFound(c.req.param('id'));
    return c.json(modelObject());
  });

  const generation = (parse) => async (c) => {
    const m = ready();
    checkJsonContentType(c.req.raw);
    checkDeclaredLength(c.req.raw, maxBodyBytes, () => `the limit is ${maxBodyBytes} bytes`);
    const ticket = m.admit();
    let request;
    try {
      const bytes = await readBody(c.req.raw, { maxBytes: maxBodyBytes, timeoutMs: bodyTimeoutMs, describeLimit: () => `the limit is ${maxBodyBytes} bytes` });
      let body;
      try {
        body = JSON.parse(new TextDecoder().decode(bytes));
      } catch (error) {
        throw new OpenAIError(400, `the request body is not JSON: ${error.message}`);
      }
      request = parse(body);
      if (request.model !== modelId) throw modelNotFound(request.model);
    } catch (error) {
      ticket.release();
      throw error;
    }
    nameRequestSpan(c, c.get('trace'));
    const reply = await m.start(request, { ticket, signal: c.req.raw.signal, deadlineMs: requestTimeoutMs, trace: c.get('trace'), observer });
    c.set('spanOwnedByRun', true);
    return request.stream ? streamed(c, reply) : Response.json(await state.track(reply.whole()));
  };

  // stream: true — an event per chunk, pulled as the client reads; a client that goes away (or
  // stops reading for sendTimeoutMs) stops the generation and frees its session.
  const streamed = (c, reply) => {
    const chunks = reply.chunks();
    let over = false;
    return streamedResponse({
      headers: SSE_HEADERS,
      sendTimeoutMs,
      onStall: closeConnection && (() => closeConnection(c)),
      next: async () => {
        if (over) return null;
        try {
          const { value, done } = await state.track(chunks.next());
          if (!done) return sseEvent(value);
          over = true;
          return sseEvent('[DONE]');
        } catch (error) {
          over = true;
          const answer = toOpenAIError(error);
          observer.error?.(answer.type, answer.code, answer.message);
          return sseEvent(answer.toJSON());
        }
      },
      end: (outcome, error) => {
        if (outcome === 'done') return;
        state.track(reply.cancel(Object.assign(new Error(`the stream was ${outcome}: ${error?.message ?? error ?? ''}`), { code: 'client_closed' }))).catch(() => {});
      },
    });
  };

  app.post('/v1/chat/completions', generation(chatRequest));
  app.post('/v1/completions', generation(completionRequest));
  return app;
}
