// layerfold plan MODEL --nodes K [--memory BYTES] [--max-context N [--max-tokens N]]: balanced
// contiguous layer ranges for K nodes within a memory budget (default 4 GiB, the wasm32 address
// space). A node is counted as the engine answers for it (lf_node_needs_json), never by summing
// tensors by name: its weights are the tensors the engine loads for those layers (the embedding
// on the first, the head on the last, rope_freqs wherever a layer uses it, no K/V of a shared-KV
// layer). With --max-context a node counts all it holds, as its memory budget check does on the
// single-thread module (an edge isolate): weights, one session's KV cache at that context
// (mirrors of shared-KV sources included), a forward of --max-tokens rows, the module. The first
// node of a model with per-layer embeddings holds a cache of per_layer_token_embd's rows, not
// the table (node/per_layer_rows.js), and its KV cache in --cache-type-k / --cache-type-v; each
// node is then also told the longest context it could hold within --memory (fits_context).
// With --draft-model (Gemma 4's MTP drafter) the last node also holds the drafter's tensors (and
// with --max-context a draft's buffers and its parsed header, as its budget check counts them)
// and always serves the layers whose caches it reads; more nodes than that leaves room for are
// refused naming those layers.
// A range that no single node can hold within its budget is proposed as a tensor-parallel group
// (docs/tensor-parallel.md) of the fewest members that each fit, up to --max-members, each
// counted as the engine answers for it (lf_member_needs_json): its slices of the layers' tensors
// (at the first or last range, its slice of the embedding or the head too), and with
// --max-context its cache of its KV heads and a call's buffers. The first and last ranges have
// --end-memory as their budget (containers at the ends of a pipeline of edge isolates, say); a
// last node holding a draft model stays single.
import { openGgufHeader } from '../gguf/header.js';
import { encoderBytes } from './encoder_memory.js';
import { withModelHeader } from '../gguf/model_header.js';
import { openSource } from '../sources/open_source.js';
import { ALLOW_UNVALIDATED_SOURCE, CACHE_TYPE_K, CACHE_TYPE_V, JSON_OUTPUT } from './options/shared.js';
import { drafterBytes } from '../node/drafter.js';
import { memberMemoryNeeds, neededBytes, nodeMemoryNeeds } from '../node/memory_budget.js';
import { DEFAULT_ROW_CACHE_BYTES } from '../node/per_layer_rows.js';
import { redactUrl } from '../log/redact.js';
import { LayerfoldError } from '../wasm/capi.js';
import { loadSingleThreadModule } from '../wasm/load_node.js';

const GIB = 2 ** 30;
// The engine's largest group (model/member_split.h).
const MAX_MEMBERS = 64;

export const PLAN_OPTIONS = {
  nodes: { kind: 'integer', min: 1, value: 'K', help: 'the nodes to split the layers over, at most one a layer (required)' },
  memory: { kind: 'bytes', min: 1, value: 'BYTES', help: 'each node\'s budget', default: 4 * GIB, shown: '4GiB, the wasm32 address space' },
  'end-memory': { kind: 'bytes', min: 1, value: 'BYTES', help: 'the first and last nodes\' (or their groups\' members\') budget: they hold the embedding and the head', shown: '--memory' },
  'per-layer-row-cache': { kind: 'bytes', min: 0, value: 'BYTES', help: 'E2B/E4B: the first node\'s cache of per_layer_token_embd rows, counted instead of the table',
    default: DEFAULT_ROW_CACHE_BYTES, shown: `${DEFAULT_ROW_CACHE_BYTES / 2 ** 20}MiB` },
  'max-context': { kind: 'integer', min: 0, value: 'N', help: 'count each node\'s whole memory as its budget check does, one session at N positions (0: the model\'s), not its weights alone' },
  'max-tokens': { kind: 'integer', min: 1, value: 'N', help: 'with --max-context: the rows of a forward counted', default: 512 },
  'cache-type-k': { ...CACHE_TYPE_K, help: 'with --max-context: the K cache type counted' },
  'cache-type-v': { ...CACHE_TYPE_V, help: 'with --max-context: the V cache type counted' },
  'draft-model': { kind: 'string', value: 'PATH|URL', help: 'the MTP drafter (gemma4-assistant) the last node loads beside the head: its bytes and the caches it reads' },
  mmproj: { kind: 'string', value: 'PATH|URL', help: 'the model\'s projector: count its towers and say whether the first node holds them (serve --mmproj) or an encoder node of its own does' },
  'max-members': { kind: 'integer', min: 0, value: 'S', help: 'the largest tensor-parallel group proposed for a range one node cannot hold (0: none)', default: MAX_MEMBERS },
  json: JSON_OUTPUT,
  'allow-unvalidated-source': ALLOW_UNVALIDATED_SOURCE,
};

