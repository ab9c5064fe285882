// Spans through OpenTelemetry's API: without an SDK they record nothing yet still carry the
// trace (the caller's trace id, ids of their own); with one, the recorded spans' ids are the ones
// handed on, and what a failed span records is redacted.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {test} from "node:test";

import {inSpan, serverSpan} from "../../../js-glue/src/telemetry/spans.js";
import {root} from "../support/models.mjs";

const requireDependency = createRequire(path.join(root, "js-glue", "package.json"));
const {trace} = requireDependency("@opentelemetry/api");
const {InMemorySpanExporter, SimpleSpanProcessor, TracerProvider} = requireDependency("@opentelemetry/sdk-trace");

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

test("without an SDK: the caller's trace id, a span id of each span's own", async () => {
  const request = serverSpan("POST", CALLER);
  assert.equal(request.traceId, TRACE_ID);
  assert.match(request.spanId, /^[0-9a-f]{16}$/);
  assert.notEqual(request.spanId, "00f067aa0ba902b7");
  const seen = await inSpan(request, "pipeline step", {}, async (step) => [step.traceId, step.spanId, step.flags]);
  assert.equal(seen[0], TRACE_ID);
  assert.notEqual(seen[1], request.spanId);
  assert.equal(seen[2], "01");
  assert.equal(await inSpan(null, "untraced", {}, async (span) => span), null);
});

test("with an SDK: the recorded spans' ids, parent to child, and a failure recorded redacted", async (t) => {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({spanProcessors: [new SimpleSpanProcessor({exporter})]});
  trace.setGlobalTracerProvider(provider);
  t.after(() => provider.shutdown().then(() => trace.disable()));

  const request = serverSpan("POST", CALLER);
  const failure = Object.assign(new Error("GET https://bucket.example/m.gguf?X-Amz-Signature=abc123 failed"), {code: "unavailable"});
  await assert.rejects(inSpan(request, "pipeline step", {"layerfold.tokens": 3}, async () => { throw failure; }), failure);
  request.end();
  await provider.forceFlush();

  const [step, served] = exporter.getFinishedSpans();
  assert.equal(served.spanContext().spanId, request.spanId);
  assert.equal(served.spanContext().traceId, TRACE_ID);
  assert.equal(served.parentSpanContext.spanId, "00f067aa0ba902b7");
  assert.equal(step.parentSpanContext.spanId, request.spanId);
  assert.equal(step.attributes["layerfold.tokens"], 3);
  assert.equal(step.status.code, 2, "ERROR");
  const recorded = JSON.stringify([step.status, step.events]);
  assert.doesNotMatch(recorded, /abc123/);
  assert.match(step.status.message, /https:\/\/bucket\.example\/m\.gguf\?\[redacted\] failed/);
});
