// The CLI's images and audio clips (generate --image FILE --audio FILE --mmproj PATH|URL): the
// projector's towers on a module of their own, each file read and placed in the chat prompt as the
// gateway places an image or audio part (generation/media.js, generation/prompt.js).
import fs from 'node:fs';

import { DEFAULT_IMAGE_MAX_TOKENS, MediaInput } from '../generation/media.js';
import { useNodeMediaDecoders } from '../generation/node_media_decoders.js';
import { promptTokens } from '../generation/prompt.js';
import { openProjectorModule } from '../generation/open_projector.js';

export const IMAGE_OPTIONS = {
  image: { kind: 'list', value: 'FILE', help: 'a JPEG, PNG or WebP the prompt shows the model, repeatable (with --chat and --mmproj)' },
  audio: { kind: 'list', value: 'FILE', help: 'a WAV, MP3 or FLAC the prompt plays the model, repeatable (with --chat and an E2B or E4B --mmproj)' },
  mmproj: { kind: 'string', value: 'PATH|URL', help: 'the model\'s projector, for --image and --audio' },
  'image-max-tokens': { kind: 'integer', min: 70, max: 1120, value: 'N', help: 'an image\'s soft-token budget', default: DEFAULT_IMAGE_MAX_TOKENS },
};

// The files of option --`kind` as parts of that kind, or an error naming the file.
function fileParts(options, kind) {
  return (options[kind] ?? []).map((file) => {
    try {
      return { type: kind, bytes: new Uint8Array(fs.readFileSync(file)), param: `--${kind} ${file}` };
    } catch (error) {
      throw new Error(`--${kind} ${file}: ${error.code === 'ENOENT' ? 'no such file' : error.message}`);
    }
  });
}

/**
 * The images and audio clips the options name, read for the prompts: {media, parts, close()}
 * (media: a MediaInput; parts: the files' image parts, then their audio parts), or null without
 * --image and --audio. Refuses them without --chat or --mmproj, and files that cannot be read, by
 * name.
 * @example const images = await openImages(options); // options.image: ['cat.png']
 */
export async function openImages(options) {
  const given = ['image', 'audio'].filter((kind) => (options[kind] ?? []).length > 0);
  if (given.length === 0) return null;
  const flag = `--${given[0]}`;
  if (!options.chat) throw new Error(`${flag} goes with --chat: the chat template places it in the prompt`);
  if (options.mmproj === undefined) throw new Error(`${flag} needs --mmproj PATH|URL, the model's projector`);
  const parts = [...fileParts(options, 'image'), ...fileParts(options, 'audio')];
  const projector = await openProjectorModule(options.mmproj, { threads: options.threads, allowUnvalidatedSource: options['allow-unvalidated-source'] });
  await useNodeMediaDecoders();
  const media = new MediaInput(projector, { maxTokens: options['image-max-tokens'] });
  return { media, parts, close: projector.close };
}

/**
 * A chat prompt of one user message, the images and audio clips before its text -> {ids, items}
 * (generation/prompt.js).
 * @example const { ids, items } = await imagePrompt(pipeline, images, 'What is in this picture?');
 */
export async function imagePrompt(pipeline, { media, parts }, text) {
  const request = { kind: 'chat', messages: [{ role: 'user', content: [...parts, { type: 'text', text }] }] };
  return promptTokens(pipeline, request, undefined, media);
}