// A draft model's GGUF header, and the module memory its parse adds, which the last node holds
// while loading and so counts (node/opening.js): measured as the node meets it, after the
// target's header and a count of a last node.
async function draftModelHeader(model, draftModel, sourceOptions, shape) {
  return withModelHeader(model, sourceOptions, async (lf, gguf, { info }) => {
    nodeBytes(lf, gguf, info, [info.n_layer - 1, info.n_layer], { ...shape, whole: true });
    const before = lf.bytes().length;
    const source = await openSource(draftModel, sourceOptions);
    try {
      const { gguf: draftGguf, header } = await openGgufHeader(lf, source);
      lf.fn.lf_gguf_free(draftGguf);
      return { header, headerBytes: lf.bytes().length - before };
    } finally {
      await source.close();
    }
  });
}

/**
 * The layers whose caches Gemma 4's MTP drafter reads (its sliding layers the target's layer
 * n_layer - 2's, its global ones layer n_layer - 1's, through the shared-KV mapping: model/drafter.cpp)
 * that a last node of layers [begin, n_layer) holds neither itself nor as a mirror of the source
 * of a shared-KV layer it serves -> { reads, missing }.
 * @example drafterCaches(info, 2) // { reads: [1, 2], missing: [1] }: the last node serves layer 2 only
 */
export function drafterCaches(info, begin) {
  const n = info.n_layer;
  const reads = [...new Set([n - 2, n - 1].filter((l) => l >= 0).map((l) => info.layers[l].kv_layer))].sort((a, b) => a - b);
  const held = new Set();
  for (let l = begin; l < n; l++) held.add(l).add(info.layers[l].kv_layer);
  return { reads, missing: reads.filter((l) => !held.has(l)) };
}

// The projector's towers (cli/encoder_memory.js) and where they go: beside node 0 when both fit
// its budget, else on an encoder node of their own, which a gateway reaches by --encoder (the
// edge gateway by ENCODER_URL).
async function encoderPlace(mmproj, sourceOptions, node0Bytes, budget) {
  const lf = await loadSingleThreadModule();
  const source = await openSource(mmproj, sourceOptions);
  let header;
  try {
    const opened = await openGgufHeader(lf, source);
    lf.fn.lf_gguf_free(opened.gguf);
    header = opened.header;
  } finally {
    await source.close();
  }
  const bytes = encoderBytes(header);
  return { ...bytes, on_first_node: node0Bytes + bytes.total <= budget };
}

// Smallest per-node maximum of cost(begin, end) (growing with the range) over contiguous splits
// of n layers into at most k ranges (greedy fill per budget, binary search on the budget).
export function balance(n, k, cost) {
  const split = (budget) => {
    const ranges = [];
    let begin = 0;
    while (begin < n) {
      let end = begin;
      while (end < n && cost(begin, end + 1) <= budget) end++;
      if (end === begin) return null;
      ranges.push([begin, end]);
      begin = end;
    }
    return ranges.length <= k ? ranges : null;
  };
  let lo = 0;
  let hi = cost(0, n);
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (split(mid)) hi = mid;
    else lo = mid;
  }
  return split(hi);
}

// cost(begin, end): the bytes a single-thread node of layers [begin, end) holds, its weights and
// cache of rows alone or (whole) all it needs as its memory budget check counts it
// (node/memory_budget.js), the module being released after the header. Each range is asked of
// the engine once, and only the ranges balance() tries.
function nodeCost(lf, gguf, info, { whole, maxContext, ...shape }) {
  const n = info.n_layer;
  const known = new Map();
  return (b, e) => {
    const key = b * (n + 1) + e;
    if (!known.has(key)) known.set(key, nodeBytes(lf, gguf, info, [b, e], { whole, maxContext, ...shape }));
    return known.get(key);
  };
}

