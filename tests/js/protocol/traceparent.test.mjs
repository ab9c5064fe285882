// The W3C traceparent header: which headers are continued, which start a new trace, and the
// header a call within a trace sends.
import assert from "node:assert/strict";
import {test} from "node:test";

import {formatTraceparent, parseTraceparent, requestTrace} from "../../../js-glue/src/protocol/traceparent.js";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";

test("a valid header's fields, a later version's extra fields ignored", () => {
  assert.deepEqual(parseTraceparent(`00-${TRACE_ID}-${PARENT}-01`), {traceId: TRACE_ID, parentId: PARENT, flags: "01"});
  assert.deepEqual(parseTraceparent(` 00-${TRACE_ID}-${PARENT}-00 `), {traceId: TRACE_ID, parentId: PARENT, flags: "00"});
  assert.deepEqual(parseTraceparent(`01-${TRACE_ID}-${PARENT}-01-what-comes-later`), {traceId: TRACE_ID, parentId: PARENT, flags: "01"});
});

test("invalid headers are null", () => {
  for (const raw of [
    undefined, "", "garbage",
    `00-${TRACE_ID.toUpperCase()}-${PARENT}-01`,
    `00-${"0".repeat(32)}-${PARENT}-01`,
    `00-${TRACE_ID}-${"0".repeat(16)}-01`,
    `ff-${TRACE_ID}-${PARENT}-01`,
    `00-${TRACE_ID}-${PARENT}-01-extra`,
    `00-${TRACE_ID.slice(1)}-${PARENT}-01`,
    `00-${TRACE_ID}-${PARENT}-1`,
  ]) assert.equal(parseTraceparent(raw), null, String(raw));
});

test("a request continues a valid trace in a span of its own, and starts a sampled one otherwise", () => {
  const continued = requestTrace(`00-${TRACE_ID}-${PARENT}-00`);
  assert.equal(continued.traceId, TRACE_ID);
  assert.equal(continued.parentId, PARENT);
  assert.equal(continued.flags, "00");
  assert.match(continued.spanId, /^[0-9a-f]{16}$/);
  assert.notEqual(continued.spanId, PARENT);

  const started = [requestTrace(undefined), requestTrace("00-nonsense")];
  for (const trace of started) {
    assert.match(trace.traceId, /^(?!0+$)[0-9a-f]{32}$/);
    assert.match(trace.spanId, /^(?!0+$)[0-9a-f]{16}$/);
    assert.equal(trace.flags, "01");
    assert.equal(trace.parentId, null);
  }
  assert.notEqual(started[0].traceId, started[1].traceId);
});

test("a call's header names the trace and the caller's span", () => {
  assert.equal(formatTraceparent({traceId: TRACE_ID, spanId: PARENT, flags: "01"}), `00-${TRACE_ID}-${PARENT}-01`);
});
