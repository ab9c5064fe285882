// WebP decoding for a Node host: the decoder's WASM read from the @jsquash/webp package and
// compiled once (a worker imports the same file as a module and calls useWebpDecoder itself).
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

import { useWebpDecoder } from './decode_image.js';

const require = createRequire(import.meta.url);
let loading = null;

/**
 * Makes decodeImage read WebP in this process; resolves once the decoder is compiled.
 * @example await loadWebpDecoder(); const image = await decodeImage(bytes);
 */
export function loadWebpDecoder() {
  loading ??= readFile(require.resolve('@jsquash/webp/codec/dec/webp_dec.wasm'))
    .then((bytes) => WebAssembly.compile(bytes))
    .then(useWebpDecoder);
  return loading;
}
