// layerfold inspect MODEL: the model as the engine reads its header (lf_model_info_json: the
// widths, each layer's attention, FFN, shared KV and experts) and what a node loads for each
// layer (lf_node_needs_json: the tensors, their types, shapes and bytes), never from tensor names
// or metadata keys read here.
import { withModelHeader } from '../gguf/model_header.js';
import { redactUrl } from '../log/redact.js';
import { ALLOW_UNVALIDATED_SOURCE, JSON_OUTPUT } from './options/shared.js';

export const INSPECT_OPTIONS = { json: JSON_OUTPUT, 'allow-unvalidated-source': ALLOW_UNVALIDATED_SOURCE };

const MB = 1024 * 1024;
const mib = (bytes) => `${(bytes / MB).toFixed(1)} MiB`;

// The tensors and their bytes of a node of layers [begin, end), per-layer embeddings held whole.
function nodeNeeds(lf, gguf, [begin, end], { withEmbedding = false, withHead = false } = {}) {
  return lf.json(lf.fn.lf_node_needs_json(gguf, begin, end, withEmbedding ? 1 : 0, withHead ? 1 : 0, 0, 1, 0, 0, 0, 0));
}

// What `inspect --json` prints: the engine's info as it emits it; each layer's bytes and tensors
// as a node of that layer alone loads them ("type [ne]" by name); the bytes the first node adds
// for the embedding and the last for the head.
function summarize(lf, gguf, header, model) {
  const { info } = header;
  const byName = new Map(header.tensors.map((t) => [t.name, t]));
  const layers = info.layers.map((_, il) => {
    const needs = nodeNeeds(lf, gguf, [il, il + 1]);
    const tensors = Object.fromEntries(needs.tensors.map((name) => [name, `${byName.get(name).type} [${byName.get(name).ne.join(', ')}]`]));
    return { layer: il, bytes: needs.tensor_bytes, tensors };
  });
  const n = info.n_layer;
  return {
    file: redactUrl(model), name: header.metadata['general.name'], file_bytes: header.file_size, info,
    embedding_bytes: nodeNeeds(lf, gguf, [0, 1], { withEmbedding: true }).tensor_bytes - layers[0].bytes,
    head_bytes: nodeNeeds(lf, gguf, [n - 1, n], { withHead: true }).tensor_bytes - layers[n - 1].bytes,
    layers,
  };
}

// "7 Q4_0, 6 F32": how many of a layer's tensors have each type.
function typeCounts(tensors) {
  const counts = new Map();
  for (const desc of Object.values(tensors)) {
    const type = desc.split(' ')[0];
    counts.set(type, (counts.get(type) ?? 0) + 1);
  }
  return [...counts].map(([type, k]) => `${k} ${type}`).join(', ');
}

function printText(s) {
  const { info } = s;
  console.log(`${s.file}: ${info.arch} "${s.name}", ${mib(s.file_bytes)}, ${info.n_layer} layers`);
  console.log(`  n_embd ${info.n_embd}, n_vocab ${info.n_vocab}, n_ctx_train ${info.n_ctx_train}, n_swa ${info.n_swa}`);
  if (info.n_embd_per_layer > 0) console.log(`  per-layer embeddings of width ${info.n_embd_per_layer}`);
  if (info.n_expert > 0) {
    console.log(`  mixture of experts: ${info.n_expert} experts of width ${info.n_ff_exp}, ${info.n_expert_used} used per token`);
  }
  console.log(`  the first node adds ${mib(s.embedding_bytes)} for the embedding, the last ${mib(s.head_bytes)} for the head`);
  const shapes = info.layers.map((l, il) => `${l.sliding ? 'sliding' : 'global '}  ${l.n_head} heads, ${l.n_head_kv} KV ` +
    `head${l.n_head_kv === 1 ? '' : 's'} of ${l.head_dim}, n_ff ${l.n_ff}${l.moe ? ' and experts' : ''}` +
    `${l.kv_layer === il ? '' : `, KV of layer ${l.kv_layer}`}`);
  const width = Math.max(...shapes.map((shape) => shape.length));
  for (const [il, shape] of shapes.entries()) {
    const l = s.layers[il];
    console.log(`  layer ${String(il).padStart(2)}  ${shape.padEnd(width)}  ${mib(l.bytes).padStart(10)}  ${typeCounts(l.tensors)}`);
  }
}

export async function inspect(options, [model]) {
  if (!model) throw new Error('inspect needs a MODEL path');
  const sourceOptions = { allowUnvalidatedSource: options['allow-unvalidated-source'] };
  const summary = await withModelHeader(model, sourceOptions, (lf, gguf, header) => summarize(lf, gguf, header, model));
  if (options.json) console.log(JSON.stringify(summary, null, 2));
  else printText(summary);
  return 0;
}
