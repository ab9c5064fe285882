// Spans of one chat request across processes: the gateway (this process, an SDK registered with
// an in-memory exporter) records the request's span in the caller's trace, a span per pipeline
// step and a client span per node call within it; the two `layerfold serve` nodes, configured
// with OTEL_EXPORTER_OTLP_ENDPOINT, export each call's server span over OTLP/HTTP to a local
// receiver, children of the gateway's client spans in the same trace.
import assert from "node:assert/strict";
import http from "node:http";
import {createRequire} from "node:module";
import path from "node:path";
import {test} from "node:test";

import {startGateway, tiny} from "../support/gateway_fixture.mjs";
import {root} from "../support/models.mjs";
import {startServer} from "../support/server_process.mjs";

// js-glue's dependencies: the API the gateway's code uses, and the SDK that records its spans here.
const requireDependency = createRequire(path.join(root, "js-glue", "package.json"));
const {SpanKind, trace} = requireDependency("@opentelemetry/api");
const {InMemorySpanExporter, SimpleSpanProcessor, TracerProvider} = requireDependency("@opentelemetry/sdk-trace");

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// An OTLP/HTTP receiver on loopback: {url, exports (each POST's path and JSON body), close()}.
async function otlpReceiver(t) {
  const exports = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      exports.push({path: req.url, type: req.headers["content-type"], body: Buffer.concat(chunks).toString()});
      res.writeHead(200, {"content-type": "application/json"}).end("{}");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  return {url: `http://127.0.0.1:${server.address().port}`, exports};
}

test("a chat request's spans: the gateway's request, steps and node calls, and each node's exported over OTLP, in one trace", async (t) => {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({spanProcessors: [new SimpleSpanProcessor({exporter})]});
  trace.setGlobalTracerProvider(provider);
  t.after(() => provider.shutdown().then(() => trace.disable()));

  const receiver = await otlpReceiver(t);
  const servers = await Promise.all(["0-0", "1-1"].map((layers, i) => startServer(t, {args: ["--model", tiny(), "--layers", layers],
    env: {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: `node-${i}`}})));
  const {url} = await startGateway(t, {nodes: servers.map((s) => s.url).join(",")});
  const response = await fetch(`${url}/v1/chat/completions`, {method: "POST",
    headers: {"content-type": "application/json", traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`},
    body: JSON.stringify({model: "tiny", messages: [{role: "user", content: "hello"}], max_tokens: 3, temperature: 0})});
  assert.equal(response.status, 200);
  await response.json();

  // The request's span ends with its generation, just after the answer.
  const spans = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === TRACE_ID);
  for (let i = 0; i < 100 && !spans().some((s) => s.kind === SpanKind.SERVER); i++) await sleep(20);
  const mine = spans();
  const request = mine.find((s) => s.kind === SpanKind.SERVER);
  assert.equal(request?.name, "POST /v1/chat/completions", JSON.stringify(mine.map((s) => s.name)));
  assert.equal(request.parentSpanContext.spanId, CALLER_SPAN);
  assert.equal(request.attributes["http.route"], "/v1/chat/completions");
  assert.equal(request.status.code, 0, "unset: not failed");
  const steps = mine.filter((s) => s.name === "pipeline step");
  assert.ok(steps.length >= 3, `prefill and a step per token after the first: ${steps.length}`);
  for (const step of steps) assert.equal(step.parentSpanContext.spanId, request.spanContext().spanId);
  // The prefill's checkpoint calls each node too (Pipeline.checkpoint).
  const checkpoints = mine.filter((s) => s.name === "pipeline checkpoint");
  assert.equal(checkpoints.length, 1);
  const stepIds = new Set([...steps, ...checkpoints].map((s) => s.spanContext().spanId));
  const calls = mine.filter((s) => s.kind === SpanKind.CLIENT);
  for (const call of calls) assert.ok(stepIds.has(call.parentSpanContext.spanId), `${call.name} outside a step or checkpoint`);
  assert.deepEqual(new Set(calls.map((s) => s.name)), new Set(["POST /v1/embed", "POST /v1/sessions/{id}/forward", "POST /v1/sessions/{id}/checkpoint", "POST /v1/logits"]));
  const callIds = new Set(calls.map((s) => s.spanContext().spanId));

  // A node exports what it has left when it stops.
  for (const server of servers) assert.deepEqual(await server.stop(), {code: 0, signal: null});
  const exported = receiver.exports.filter((e) => e.path === "/v1/traces");
  assert.ok(exported.length > 0, "no OTLP export reached the receiver");
  const byService = new Map();
  for (const {type, body} of exported) {
    assert.match(type, /^application\/json/);
    for (const resourceSpans of JSON.parse(body).resourceSpans) {
      const service = resourceSpans.resource.attributes.find((a) => a.key === "service.name").value.stringValue;
      for (const scope of resourceSpans.scopeSpans) {
        for (const span of scope.spans) if (span.traceId === TRACE_ID) byService.set(service, [...byService.get(service) ?? [], span]);
      }
    }
  }
  assert.deepEqual([...byService.keys()].sort(), ["node-0", "node-1"]);
  for (const [service, nodeSpans] of byService) {
    assert.ok(nodeSpans.some((s) => s.name === "POST /v1/sessions/:id/forward"), `${service}: ${nodeSpans.map((s) => s.name)}`);
    for (const span of nodeSpans) assert.ok(callIds.has(span.parentSpanId), `${service}'s ${span.name} is no child of a gateway call`);
  }
});
