// A forward's headers (js-glue/src/protocol/forward_headers.js): the exit state, the per-layer
// milliseconds and the approximate modes' statistics go over and come back, and a malformed
// exit state or statistics header is refused naming it.
import assert from "node:assert/strict";
import {test} from "node:test";

import {
  decodeApproxStats, decodeExitState, decodeLayerMs, encodeApproxStats, encodeExitState, encodeLayerMs,
} from "../../../js-glue/src/protocol/forward_headers.js";

test("the exit state carries its two fields only, and comes back", () => {
  const early = {exit_layer: 3, recent_updates: [0.25, 0], row_updates: [1, 0.5], layers_skipped: 2};
  const header = encodeExitState(early);
  assert.equal(header, '{"exit_layer":3,"recent_updates":[0.25,0]}');
  assert.deepEqual(decodeExitState(header), {exit_layer: 3, recent_updates: [0.25, 0]});
  assert.equal(decodeExitState(undefined), null);
});

test("a malformed exit state is refused naming the header and the field", () => {
  for (const [raw, why] of [
    ["{", /expected a JSON object/], ["[1]", /expected a JSON object/], ['{"colour": 1}', /expected a JSON object/],
    ['{"exit_layer": -2}', /exit_layer must be an integer ≥ -1/], ['{"exit_layer": 1.5}', /exit_layer must be an integer/],
    ['{"recent_updates": [-1]}', /recent_updates must be an array of finite numbers ≥ 0/],
    ['{"recent_updates": "a"}', /recent_updates must be an array/], [`{"recent_updates": [${"0,".repeat(3000)}0]}`, /expected a JSON object/],
  ]) {
    assert.throws(() => decodeExitState(raw), (error) => {
      assert.equal(error.code, "invalid_argument");
      assert.match(error.message, /^x-layerfold-exit-state /);
      assert.match(error.message, why);
      return true;
    }, raw.slice(0, 40));
  }
});

test("per-layer milliseconds to the microsecond, and back", () => {
  assert.equal(encodeLayerMs([1.25, 0.0004, 12]), "1.250,0.000,12.000");
  assert.deepEqual(decodeLayerMs("1.250,0.000,12.000"), [1.25, 0, 12]);
  assert.deepEqual(decodeLayerMs(null), []);
  assert.deepEqual(decodeLayerMs(""), []);
});

test("the approximate modes' statistics as JSON; a header that is not JSON is a bad answer", () => {
  const stats = {early_exit: {exit_layer: -1, recent_updates: [], row_updates: [0.5], layers_skipped: 0}};
  assert.deepEqual(decodeApproxStats(encodeApproxStats(stats), "forward"), stats);
  assert.equal(decodeApproxStats(null, "forward"), null);
  assert.throws(() => decodeApproxStats("{nope", "POST /v1/sessions/{id}/forward"),
    (error) => error.code === "bad_response" && /^POST \/v1\/sessions\/\{id\}\/forward: x-layerfold-approx is not JSON/.test(error.message));
});
