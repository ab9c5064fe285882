// layerfold plan MODEL --nodes K [--memory BYTES]: balanced contiguous layer ranges for K nodes,
// each holding its layers' weights (plus the embedding on the first, the head on the last)
// within a memory budget (default 4 GiB, the wasm32 address space). The first node of a model
// with per-layer embeddings holds a cache of per_layer_token_embd's rows, not the table
// (node/per_layer_rows.js).
import { readModelHeader } from '../gguf/model_header.js';
import { DEFAULT_ROW_CACHE_BYTES, rowCacheBytes } from '../node/per_layer_rows.js';
import { redactUrl } from '../server/redact.js';

const GIB = 2 ** 30;

// "134217728", "128MiB", "1.5GiB", "512KiB" -> bytes; anything else is refused by name.
export function parseBytes(text, option = '--memory') {
  const m = /^(\d+(?:\.\d+)?)\s*(|KiB|MiB|GiB)$/.exec(String(text).trim());
  const bytes = m ? Number(m[1]) * { '': 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: GIB }[m[2]] : NaN;
  if (!(bytes > 0)) throw new Error(`${option} must be a positive number of bytes, optionally with KiB, MiB or GiB, not "${text}"`);
  return Math.floor(bytes);
}

// Weight bytes each node would hold if it served layers [begin, end).
function nodeBytes(perLayer, extraFirst, extraLast, begin, end) {
  let bytes = 0;
  for (let il = begin; il < end; il++) bytes += perLayer[il];
  if (begin === 0) bytes += extraFirst;
  if (end === perLayer.length) bytes += extraLast;
  return bytes;
}

// Smallest per-node maximum over contiguous splits into at most k ranges (greedy fill per budget,
// binary search on the budget). canCut(b): whether a node may start at layer b (shared-KV layers
// stay with the layer whose cache they read).
export function balance(perLayer, extraFirst, extraLast, k, canCut = () => true) {
  const n = perLayer.length;
  const split = (budget) => {
    const ranges = [];
    let begin = 0;
    while (begin < n) {
      let fits = begin;
      while (fits < n && nodeBytes(perLayer, extraFirst, extraLast, begin, fits + 1) <= budget) fits++;
      let end = fits;
      while (end > begin && end < n && !canCut(end)) end--;
      if (end === begin) return null;
      ranges.push([begin, end]);
      begin = end;
    }
    return ranges.length <= k ? ranges : null;
  };
  let lo = 0;
  let hi = nodeBytes(perLayer, extraFirst, extraLast, 0, n);
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (split(mid)) hi = mid;
    else lo = mid;
  }
  return split(hi);
}

export async function plan(options, [model]) {
  if (!model) throw new Error('plan needs a MODEL path');
  const k = Number(options.nodes);
  if (!Number.isInteger(k) || k < 1) throw new Error(`--nodes must be a positive integer, not "${options.nodes}"`);
  const memory = parseBytes(options.memory ?? String(4 * GIB));
  const header = await readModelHeader(model);
  const n = header.info.n_layer;
  if (k > n) throw new Error(`${k} nodes for ${n} layers: at most one node per layer`);
  const perLayer = new Array(n).fill(0);
  const bytesOf = (name) => header.tensors.find((t) => t.name === name)?.n_bytes ?? 0;
  for (const t of header.tensors) {
    const m = /^blk\.(\d+)\./.exec(t.name);
    if (m) perLayer[Number(m[1])] += t.n_bytes;
  }
  const embdOnly = bytesOf('token_embd.weight');
  // The first node computes every layer's per-layer input (docs/forward-pass.md), from the rows
  // of per_layer_token_embd it caches.
  const table = bytesOf('per_layer_token_embd.weight');
  const cacheBytes = options['per-layer-row-cache'] === undefined ? DEFAULT_ROW_CACHE_BYTES
    : parseBytes(options['per-layer-row-cache'], '--per-layer-row-cache');
  const rowCache = table ? rowCacheBytes({ rowBytes: table / header.info.n_vocab, nVocab: header.info.n_vocab, cacheBytes }) : 0;
  const embd = embdOnly + rowCache + bytesOf('per_layer_model_proj.weight') + bytesOf('per_layer_proj_norm.weight');
  const head = bytesOf('output_norm.weight') + (bytesOf('output.weight') || embdOnly) + bytesOf('rope_freqs.weight');
  // A node may start at layer b unless a later layer attends over the cache of one before b.
  const kvLayer = header.info.layers.map((l, il) => l.kv_layer ?? il);
  const canCut = (b) => kvLayer.every((source, il) => il < b || source >= b);
  const ranges = balance(perLayer, embd, head, k, canCut);
  const shared = kvLayer.map((source, il) => [source, il]).filter(([source, il]) => source !== il);
  const together = shared.length ? `layers ${Math.min(...shared.map(([source]) => source))}-${n - 1} must stay on one node ` +
    '(shared-KV layers attend over the cache of an earlier layer)' : '';
  const nodes = ranges.map(([b, e]) => ({ layers: [b, e - 1], bytes: nodeBytes(perLayer, embd, head, b, e) }));
  const spec = nodes.map((nd) => `local:${nd.layers[0]}-${nd.layers[1]}`).join(',');
  const tooBig = nodes.filter((nd) => nd.bytes > memory);
  if (options.json) console.log(JSON.stringify({ model: redactUrl(model), memory, nodes, spec }));
  else {
    for (const [i, nd] of nodes.entries()) {
      console.log(`node ${i}: layers ${nd.layers[0]}-${nd.layers[1]}  ${(nd.bytes / GIB).toFixed(2)} GiB${nd.bytes > memory ? '  (over the budget)' : ''}`);
    }
    console.log(`--nodes ${spec}`);
  }
  if (tooBig.length) {
    console.error(`layerfold plan: ${tooBig.length} node(s) need more than ${(memory / GIB).toFixed(2)} GiB: ` +
      (together && tooBig.some((nd) => nd.layers[1] === n - 1) ? together : 'use more nodes'));
    return 1;
  }
  return 0;
}
