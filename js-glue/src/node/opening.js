// Opening a LayerNode: its options checked, the model's header read (or one handed over checked
// against the source), what the node will hold estimated and held against its memory budget
// before any tensor is read, then its tensors loaded, its tokenizer and its reader of per-layer
// rows made. The node (layer_node_core.js) is built from what this returns.
import { openModelHeader, reparseModelHeader } from '../gguf/header.js';
import { CACHE_TYPES } from '../protocol/kv_rows.js';
import { Tokenizer } from '../tokens/tokenizer.js';
import { LayerfoldError } from '../wasm/capi.js';
import { checkMaxRows } from './batcher.js';
import { NodeDrafter } from './drafter.js';
import { EngineModel } from './engine_model.js';
import { nodeMemoryNeeds, reserveMemory } from './memory_budget.js';
import { DEFAULT_ROW_CACHE_BYTES, PerLayerRows } from './per_layer_rows.js';
import { withProgress } from '../sources/progress.js';

// The options refused before anything is read.
function checkOptions({ perLayerTable, maxSessions, maxKvBytes, perLayerRowCacheBytes, maxBatchRows, cacheTypeK, cacheTypeV }) {
  if (perLayerTable !== 'rows' && perLayerTable !== 'whole') {
    throw new LayerfoldError('invalid_argument', `perLayerTable "${perLayerTable}": expected rows or whole`);
  }
  for (const [name, type] of [['cacheTypeK', cacheTypeK], ['cacheTypeV', cacheTypeV]]) {
    if (!CACHE_TYPES.includes(type)) {
      throw new LayerfoldError('invalid_argument', `${name} ${JSON.stringify(type)} is not a supported cache type: expected ${CACHE_TYPES.join(', ')}`);
    }
  }
  if (!(Number.isSafeInteger(maxSessions) && maxSessions >= 1)) {
    throw new LayerfoldError('invalid_argument', `maxSessions must be a whole number of sessions >= 1, not ${maxSessions}`);
  }
  if (maxKvBytes !== undefined && !(Number.isSafeInteger(maxKvBytes) && maxKvBytes >= 0)) {
    throw new LayerfoldError('invalid_argument', `maxKvBytes must be a whole number of bytes >= 0, not ${maxKvBytes}`);
  }
  if (!(Number.isSafeInteger(perLayerRowCacheBytes) && perLayerRowCacheBytes >= 0)) {
    throw new LayerfoldError('invalid_argument', `perLayerRowCacheBytes must be a whole number of bytes >= 0, not ${perLayerRowCacheBytes}`);
  }
  checkMaxRows(maxBatchRows);
}

// A header handed over is of the file being opened: its size, and the identity of the source it
// was read from (its ETag or size and mtime), say so before any tensor is read.
function reparseHandedHeader(lf, header, source) {
  if (header.file_size !== source.size) {
    throw new LayerfoldError('invalid_argument', `the header handed over is of a file of ${header.file_size} bytes, ${source.name} has ${source.size}`);
  }
  if (header.identity && source.identity && header.identity !== source.identity) {
    throw new LayerfoldError('source_changed', `${source.name}: the object changed since its header was read (now ${source.identity.slice(source.identity.lastIndexOf('#') + 1)}, the header read from ${header.identity.slice(header.identity.lastIndexOf('#') + 1)}): open it again`);
  }
  return reparseModelHeader(lf, header);
}

// The source as the tensor load reads it: with onProgress, reporting against the bytes of the
// tensors `names` (what EngineModel.load reads), not the whole file nor the header read before.
function loadProgress(source, header, names, { onProgress, progressIntervalMs }) {
  if (!onProgress) return source;
  const wanted = new Set(names);
  const totalBytes = header.tensors.reduce((sum, t) => sum + (wanted.has(t.name) ? t.n_bytes : 0), 0);
  return withProgress(source, onProgress, { totalBytes, intervalMs: progressIntervalMs });
}

// The drafter of draftSource (handed over) with its header read, on the node holding the head only.
async function openDrafter(lf, draftSource, draftName, shape, nLayer) {
  if (!draftSource) return null;
  if (!shape.withHead) {
    await draftSource.close();
    throw new LayerfoldError('invalid_argument', `a draft model goes on the node holding the head (layer ${nLayer - 1}); ` +
      `this node serves layers ${shape.layers[0]}-${shape.layers[1] - 1}`);
  }
  return NodeDrafter.open(lf, draftSource, draftName ?? draftSource.name);
}

