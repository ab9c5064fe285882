// The media decoders' WebAssembly made fit for a Workers-style isolate at bundle time: libwebp's
// (@jsquash/webp ships it as a file) and mpg123's and libFLAC's (their packages ship them inside
// their JS: audio/decoder_wasm.js takes them out). An isolate may not compile WebAssembly at run
// time, only import modules it was deployed with, so the gateway worker imports each as
// "./<name>.wasm" and hands them over (useWebpDecoder, useAudioDecoders); this plugin writes those
// files beside the bundle.
import { copyFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

import { audioDecoderWasm } from '../src/audio/decoder_wasm.js';

const require = createRequire(import.meta.url);

/** The files written beside the bundle, by decoder. */
export const MEDIA_DECODER_WASM = { webp: 'webp_dec.wasm', mp3: 'mpg123.wasm', flac: 'flac.wasm' };

const writers = {
  [MEDIA_DECODER_WASM.webp]: (to) => copyFile(require.resolve('@jsquash/webp/codec/dec/webp_dec.wasm'), to),
  [MEDIA_DECODER_WASM.mp3]: async (to) => writeFile(to, (await audioDecoderWasm()).mp3),
  [MEDIA_DECODER_WASM.flac]: async (to) => writeFile(to, (await audioDecoderWasm()).flac),
};

/**
 * An esbuild plugin that keeps a bundle's imports of "./webp_dec.wasm", "./mpg123.wasm" and
 * "./flac.wasm" as imports and writes each file into outDir, for the runtime's wasm rule
 * (wrangler's CompiledWasm, miniflare's modulesRules) to turn into a WebAssembly.Module.
 * @example await build({ ..., plugins: [mediaDecodersForIsolates(outDir)] });
 */
export function mediaDecodersForIsolates(outDir) {
  const names = Object.values(MEDIA_DECODER_WASM);
  return {
    name: 'media-decoders-for-isolates',
    setup(b) {
      b.onResolve({ filter: /^\.\/[a-z0-9_]+\.wasm$/ }, async (args) => {
        const name = args.path.slice(2);
        if (!names.includes(name)) return undefined;
        await writers[name](path.join(outDir, name));
        return { path: `./${name}`, external: true };
      });
    },
  };
}
