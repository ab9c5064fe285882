// Spans through OpenTelemetry's API: one per request the gateway or a node serves, per pipeline
// step and per node call. The API is the whole dependency here: with no SDK registered (the
// default, and the edge) every span is a no-op and nothing leaves the process; an SDK registered
// at start (telemetry/otlp.js in Node) records and exports them. Either way a span hands its
// trace id and span id to log lines and to the traceparent of the calls made within it: the
// recorded span's own when there is one, else ids of our own (protocol/traceparent.js), so the
// trace goes from the gateway through every node with or without an SDK. What a span records
// is redacted as a log line is (no credentials of a URL, no signature of a presigned one).
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace as api } from '@opentelemetry/api';
import { routePath } from 'hono/route';

import { redactSecrets } from '../log/redact.js';
import { newSpanId, requestTrace } from '../protocol/traceparent.js';

const tracer = () => api.getTracer('layerfold');

class TracedSpan {
  #span;

  // ids: {traceId, spanId, flags} used when the span records nothing (no SDK, or not sampled).
  constructor(span, ids) {
    this.#span = span;
    const recorded = span.isRecording() ? span.spanContext() : null;
    this.traceId = recorded?.traceId ?? ids.traceId;
    this.spanId = recorded?.spanId ?? ids.spanId;
    this.flags = recorded ? recorded.traceFlags.toString(16).padStart(2, '0') : ids.flags;
  }

  /**
   * A span within this one (a pipeline step, a node call), with attributes.
   * @example const call = step.child('POST /v1/embed', { 'server.address': url }, SpanKind.CLIENT);
   */
  child(name, attributes = {}, kind = SpanKind.INTERNAL) {
    const span = tracer().startSpan(name, { kind, attributes }, api.setSpan(ROOT_CONTEXT, this.#span));
    return new TracedSpan(span, { traceId: this.traceId, spanId: newSpanId(), flags: this.flags });
  }

  /** Names the span once it is known what it was (a request's route, after routing). */
  rename(name) {
    this.#span.updateName(name);
  }

  /** Sets attributes learnt along the way (a response's status). */
  set(attributes) {
    this.#span.setAttributes(attributes);
  }

  /** Ends the span; with an error, as failed, its message (redacted, as in a log line) the status's. */
  end(error = null) {
    if (error) {
      const message = redactSecrets(String(error.message ?? error));
      this.#span.recordException({ name: error.name ?? 'Error', code: error.code, message });
      this.#span.setStatus({ code: SpanStatusCode.ERROR, message });
    }
    this.#span.end();
  }
}

/**
 * The span of a request served, in the trace of its traceparent header (the caller's continued,
 * a new one when it has none or a malformed one).
 * @example const span = serverSpan('POST', c.req.header('traceparent')); ... span.end();
 */
export function serverSpan(name, traceparent) {
  const ids = requestTrace(traceparent);
  const parent = ids.parentId === null ? ROOT_CONTEXT : api.setSpanContext(ROOT_CONTEXT, {
    traceId: ids.traceId, spanId: ids.parentId, traceFlags: parseInt(ids.flags, 16), isRemote: true,
  });
  return new TracedSpan(tracer().startSpan(name, { kind: SpanKind.SERVER }, parent), ids);
}

/**
 * Names a served request's span by its route, known once it was routed (the handler's, or the
 * last matched with index -1 after the handler ran).
 * @example nameRequestSpan(c, c.get('trace'));
 */
export function nameRequestSpan(c, span, index = undefined) {
  const route = routePath(c, index);
  span.rename(`${c.req.method} ${route}`);
  span.set({ 'http.request.method': c.req.method, 'http.route': route });
}

/**
 * Ends a served request's span once answered: named, with the status, failed for a 5xx.
 * @example await next(); endRequestSpan(c, span);
 */
export function endRequestSpan(c, span) {
  nameRequestSpan(c, span, -1);
  span.set({ 'http.response.status_code': c.res.status });
  span.end(c.res.status >= 500 ? new Error(`HTTP ${c.res.status}`) : null);
}

/**
 * Runs job() in a child span of `parent` (none: job() alone), ended when job settles, failed
 * when it throws; job gets the span (or null) to pass on.
 * @example const logits = await inSpan(trace, 'pipeline step', { tokens: 3 }, (span) => pipeline.step(s, t, { trace: span }));
 */
export async function inSpan(parent, name, attributes, job, kind = SpanKind.INTERNAL) {
  if (!parent) return job(null);
  const span = parent.child(name, attributes, kind);
  try {
    const result = await job(span);
    span.end();
    return result;
  } catch (error) {
    span.end(error);
    throw error;
  }
}

export { SpanKind };
