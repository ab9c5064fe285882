// The projector a layer node serves beside its layers (serve --mmproj): its towers on a module
// of their own, with the config and limits its encode calls are checked against
// (server/encode_routes.js) and /v1/info tells a gateway (protocol/encode_body.js). Opened by the
// command and handed to the node's host (server/node_host.js serve's `encoder`).
import { DEFAULT_MAX_AUDIO_SECONDS } from '../audio/decode_audio.js';
import { audioConfig, visionConfig } from '../gguf/projector_config.js';
import { DEFAULT_MAX_IMAGE_PIXELS } from '../vision/decode_image.js';
import { openProjectorModule } from './open_projector.js';

/**
 * The projector at `mmproj` (a path or URL) on `threads` workers a tower -> {vision, audio,
 * config: {vision, audio}, maxImagePixels, maxAudioSeconds, close()}; refused by name.
 * @example const encoder = await openNodeEncoder('mmproj.gguf', { threads: 2 });
 */
export async function openNodeEncoder(mmproj, { threads, cacheDir, allowUnvalidatedSource, maxImagePixels = DEFAULT_MAX_IMAGE_PIXELS,
  maxAudioSeconds = DEFAULT_MAX_AUDIO_SECONDS } = {}) {
  const projector = await openProjectorModule(mmproj, { threads, cacheDir, allowUnvalidatedSource });
  const config = { vision: visionConfig(projector.header), audio: projector.audio ? audioConfig(projector.header) : null };
  return { vision: projector.vision, audio: projector.audio, config, maxImagePixels, maxAudioSeconds, close: projector.close };
}