/**
 * The parts of a node opened as LayerNode.open describes (its options and defaults are these):
 * { lf, header, name, layers, withEmbedding, withHead, maxContext, maxSessions, maxKvBytes,
 * maxBatchRows, memory, kvRowsIn, kvRowsOut, ffnDownLayout, cacheTypeK, cacheTypeV, maxSpan, model: EngineModel, tokenizer, rows:
 * PerLayerRows | null, drafter: NodeDrafter | null }. The module and the sources are handed over: on failure (a refused
 * option too) all are closed; on success the sources are closed too, unless the node keeps
 * reading per-layer rows from its model's. draftSource: a draft model's (node/drafter.js; draftName
 * what errors and info() call it), loaded beside the head on drafterThreads workers and counted
 * in the budget.
 * @example const node = new LayerNode(await openParts({ lf, source, layers: [0, 2] }));
 */
export async function openParts({ lf, source, header, name = source.name, layers, maxContext = 0, withTokenizer = false,
  maxSessions = 64, maxKvBytes, memoryBudgetBytes, maxTokens = 512, maxBatchRows = maxTokens, ffnDownLayout = 'units',
  perLayerTable = 'rows', perLayerRowCacheBytes = DEFAULT_ROW_CACHE_BYTES, cacheTypeK = 'f16', cacheTypeV = 'f16', maxSpan = 0, onProgress,
  progressIntervalMs, draftSource = null, draftName, drafterThreads = 1 }) {
  const model = new EngineModel(lf);
  let tokenizer = null;
  let drafter = null;
  try {
    let gguf = 0;
    let keepSource = false;
    try {
      checkOptions({ perLayerTable, maxSessions, maxKvBytes, perLayerRowCacheBytes, maxBatchRows, cacheTypeK, cacheTypeV });
      const opened = header ? { gguf: reparseHandedHeader(lf, header, source), header } : await openModelHeader(lf, source);
      gguf = opened.gguf;
      const { info } = opened.header;
      const [begin, end] = layers ?? [0, info.n_layer];
      const shape = { layers: [begin, end], withEmbedding: begin === 0, withHead: end === info.n_layer };
      const perLayerRows = perLayerTable === 'rows' && shape.withEmbedding && info.n_embd_per_layer > 0;
      const needs = nodeMemoryNeeds(lf, gguf, info, {
        ...shape, maxContext, maxTokens, threads: lf.threads, perLayerRows, rowCacheBytes: perLayerRowCacheBytes, cacheTypeK, cacheTypeV, maxSpan,
      });
      const drafterSource = draftSource;
      draftSource = null;
      drafter = await openDrafter(lf, drafterSource, draftName, shape, info.n_layer);
      if (drafter) needs.drafter = drafter.needs({ nVocab: info.n_vocab, nEmbd: info.n_embd });
      if (maxKvBytes !== undefined && maxKvBytes < needs.kvCache) {
        // Every session would be refused: say so now, with the numbers, rather than at each forward.
        throw new LayerfoldError('invalid_argument', `maxKvBytes ${maxKvBytes} is below the ${needs.kvCache} bytes one session's KV cache needs ` +
          `(layers [${begin}, ${end}) at max context ${maxContext || info.n_ctx_train}): raise it, or lower the max context`);
      }
      const budget = memoryBudgetBytes === undefined
        ? { memory: null, kvBytes: Infinity }
        : reserveMemory(needs, { baseBytes: lf.bytes().length, budgetBytes: memoryBudgetBytes, layers: shape.layers, maxTokens });
      await model.load(loadProgress(source, opened.header, needs.tensors, { onProgress, progressIntervalMs }), gguf, opened.header,
        { names: needs.tensors, ...shape, ffnDownLayout, perLayerRows, cacheTypeK, cacheTypeV, maxSpan });
      await drafter?.load(model, { threads: drafterThreads });
      tokenizer = withTokenizer ? Tokenizer.fromGguf(lf, gguf) : null;
      let rows = null;
      if (perLayerRows) {
        const table = opened.header.tensors.find((t) => t.name === 'per_layer_token_embd.weight');
        rows = new PerLayerRows(source.untracked ?? source, { offset: table.offset, rowBytes: needs.rowBytes, nVocab: info.n_vocab, cacheBytes: perLayerRowCacheBytes });
        keepSource = true;
      }
      return {
        lf, header: opened.header, name, ...shape, maxContext, maxSessions, maxKvBytes: maxKvBytes ?? budget.kvBytes, maxBatchRows,
        memory: budget.memory, kvRowsIn: needs.kvRowsIn, kvRowsOut: needs.kvRowsOut, ffnDownLayout, cacheTypeK, cacheTypeV, maxSpan, model,
        tokenizer, rows, drafter,
      };
    } finally {
      if (gguf) lf.fn.lf_gguf_free(gguf);
      if (!keepSource) await source.close();
    }
  } catch (error) {
    await draftSource?.close();
    tokenizer?.close();
    drafter?.close();
    model.close();
    lf.close();
    throw error;
  }
}
