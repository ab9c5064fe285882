// A projector's towers for a host that reads images and, on E2B/E4B, audio: the file read into
// WASM memory once (gguf/projector_data.js), its vision tower and, where the file has one, its
// audio encoder made over the same copy of the tensors.
import { AudioEncoder } from '../audio/encoder.js';
import { readProjectorData } from '../gguf/projector_data.js';
import { VisionEncoder } from '../vision/encoder.js';

/**
 * `source`'s towers on `threads` workers each: {vision, audio (null without an audio encoder),
 * header (the file's, openGgufHeader's), close()}; refused by name (the engine's message after the source's name).
 * @example const { vision, audio, close } = await openProjector(lf, await openSource('mmproj.gguf'), { threads: 2 });
 */
export async function openProjector(lf, source, { threads = 1 } = {}) {
  const projector = await readProjectorData(lf, source);
  let vision = null, audio = null;
  try {
    vision = VisionEncoder.create(lf, projector, { threads });
    if (projector.header.metadata?.['clip.has_audio_encoder'] === true) audio = AudioEncoder.create(lf, projector, { threads });
  } catch (error) {
    vision?.close();
    lf.free(projector.data);
    throw error;
  } finally {
    lf.fn.lf_gguf_free(projector.gguf);
  }
  const close = () => {
    vision.close();
    audio?.close();
    lf.free(projector.data);
  };
  return { vision, audio, header: projector.header, close };
}
