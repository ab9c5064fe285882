// A request's trace in its log lines: Cloud Logging's fields on Google Cloud, plain ones elsewhere.
import assert from "node:assert/strict";
import {test} from "node:test";

import {traceFields} from "../../../js-glue/src/log/trace_fields.js";

const trace = {traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7"};

test("with GOOGLE_CLOUD_PROJECT, the fields Cloud Logging links to the trace", () => {
  assert.deepEqual(traceFields(trace, {GOOGLE_CLOUD_PROJECT: "my-project"}), {
    "logging.googleapis.com/trace": "projects/my-project/traces/4bf92f3577b34da6a3ce929d0e0e4736",
    "logging.googleapis.com/spanId": "00f067aa0ba902b7",
  });
});

test("elsewhere trace_id and span_id; without a trace, nothing", () => {
  assert.deepEqual(traceFields(trace, {}), {trace_id: "4bf92f3577b34da6a3ce929d0e0e4736", span_id: "00f067aa0ba902b7"});
  assert.deepEqual(traceFields(null, {GOOGLE_CLOUD_PROJECT: "p"}), {});
});
