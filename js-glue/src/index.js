// The public API of the layerfold package (types in ../index.d.ts).
export { LayerfoldError } from './capi.js';
export { LayerNode } from './layer_node.js';
export { Pipeline } from './pipeline.js';
export { RemoteNode } from './remote_node.js';
export { Tokenizer } from './tokenizer.js';
export { openSource } from './open_source.js';
export { logSoftmax, topK } from './logits.js';
export { createLayerNodeApp } from './server/app.js';
export { serve } from './server/node_host.js';
