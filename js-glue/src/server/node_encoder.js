// The projector a layer node serves beside its layers (serve --mmproj): its towers on a module
// of their own, with the config and limits its encode calls are checked against
// (encode_routes.js) and /v1/info tells a gateway (protocol/encode_body.js).
import { DEFAULT_MAX_AUDIO_SECONDS } from '../audio/decode_audio.js';
import { openProjectorModule } from '../generation/open_projector.js';
import { audioConfig, visionConfig } from '../gguf/projector_config.js';
import { DEFAULT_MAX_IMAGE_PIXELS } from '../vision/decode_image.js';

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

/**
 * Throws when the encoder's rows are not of the node's model's width (nEmbd): a projector of
 * another model.
 * @example checkEncoderWidth(encoder, node.nEmbd);
 */
export function checkEncoderWidth(encoder, nEmbd) {
  if (encoder.vision.nEmbdText !== nEmbd) {
    throw new Error(`--mmproj: the projector gives rows of ${encoder.vision.nEmbdText} values, this model's width is ${nEmbd}: a projector of another model`);
  }
}