function nodeBytes(lf, gguf, info, [b, e], { whole, maxContext, maxTokens, cacheBytes, cacheTypeK, cacheTypeV }) {
  const needs = nodeMemoryNeeds(lf, gguf, info, {
    layers: [b, e], withEmbedding: b === 0, withHead: e === info.n_layer, maxContext, maxTokens, threads: 1,
    perLayerRows: b === 0 && info.n_embd_per_layer > 0, rowCacheBytes: cacheBytes, cacheTypeK, cacheTypeV,
  });
  return whole ? neededBytes(needs, lf.bytes().length) : needs.weights + needs.rowCache;
}

// Member i of a group of `members` over layers [b, e), with its share of the model's ends
// there: its weights, or (whole) all it holds.
function memberBytes(lf, gguf, info, [b, e], member, members, { whole, maxContext, maxTokens, cacheTypeK, cacheTypeV }) {
  const needs = memberMemoryNeeds(lf, gguf, info, { layers: [b, e], member, members, maxContext, maxTokens, threads: 1, cacheTypeK, cacheTypeV,
    ends: b === 0 || e === info.n_layer });
  return whole ? neededBytes(needs, lf.bytes().length) : needs.weights;
}

// The fewest members, 2 .. maxMembers, of a group over layers [b, e) that each fit `memory`
// -> {members, bytes: [each member's]}, or null. A group size the engine cannot split the layers
// into (shared-KV layers whose heads split otherwise than their source's) is passed over.
function smallestGroup(lf, gguf, info, range, memory, maxMembers, shape) {
  for (let members = 2; members <= maxMembers; members++) {
    let bytes;
    try {
      bytes = Array.from({ length: members }, (_, i) => memberBytes(lf, gguf, info, range, i, members, shape));
    } catch (error) {
      if (error instanceof LayerfoldError && error.code === 'unsupported') continue;
      throw error;
    }
    if (Math.max(...bytes) <= memory) return { members, bytes };
  }
  return null;
}

