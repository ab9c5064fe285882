// The CLI's images (generate --image FILE --mmproj PATH|URL): the projector's encoder on a module
// of its own, each file read and placed in the chat prompt as the gateway places an image part
// (generation/media.js, generation/prompt.js).
import fs from 'node:fs';

import { DEFAULT_IMAGE_MAX_TOKENS, MediaInput } from '../generation/media.js';
import { promptTokens } from '../generation/prompt.js';
import { openSource } from '../sources/open_source.js';
import { VisionEncoder } from '../vision/encoder.js';
import { loadThreadedModule } from '../wasm/load_node.js';

export const IMAGE_OPTIONS = {
  image: { kind: 'list', value: 'FILE', help: 'a JPEG, PNG or WebP the prompt shows the model, repeatable (with --chat and --mmproj)' },
  mmproj: { kind: 'string', value: 'PATH|URL', help: 'the model\'s vision projector, for --image' },
  'image-max-tokens': { kind: 'integer', min: 70, max: 1120, value: 'N', help: 'an image\'s soft-token budget', default: DEFAULT_IMAGE_MAX_TOKENS },
};

/**
 * The images the options name, read for the prompts: {media, parts, close()} (media: a
 * MediaInput; parts: the files' image parts), or null without --image. Refuses --image without --chat or --mmproj, and files
 * that cannot be read, by name.
 * @example const images = await openImages(options); // options.image: ['cat.png']
 */
export async function openImages(options) {
  const files = options.image ?? [];
  if (files.length === 0) return null;
  if (!options.chat) throw new Error('--image goes with --chat: the chat template places the image in the prompt');
  if (options.mmproj === undefined) throw new Error('--image needs --mmproj PATH|URL, the model\'s vision projector');
  const parts = files.map((file) => {
    try {
      return { type: 'image', bytes: new Uint8Array(fs.readFileSync(file)), param: `--image ${file}` };
    } catch (error) {
      throw new Error(`--image ${file}: ${error.code === 'ENOENT' ? 'no such file' : error.message}`);
    }
  });
  const lf = await loadThreadedModule({ threads: options.threads });
  try {
    const encoder = await VisionEncoder.open(lf, await openSource(options.mmproj, { allowUnvalidatedSource: options['allow-unvalidated-source'] }),
      { threads: lf.threads });
    const media = new MediaInput(encoder, { maxTokens: options['image-max-tokens'] });
    return { media, parts, close: () => { encoder.close(); lf.close(); } };
  } catch (error) {
    lf.close();
    throw error;
  }
}

/**
 * A chat prompt of one user message, the images before its text -> {ids, items} (generation/prompt.js).
 * @example const { ids, items } = await imagePrompt(pipeline, images, 'What is in this picture?');
 */
export async function imagePrompt(pipeline, { media, parts }, text) {
  const request = { kind: 'chat', messages: [{ role: 'user', content: [...parts, { type: 'text', text }] }] };
  return promptTokens(pipeline, request, undefined, media);
}
