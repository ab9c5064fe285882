// A layer node inside a Workers-style isolate: the single-thread wasm32-wasi module from a
// module binding (workers cannot compile wasm from bytes), its relaxed-SIMD variant where the
// engine validates it, weights read from an R2 binding with one ranged get() per tensor, and a
// memory budget checked before any tensor is read. On the first node of a model with per-layer
// embeddings the table is never loaded: the rows of the tokens seen are read from R2 by range
// (node/per_layer_rows.js), kept in a cache of perLayerRowCacheBytes inside the budget. The node
// serving the last layers may hold Gemma 4's MTP drafter beside its head, read from the same
// bucket and counted in the same budget.
import { LayerNode } from '../src/node/layer_node_core.js';
import { R2BindingSource } from '../src/sources/r2_binding.js';
import { withProgress } from '../src/sources/progress.js';
import { relaxedSimdSupported } from '../src/wasm/features.js';
import { instantiateSingleThreadModule } from '../src/wasm/wasi.js';
import { DEFAULT_MEMORY_BUDGET_BYTES } from './edge_config.js';

/**
 * Opens layers [begin, end) of the GGUF at `key` in `bucket` as a LayerNode (the library API,
 * single-threaded). `module` is the compiled layerfold_wasi.wasm (SIMD128); `relaxedModule`, the
 * compiled layerfold_wasi_relaxed.wasm, runs instead where the engine validates relaxed SIMD
 * (checked once per isolate; the same bytes, faster on Q4_0). Workers cannot compile the madd
 * probe (features.js), so the relaxed module checks that its f32x4.relaxed_madd is fused itself
 * and runs its SIMD128 kernels where it is not; info().kernels and kernelChoice say which ran.
 * draftKey, on the node holding the head: the key in `bucket` of the model's MTP drafter
 * (node/drafter.js), loaded beside the head so the node drafts (LayerNode.draftAfter, `?draft=k` on
 * /v1/logits); refused by name on a node without the head or one whose layers lack the caches it reads.
 * Throws LayerfoldError 'over_budget' (neededBytes, availableBytes) when the node, its drafter
 * included, would not fit memoryBudgetBytes.
 * @param {{module: WebAssembly.Module, relaxedModule?: WebAssembly.Module, bucket: object, key: string, draftKey?: string, layers?: [number, number],
 *          memoryBudgetBytes?: number, maxContext?: number, maxTokens?: number, maxSessions?: number,
 *          perLayerRowCacheBytes?: number, cacheTypeK?: string, cacheTypeV?: string, onProgress?: (p: {bytes: number, totalBytes: number}) => void}} options
 * @example
 * import wasm from 'layerfold/dist/layerfold_wasi.wasm';
 * import wasmRelaxed from 'layerfold/dist/layerfold_wasi_relaxed.wasm';
 * import { openEdgeNode } from 'layerfold/edge';
 * const node = await openEdgeNode({ module: wasm, relaxedModule: wasmRelaxed, bucket: env.MODEL, key: 'tiny.gguf', layers: [0, 1] });
 * const out = await node.forward({ session: 'a', startPos: 0, hidden: node.embed([2, 818]) });
 */
export async function openEdgeNode({ module, relaxedModule, bucket, key, draftKey, layers, memoryBudgetBytes = DEFAULT_MEMORY_BUDGET_BYTES,
  maxContext = 0, maxTokens = 256, maxSessions = 16, perLayerRowCacheBytes, cacheTypeK, cacheTypeV, onProgress }) {
  const relaxed = Boolean(relaxedModule) && relaxedSimdSupported();
  const lf = await instantiateSingleThreadModule(relaxed ? relaxedModule : module, relaxedModule ? { relaxed, forced: false } : undefined);
  let source;
  let draftSource = null;
  try {
    source = await R2BindingSource.open(bucket, key);
    if (draftKey !== undefined) draftSource = await R2BindingSource.open(bucket, draftKey);
  } catch (error) {
    await source?.close();
    lf.close();
    throw error;
  }
  return LayerNode.open({
    lf, source: onProgress ? withProgress(source, onProgress) : source, layers,
    memoryBudgetBytes, maxContext, maxTokens, maxSessions, perLayerRowCacheBytes, cacheTypeK, cacheTypeV, draftSource,
  });
}
