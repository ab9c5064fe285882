// The gateway's pipeline inside a Workers-style isolate: remote layer nodes only (an isolate
// has no room for weights beside the coordinator), the model's header read from an R2 binding
// with ranged gets, and its tokenizer in the single-thread wasm32-wasi module from a module
// binding.
import { openModelHeader } from '../src/gguf/header.js';
import { parseNodesSpec } from '../src/pipeline/nodes_spec.js';
import { checkNodes, PipelineCore } from '../src/pipeline/pipeline_core.js';
import { RemoteNode } from '../src/pipeline/remote_node.js';
import { R2BindingSource } from '../src/sources/r2_binding.js';
import { Tokenizer } from '../src/tokens/tokenizer.js';
import { instantiateSingleThreadModule } from '../src/wasm/wasi.js';

/**
 * The header and tokenizer of the GGUF at `key` in `bucket` (ranged gets of its header only), in
 * a single-thread module of `module`'s.
 * @example const { header, tokenizer } = await readEdgeModel(wasm, env.MODEL, env.MODEL_KEY);
 */
export async function readEdgeModel(module, bucket, key) {
  const lf = await instantiateSingleThreadModule(module);
  const source = await R2BindingSource.open(bucket, key);
  try {
    const { header, gguf } = await openModelHeader(lf, source);
    try {
      return { header, tokenizer: Tokenizer.fromGguf(lf, gguf) };
    } finally {
      lf.fn.lf_gguf_free(gguf);
    }
  } finally {
    await source.close();
  }
}

/**
 * A pipeline over the remote layer nodes `nodes` ("http://a:8080,http://b:8080", in pipeline
 * order) of the GGUF at `key` in `bucket`. `module` is the compiled layerfold_wasi.wasm.
 * @param {{module: WebAssembly.Module, bucket: object, key: string, nodes: string, authToken?: string,
 *          nodeTimeoutMs?: number, nodeReadyTimeoutMs?: number}} options authToken: the nodes' bearer token
 * @example const pipeline = await openEdgePipeline({ module: wasm, bucket: env.MODEL, key: 'tiny.gguf', nodes: env.NODES });
 */
export async function openEdgePipeline({ module, bucket, key, nodes: spec, authToken, nodeTimeoutMs, nodeReadyTimeoutMs }) {
  const entries = parseNodesSpec(spec ?? '');
  const local = entries.find((entry) => entry.kind !== 'remote');
  if (local?.urls) {
    // A group's leader keeps a WebSocket to each member from call to call; an isolate may use one
    // only within the request that opened it.
    throw new Error('NODES: a tensor-parallel group (tp(URL,...)) is led from Node (layerfold gateway, or a node pipeline), ' +
      'not from an edge isolate, which may use a WebSocket only within the request that opened it; give the URLs of layer nodes');
  }
  if (local) {
    const what = local.kind === 'group' ? 'a tensor-parallel group' : `local:${local.begin}-${local.end - 1}`;
    throw new Error(`NODES: ${what} cannot run in an edge isolate; give the URLs of layer nodes`);
  }
  const { header, tokenizer } = await readEdgeModel(module, bucket, key);
  const opened = [];
  try {
    for (const entry of entries) opened.push(await RemoteNode.open(entry.url, { authToken, timeoutMs: nodeTimeoutMs, readyTimeoutMs: nodeReadyTimeoutMs }));
    checkNodes(opened, header.info);
  } catch (error) {
    for (const node of opened) node.close();
    tokenizer.close();
    throw error;
  }
  return new PipelineCore(opened, header, tokenizer);
}