// The most positions, up to the model's n_ctx_train, one session can hold with all that
// bytesAt(context) counts within `memory` (0: not even one). A node's or member's bytes grow with
// the context (the global layers' caches; a sliding ring stops at its window), so a binary
// search finds it.
function fitsContext(info, bytesAt, memory) {
  const fits = (context) => bytesAt(context) <= memory;
  if (!fits(1)) return 0;
  let lo = 1;
  let hi = info.n_ctx_train;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

export async function plan(options, [model]) {
  if (!model) throw new Error('plan needs a MODEL path');
  const { nodes: k, memory, 'per-layer-row-cache': cacheBytes } = options;
  const endMemory = options['end-memory'] ?? memory;
  if (k === undefined) throw new Error('plan needs --nodes K');
  // With --max-context a node's whole memory is counted, else its weights.
  const whole = options['max-context'] !== undefined;
  const shape = {
    maxContext: options['max-context'] ?? 0, maxTokens: options['max-tokens'], cacheBytes,
    cacheTypeK: options['cache-type-k'], cacheTypeV: options['cache-type-v'],
  };
  // Shared-KV layers need not stay with their source: a node without the source mirrors its
  // cache from the K/V rows the source's node hands out (docs/forward-pass.md, "Shared KV across nodes").
  const sourceOptions = { allowUnvalidatedSource: options['allow-unvalidated-source'] };
  const draftModel = options['draft-model'];
  const draftHeader = draftModel === undefined ? null : await draftModelHeader(model, draftModel, sourceOptions, shape);
  const nodes = await withModelHeader(model, sourceOptions,
    (lf, gguf, { info }) => {
      if (k > info.n_layer) throw new Error(`${k} nodes for ${info.n_layer} layers: at most one node per layer`);
      const draft = draftHeader && drafterBytes(draftHeader.header, { nVocab: info.n_vocab, nEmbd: info.n_embd });
      const drafter = !draft ? 0 : draft.tensors + (whole ? draft.buffers + draftHeader.headerBytes : 0);
      const layerCost = nodeCost(lf, gguf, info, { whole, ...shape });
      const n = info.n_layer;
      const cost = (b, e) => layerCost(b, e) + (e === n ? drafter : 0);
      // With a draft model the last node starts no later than `last`: layers [last, n) are
      // balanced as one unit, so every split found holds the caches the drafter reads.
      let last = n - 1;
      while (draftModel !== undefined && last > 0 && drafterCaches(info, last).missing.length > 0) last--;
      const units = last + 1;
      if (k > units) {
        const { reads } = drafterCaches(info, last);
        throw new Error(`${k} nodes: the draft model reads the caches of layers ${reads.join(' and ')}, which the last node must hold ` +
          `(layers ${last}-${n - 1} at least), so at most ${units} nodes`);
      }
      const end = (e) => (e === units ? n : e);
      const ranges = balance(units, k, (b, e) => cost(b, end(e))).map(([b, e]) => [b, end(e)]);
      return ranges.map(([b, e]) => {
        const bytes = cost(b, e);
        const limit = b === 0 || e === n ? endMemory : memory;
        const canGroup = !(draftModel !== undefined && e === n);
        const group = bytes > limit && canGroup ? smallestGroup(lf, gguf, info, [b, e], limit, options['max-members'], { whole, ...shape }) : null;
        if (group) {
          const memberAt = (i) => (context) => memberBytes(lf, gguf, info, [b, e], i, group.members, { whole: true, ...shape, maxContext: context });
          const fits = whole ? { fits_context: Math.min(...group.bytes.map((_, i) => fitsContext(info, memberAt(i), limit))) } : {};
          return { layers: [b, e - 1], bytes: Math.max(...group.bytes), members: group.members, member_bytes: group.bytes, ...fits };
        }
        const nodeAt = (context) => nodeBytes(lf, gguf, info, [b, e], { ...shape, whole: true, maxContext: context });
        const budget = limit - (e === n ? drafter : 0);
        return { layers: [b, e - 1], bytes, ...(whole ? { fits_context: fitsContext(info, nodeAt, budget) } : {}) };
      });
    });
  const spec = nodes.map((nd) => (nd.members ? `tp(local:${nd.layers[0]}-${nd.layers[1]}*${nd.members})` : `local:${nd.layers[0]}-${nd.layers[1]}`)).join(',');
  const budgetOf = (i) => (i === 0 || i === nodes.length - 1 ? endMemory : memory);
  const tooBig = nodes.filter((nd, i) => nd.bytes > budgetOf(i));
  const counted = whole
    ? { counts: 'memory', max_context: shape.maxContext, max_tokens: shape.maxTokens, cache_type_k: shape.cacheTypeK, cache_type_v: shape.cacheTypeV }
    : { counts: 'weights' };
  const encoder = options.mmproj === undefined ? null : await encoderPlace(options.mmproj, sourceOptions, nodes[0].bytes, budgetOf(0));
  if (options.json) console.log(JSON.stringify({ model: redactUrl(model), memory, end_memory: endMemory, ...counted, nodes, spec, ...(encoder ? { encoder } : {}) }));
  else {
    for (const [i, nd] of nodes.entries()) {
      const fits = whole ? `  (${nd.fits_context} tokens fit)` : '';
      const size = nd.members ? `a group of ${nd.members} members, ${(nd.bytes / GIB).toFixed(2)} GiB the largest` : `${(nd.bytes / GIB).toFixed(2)} GiB`;
      console.log(`node ${i}: layers ${nd.layers[0]}-${nd.layers[1]}  ${size}${nd.bytes > budgetOf(i) ? '  (over the budget)' : ''}${fits}`);
    }
    console.log(`--nodes ${spec}`);
    if (encoder) {
      const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
      console.log(`encoder: ${mib(encoder.total)} (weights ${mib(encoder.weights)}, an image at the largest budget ${mib(encoder.vision)}` +
        `${encoder.audio ? `, a 30 s clip ${mib(encoder.audio)}` : ''}): ${encoder.on_first_node
          ? 'fits beside node 0: serve its layers with --mmproj, and give the gateway --encoder (the edge gateway ENCODER_URL) its URL'
          : 'does not fit beside node 0: run an encoder node of its own (a container, serve --mmproj), and give the gateway --encoder (the edge gateway ENCODER_URL) its URL'}`);
    }
  }
  if (tooBig.length) {
    const ends = tooBig.some((nd) => nd === nodes[0] || nd === nodes.at(-1));
    console.error(`layerfold plan: ${tooBig.length} node(s) need more than their budget: use more nodes` +
      (whole ? ', a smaller --max-context or --max-tokens' : '') + ', a larger --max-members' +
      (ends ? ', or give the first and last nodes more (--end-memory)' : ''));
    return 1;
  }
  return 0;
}
