// layerfold inspect MODEL: architecture, per-layer shapes, types and bytes, from the header.
import { readModelHeader } from '../gguf/model_header.js';
import { redactUrl } from '../server/redact.js';
import { allowUnvalidatedSource } from './serve.js';

const MB = 1024 * 1024;

export async function inspect(options, [model]) {
  if (!model) throw new Error('inspect needs a MODEL path');
  const header = await readModelHeader(model, { allowUnvalidatedSource: allowUnvalidatedSource(options['allow-unvalidated-source'], process.env) });
  const arch = header.metadata['general.architecture'];
  const layers = new Map();
  let other = 0;
  for (const t of header.tensors) {
    // Weights, and the per-expert scales and router scale of a MoE layer (`ffn_gate_inp.scale`).
    const m = /^blk\.(\d+)\.(.+?)(\.weight|(\.scale))$/.exec(t.name);
    if (!m) {
      other += t.n_bytes;
      continue;
    }
    const il = Number(m[1]);
    if (!layers.has(il)) layers.set(il, { bytes: 0, tensors: {} });
    layers.get(il).bytes += t.n_bytes;
    layers.get(il).tensors[m[2] + (m[4] ?? '')] = `${t.type} [${t.ne.join(', ')}]`;
  }
  const experts = header.metadata[`${arch}.expert_count`] ?? 0;
  const summary = {
    file: redactUrl(model), architecture: arch, name: header.metadata['general.name'], fileBytes: header.file_size,
    ...(experts > 0 && {
      experts: { count: experts, used: header.metadata[`${arch}.expert_used_count`],
                 width: header.metadata[`${arch}.expert_feed_forward_length`] },
    }),
    layers: [...layers.entries()].sort((a, b) => a[0] - b[0]).map(([il, l]) => ({ layer: il, bytes: l.bytes, tensors: l.tensors })),
    nonLayerBytes: other,
  };
  if (options.json) {
    console.log(JSON.stringify(summary, null, 2));
    return 0;
  }
  console.log(`${redactUrl(model)}: ${arch} "${summary.name}", ${(header.file_size / MB).toFixed(1)} MiB, ${layers.size} layers`);
  if (summary.experts) {
    const e = summary.experts;
    console.log(`  mixture of experts: ${e.count} experts of width ${e.width}, ${e.used} used per token`);
  }
  console.log(`  embedding, output norm, head and rope factors: ${(other / MB).toFixed(1)} MiB`);
  for (const l of summary.layers) {
    console.log(`  layer ${String(l.layer).padStart(2)}  ${(l.bytes / MB).toFixed(1).padStart(8)} MiB  ` +
      `attn_q ${l.tensors.attn_q}  attn_k ${l.tensors.attn_k}  attn_v ${l.tensors.attn_v ?? '(none: V = K)'}  ffn_down ${l.tensors.ffn_down}`);
    if (l.tensors.ffn_gate_inp) {
      const gateUp = l.tensors.ffn_gate_up_exps ? `ffn_gate_up_exps ${l.tensors.ffn_gate_up_exps}`
        : `ffn_gate_exps ${l.tensors.ffn_gate_exps}  ffn_up_exps ${l.tensors.ffn_up_exps}`;
      console.log(`            experts: router ${l.tensors.ffn_gate_inp}  ${gateUp}  ffn_down_exps ${l.tensors.ffn_down_exps}` +
        (l.tensors['ffn_down_exps.scale'] ? '  per-expert down scale' : ''));
    }
  }
  return 0;
}
