// The edge worker's settings: a bad value stops the isolate with the variable named, and an
// AUTH_TOKEN that is set but empty (or holds whitespace) never serves the node open.
import assert from "node:assert/strict";
import {test} from "node:test";

import {edgeConfig} from "../../../js-glue/edge/edge_config.js";

const env = (extra) => ({MODEL: {get: async () => null}, MODEL_KEY: "m.gguf", ...extra});

test("AUTH_TOKEN: unset means no auth, a token is kept, empty or with whitespace is refused", () => {
  assert.equal(edgeConfig(env({})).authToken, undefined);
  assert.equal(edgeConfig(env({AUTH_TOKEN: "s3cret"})).authToken, "s3cret");
  assert.throws(() => edgeConfig(env({AUTH_TOKEN: ""})), /AUTH_TOKEN \(authToken\) is set but empty/);
  assert.throws(() => edgeConfig(env({AUTH_TOKEN: "s3cret\n"})), /AUTH_TOKEN \(authToken\) contains whitespace/);
});

test("other settings are checked by name", () => {
  assert.throws(() => edgeConfig(env({LAYERS: "3"})), /LAYERS="3"/);
  assert.throws(() => edgeConfig(env({MAX_TOKENS: "0"})), /MAX_TOKENS="0": expected an integer ≥ 1/);
  assert.throws(() => edgeConfig({MODEL_KEY: "m.gguf"}), /no R2 binding MODEL/);
});

test("CACHE_TYPE_K / CACHE_TYPE_V: f16 unless set, an unknown type refused by name", () => {
  assert.equal(edgeConfig(env({})).cacheTypeK, "f16");
  assert.equal(edgeConfig(env({})).cacheTypeV, "f16");
  const config = edgeConfig(env({CACHE_TYPE_K: "q8_0", CACHE_TYPE_V: "q4_0"}));
  assert.deepEqual([config.cacheTypeK, config.cacheTypeV], ["q8_0", "q4_0"]);
  assert.throws(() => edgeConfig(env({CACHE_TYPE_V: "q5_1"})), /^Error: CACHE_TYPE_V="q5_1": expected one of f16, q8_0, q4_0$/);
});

test("DRAFT_MODEL_KEY: the drafter's key in the MODEL bucket, none unless set", () => {
  assert.equal(edgeConfig(env({})).draftKey, undefined);
  assert.equal(edgeConfig(env({DRAFT_MODEL_KEY: ""})).draftKey, undefined);
  assert.equal(edgeConfig(env({DRAFT_MODEL_KEY: "m-assistant.gguf"})).draftKey, "m-assistant.gguf");
});

test("SHARD: a group member I of S over LAYERS, none unless set", () => {
  assert.equal(edgeConfig(env({})).shard, undefined);
  assert.deepEqual(edgeConfig(env({SHARD: "1/3", LAYERS: "2-2"})).shard, [1, 3]);
  assert.throws(() => edgeConfig(env({SHARD: "1/3"})), /SHARD needs LAYERS=FIRST-LAST/);
  assert.throws(() => edgeConfig(env({SHARD: "3/3", LAYERS: "2-2"})), /SHARD="3\/3": expected I\/S/);
  assert.throws(() => edgeConfig(env({SHARD: "a", LAYERS: "2-2"})), /SHARD="a"/);
});
