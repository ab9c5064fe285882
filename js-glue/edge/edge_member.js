// A member of a tensor-parallel group inside a Workers-style isolate (docs/tensor-parallel.md):
// the single-thread wasm32-wasi module from a module binding (its relaxed-SIMD variant where the
// engine validates it), the member's slices of its layers read from an R2 binding by range, and
// the isolate's memory budget checked before any weight is read.
import { LocalMember } from '../src/group/local_member.js';
import { R2BindingSource } from '../src/sources/r2_binding.js';
import { withProgress } from '../src/sources/progress.js';
import { relaxedSimdSupported } from '../src/wasm/features.js';
import { instantiateSingleThreadModule } from '../src/wasm/wasi.js';
import { DEFAULT_MEMORY_BUDGET_BYTES } from './edge_config.js';

/**
 * Member `shard[0]` of a group of `shard[1]` over layers [begin, end) of the GGUF at `key` in
 * `bucket`, as LocalMember.open loads one (module and relaxedModule as openEdgeNode takes them).
 * Throws LayerfoldError 'over_budget' (neededBytes, availableBytes) when the member would not
 * fit memoryBudgetBytes with a session of maxContext positions (its cache in cacheTypeK and
 * cacheTypeV) and calls of maxTokens rows. ends: hold a vocabulary slice of the model's ends the
 * layers touch (LocalMember.open), counted in the budget.
 * @example const member = await openEdgeMember({ module: wasm, bucket: env.MODEL, key: '31b.gguf', layers: [1, 2], shard: [0, 3] });
 */
export async function openEdgeMember({ module, relaxedModule, bucket, key, layers, shard: [index, members],
  memoryBudgetBytes = DEFAULT_MEMORY_BUDGET_BYTES, maxContext = 0, maxTokens = 256, cacheTypeK, cacheTypeV, ends = false, onProgress }) {
  const relaxed = Boolean(relaxedModule) && relaxedSimdSupported();
  const lf = await instantiateSingleThreadModule(relaxed ? relaxedModule : module, relaxedModule ? { relaxed, forced: false } : undefined);
  let source;
  try {
    source = await R2BindingSource.open(bucket, key);
  } catch (error) {
    lf.close();
    throw error;
  }
  try {
    return await LocalMember.open(lf, {
      source: onProgress ? withProgress(source, onProgress) : source, index, members, layers, maxContext, memoryBudgetBytes, maxTokens,
      cacheTypeK, cacheTypeV, ends,
    });
  } finally {
    await source.close();
  }
}
