// Types of the package's edge entry, `layerfold/edge` (edge_node.js).
import type { LayerNode, Progress } from '../index.js';

export interface EdgeNodeOptions {
  /** the compiled `layerfold/dist/layerfold_wasi.wasm` (SIMD128): a WebAssembly.Module (a module binding on Workers) */
  module: object;
  /**
   * the compiled `layerfold/dist/layerfold_wasi_relaxed.wasm` (relaxed SIMD), run instead of
   * `module` where the engine validates relaxed SIMD: the same bytes, faster on Q4_0
   */
  relaxedModule?: object;
  /** a Workers R2 binding holding the GGUF */
  bucket: {
    head(key: string): Promise<{ size: number; etag?: string; httpEtag?: string } | null>;
    get(key: string, options?: { range?: { offset: number; length: number } }): Promise<unknown>;
  };
  key: string;
  /**
   * on the node holding the head: the key in `bucket` of the model's MTP drafter (gemma4-assistant),
   * loaded beside the head and counted in the budget; the node then drafts (`?draft=k` on /v1/logits)
   */
  draftKey?: string;
  /** layers [begin, end); default: all */
  layers?: [number, number];
  /** refuse ('over_budget') a node whose needs exceed this; default 128 MiB, an isolate's memory */
  memoryBudgetBytes?: number;
  /** positions a session may hold; 0: the model's context length */
  maxContext?: number;
  /** rows of the largest forward (default 256) */
  maxTokens?: number;
  maxSessions?: number;
  /** first node with per-layer embeddings: bytes of per_layer_token_embd rows kept (default 8 MiB), inside the budget */
  perLayerRowCacheBytes?: number;
  onProgress?: (progress: Pick<Progress, 'bytes' | 'totalBytes'>) => void;
}

/** Opens layers of a GGUF in an R2 bucket as a single-thread LayerNode. */
export function openEdgeNode(options: EdgeNodeOptions): Promise<LayerNode>;
