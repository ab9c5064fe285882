// A request's trace across processes: the gateway continues a caller's W3C traceparent (or
// starts a trace when it has none, or a malformed one) and every layer node it calls logs the
// same trace id for its part of the request.
import assert from "node:assert/strict";
import {test} from "node:test";

import {startGateway, tiny} from "../support/gateway_fixture.mjs";
import {startServer} from "../support/server_process.mjs";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Waits for the request lines of `logs` (an array filled as lines arrive) that trace(line) is
// true of, at least one.
async function linesWhere(logs, trace) {
  for (let waited = 0; waited < 5000; waited += 20) {
    const lines = logs.filter((entry) => entry.message === "request" && trace(entry));
    if (lines.length > 0) return lines;
    await sleep(20);
  }
  throw new Error(`no such request line in ${JSON.stringify(logs)}`);
}

// A node's lines for the gateway's generation calls (not its opening's /v1/info or /readyz polls).
const generationCall = (line) => /^\/v1\/(embed|logits|sessions\/)/.test(line.route);

test("one chat request's trace id is in the gateway's log and in both nodes' logs", async (t) => {
  const servers = await Promise.all(["0-0", "1-1"].map((layers) => startServer(t, {args: ["--model", tiny(), "--layers", layers]})));
  const gatewayLogs = [];
  const {url} = await startGateway(t, {nodes: servers.map((s) => s.url).join(","),
    log: (severity, message, fields) => gatewayLogs.push({severity, message, ...fields})});
  const chat = async (headers) => {
    const response = await fetch(`${url}/v1/chat/completions`, {method: "POST", headers: {"content-type": "application/json", ...headers},
      body: JSON.stringify({model: "tiny", messages: [{role: "user", content: "hello"}], max_tokens: 3, temperature: 0})});
    assert.equal(response.status, 200, await response.clone().text());
    await response.json();
  };
  // The trace id of the gateway's latest chat line, after checking each node logged its calls
  // for that request with it, and that a node logged no generation call outside a known trace.
  const seenTraces = new Set();
  const traceOfLast = async () => {
    const lines = await linesWhere(gatewayLogs, (line) => line.route === "/v1/chat/completions" && !seenTraces.has(line.trace_id));
    const id = lines.at(-1).trace_id;
    seenTraces.add(id);
    for (const server of servers) await linesWhere(server.logs, (line) => generationCall(line) && line.trace_id === id);
    return id;
  };

  await chat({traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`});
  assert.equal(await traceOfLast(), TRACE_ID);
  // The gateway's span is its own: neither the caller's nor a node's.
  const gatewaySpan = gatewayLogs.find((line) => line.trace_id === TRACE_ID).span_id;
  assert.match(gatewaySpan, /^[0-9a-f]{16}$/);
  assert.notEqual(gatewaySpan, CALLER_SPAN);

  // Without a traceparent, and with a malformed one (an upper-case id), a new trace each time,
  // carried to the nodes the same way.
  await chat({});
  const fresh = await traceOfLast();
  await chat({traceparent: `00-${TRACE_ID.toUpperCase()}-${CALLER_SPAN}-01`});
  const replaced = await traceOfLast();
  for (const id of [fresh, replaced]) {
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.doesNotMatch(id, /^0+$/);
    assert.notEqual(id, TRACE_ID);
  }
  assert.notEqual(fresh, replaced);
  for (const server of servers) {
    const traced = server.logs.filter((line) => line.message === "request" && generationCall(line));
    assert.ok(traced.length >= 3);
    for (const line of traced) {
      assert.ok(seenTraces.has(line.trace_id), `a node's call in no request's trace: ${JSON.stringify(line)}`);
      assert.notEqual(line.span_id, gatewaySpan);
    }
  }
});
