// The media decoders of a Node host: the MP3 and FLAC packages compile their own WASM, libwebp's
// is read from its package (a worker imports all three as modules instead: edge/gateway_worker.js).
import { useAudioDecoders } from '../audio/decode_audio.js';
import { loadWebpDecoder } from '../vision/webp_node.js';

/**
 * Makes decodeImage read WebP and decodeAudio MP3 and FLAC in this process.
 * @example await useNodeMediaDecoders(); const { rgb } = await decodeImage(webpBytes);
 */
export async function useNodeMediaDecoders() {
  useAudioDecoders();
  await loadWebpDecoder();
}
