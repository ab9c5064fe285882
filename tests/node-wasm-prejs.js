// The 3.1.6 glue fetch()es the .wasm by path under Node 18+, which fails: hand it the bytes.
// (__filename exists on Node's main thread only; pthread workers receive the compiled module.)
if (typeof __filename === 'string' && !Module['wasmBinary']) {
  Module['wasmBinary'] = require('fs').readFileSync(__filename.replace(/\.js$/, '.wasm'));
}
