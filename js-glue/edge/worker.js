// The edge worker: a layer node serving the HTTP layer-node protocol (docs/http-api.md) from a
// Workers-style runtime, by mounting the container's own app (src/server/app.js). The weights
// load once per isolate, on its first request, and every later request reuses them. The
// module is the relaxed-SIMD variant where the isolate's engine validates it (checked once per
// isolate), else the SIMD128 one; a bundle made with `scripts/build-edge --simd128-only` has no
// relaxed variant, for runtimes whose engine would refuse it (they compile every module binding
// when the script loads, so it would stop the whole worker).
//
// Workers cancel what a finished request left running, so the load is kept alive with
// waitUntil, and the requests that need the node await it: concurrent first requests share one
// load. /healthz answers at once; /readyz reports the load's progress. With SHARD=I/S the
// isolate is a tensor-parallel group's member instead (member_isolate.js).
import wasm from '../dist/layerfold_wasi.wasm';
import wasmRelaxed from '../dist/layerfold_wasi_relaxed.wasm';
import { createLayerNodeApp } from '../src/server/app.js';
import { NodeState } from '../src/server/node_state.js';
import { edgeConfig } from './edge_config.js';
import { openEdgeNode } from './edge_node.js';
import { memberIsolate } from './member_isolate.js';

let isolate = null;  // { app, state, loading, failure }
let member = null;   // SHARD set: this isolate's member's fetch handler

// 503 with the reason the node could not load; over_budget is the protocol's name for a layer
// range that does not fit the isolate, with the bytes needed and available.
function loadFailure(error) {
  const overBudget = error.code === 'over_budget';
  const body = overBudget
    ? { code: 'over_budget', message: error.message, needed_bytes: error.neededBytes, available_bytes: error.availableBytes }
    : { code: 'not_ready', message: `the node failed to load: ${error.message}` };
  return new Response(JSON.stringify({ error: body }), { status: 503, headers: { 'content-type': 'application/json' } });
}

function startIsolate(env) {
  const state = new NodeState();
  const current = { state, app: null, loading: null, failure: null };
  current.loading = (async () => {
    const config = edgeConfig(env);
    current.app = createLayerNodeApp({ state, authToken: config.authToken, maxTokens: config.maxTokens, maxQueue: config.maxQueue });
    state.loaded(await openEdgeNode({ module: wasm, relaxedModule: wasmRelaxed, ...config, onProgress: state.onProgress }));
  })().catch((error) => {
    current.failure = error;
  });
  return current;
}

export default {
  /**
   * The layer-node protocol, once this isolate's node is loaded.
   * @example const response = await worker.fetch(new Request('https://node.example/v1/info'), env, ctx);
   */
  async fetch(request, env, ctx) {
    if (env.SHARD) {
      member ??= memberIsolate(env, { module: wasm, relaxedModule: wasmRelaxed });
      return member(request, ctx);
    }
    // A failed load is tried again by the next request, unless it can never fit.
    if (isolate?.failure && isolate.failure.code !== 'over_budget') isolate = null;
    isolate ??= startIsolate(env);
    const current = isolate;
    ctx.waitUntil(current.loading);
    const path = new URL(request.url).pathname;
    if (path === '/healthz') return Response.json({ ok: true });
    if (path !== '/readyz') await current.loading;
    if (current.failure) return loadFailure(current.failure);
    if (!current.app) return Response.json({ ready: false, progress: { bytes: 0, total_bytes: 0 } }, { status: 503 });
    return current.app.fetch(request, env, ctx);
  },
};
