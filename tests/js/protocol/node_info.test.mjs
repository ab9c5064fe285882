// What a layer node says of itself, GET /v1/info (js-glue/src/protocol/node_info.js): the
// server's JSON, written out here by hand, decodes to the sizes a RemoteNode checks answers
// against; what are not sizes, or layers outside the model, are refused naming the field.
import assert from "node:assert/strict";
import {test} from "node:test";

import {decodeNodeInfo, encodeNodeInfo} from "../../../js-glue/src/protocol/node_info.js";

const node = {
  layers: [2, 4], nLayer: 6, nEmbd: 64, nVocab: 1000, withEmbedding: false, withHead: false, maxSessions: 8,
  kvRowsIn: [{layer: 1, bytesPerToken: 256}], kvRowsOut: [], cacheTypeK: "q8_0", cacheTypeV: "f16", maxSpan: 280,
  info: () => ({model: "/models/tiny.gguf", build: "single", threads: 1, sessions: 3, kvBytes: 4096, wasmMemoryBytes: 1 << 24}),
};

const WIRE = {
  model: "tiny.gguf", layers: [2, 4], n_layer: 6, n_embd: 64, n_vocab: 1000, has_embed: false, has_head: false,
  build: "single", threads: 1, sessions: 3, kv_bytes: 4096, wasm_memory_bytes: 1 << 24,
  max_sessions: 8, max_context: 512, max_tokens: 2048, max_logits_bytes: 1 << 26,
  kv_rows_in: [{layer: 1, bytes_per_token: 256}], kv_rows_out: [], cache_type_k: "q8_0", cache_type_v: "f16", max_span: 280, drafter: null,
};

test("the server's JSON, and what a client reads of it", () => {
  assert.deepEqual(encodeNodeInfo(node, {model: "tiny.gguf", maxContext: 512, maxTokens: 2048, maxLogitsBytes: 1 << 26}), WIRE);
  assert.deepEqual(decodeNodeInfo(JSON.parse(JSON.stringify(WIRE))), {
    layers: [2, 4], nLayer: 6, nEmbd: 64, nVocab: 1000, withEmbedding: false, withHead: false,
    kvRowsIn: [{layer: 1, bytesPerToken: 256}], kvRowsOut: [], cacheTypeK: "q8_0", cacheTypeV: "f16", maxSpan: 280,
    model: "tiny.gguf", build: "single", threads: 1, sessions: 3, kvBytes: 4096, wasmMemoryBytes: 1 << 24, drafter: null,
  });
  // A node with a draft model beside its head.
  const drafting = {...node, info: () => ({...node.info(), drafter: {model: "tiny-drafter.gguf", bytesLoaded: 300000}})};
  const wire = encodeNodeInfo(drafting, {model: "tiny.gguf", maxContext: 512, maxTokens: 2048, maxLogitsBytes: 1 << 26});
  assert.deepEqual(wire.drafter, {model: "tiny-drafter.gguf", bytes_loaded: 300000});
  assert.deepEqual(decodeNodeInfo(JSON.parse(JSON.stringify(wire))).drafter, {model: "tiny-drafter.gguf", bytesLoaded: 300000});
});

test("sizes that are not sizes and layers outside the model are refused by name", () => {
  for (const [change, message] of [
    [{n_layer: 0}, "n_layer is 0, not a positive integer"],
    [{n_embd: "64"}, 'n_embd is "64", not a positive integer'],
    [{n_vocab: 1.5}, "n_vocab is 1.5, not a positive integer"],
    [{n_embd: undefined}, "n_embd is undefined, not a positive integer"],
    [{layers: [4, 2]}, "layers [4,2] is not a range within n_layer 6"],
    [{layers: [5, 7]}, "layers [5,7] is not a range within n_layer 6"],
    [{layers: "2-4"}, 'layers "2-4" is not a range within n_layer 6'],
    [{cache_type_k: "q5_1"}, 'cache_type_k is "q5_1", not one of f16, q8_0, q4_0'],
    [{cache_type_v: 8}, "cache_type_v is 8, not one of f16, q8_0, q4_0"],
    [{drafter: {model: "d.gguf"}}, 'drafter is {"model":"d.gguf"}, not {"model", "bytes_loaded"}'],
    [{max_span: -1}, "max_span is -1, not a count"],
    [{max_span: "280"}, 'max_span is "280", not a count'],
  ]) {
    assert.throws(() => decodeNodeInfo({...WIRE, ...change}), (error) => error.code === "bad_response" && error.message === `GET /v1/info: ${message}`, message);
  }
});

test("a node that names no cache types holds f16 ones, and one that names no max span takes none past 64 rows", () => {
  const {cache_type_k: _k, cache_type_v: _v, max_span: _s, ...older} = WIRE;
  const got = decodeNodeInfo(older);
  assert.equal(got.cacheTypeK, "f16");
  assert.equal(got.cacheTypeV, "f16");
  assert.equal(got.maxSpan, 0);
});
