// The public API of the layerfold package (types in ../index.d.ts).
export { LayerfoldError } from './wasm/capi.js';
export { readModelHeader } from './gguf/model_header.js';
export { LayerNode } from './node/layer_node.js';
export { Pipeline } from './pipeline/pipeline.js';
export { RemoteNode } from './pipeline/remote_node.js';
export { Tokenizer } from './tokens/tokenizer.js';
export { openSource } from './sources/open_source.js';
export { logSoftmax, topK } from './tokens/logits.js';
export { createLayerNodeApp } from './server/app.js';
export { serve } from './server/node_host.js';
export { Model } from './generation/model.js';
export { openModel } from './generation/open_model.js';
export { OpenAIError } from './generation/errors.js';
export { createGatewayApp } from './gateway/app.js';
export { serveGateway } from './gateway/host.js';
