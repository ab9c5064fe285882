// The MP3 and FLAC decoders' WASM as bytes, for a host that may not compile WASM at run time
// (workerd: a bundler writes them beside the worker, which imports them as compiled modules and
// hands them to useAudioDecoders). The packages ship their WASM only inside their JS, compressed
// (EmscriptenWasm.js's `wasm`, inflated by @wasm-audio-decoders/common): it is read from there,
// in Node, by file path, since the packages export only their decoders.
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);

/**
 * { mp3, flac }: the WASM bytes of mpg123-decoder's and @wasm-audio-decoders/flac's decoders.
 * @example const { mp3, flac } = await audioDecoderWasm(); fs.writeFileSync('out/mpg123.wasm', mp3);
 */
export async function audioDecoderWasm() {
  const [mp3, flac] = await Promise.all([wasmOf('mpg123-decoder'), wasmOf('@wasm-audio-decoders/flac')]);
  return { mp3, flac };
}

async function wasmOf(name) {
  const index = require.resolve(name);
  const { default: EmscriptenWASM } = await import(pathToFileURL(path.join(path.dirname(index), 'src', 'EmscriptenWasm.js')).href);
  // the inflater of the package's own copy of the common code, whichever version that is
  const { WASMAudioDecoderCommon } = await import(pathToFileURL(createRequire(index).resolve('@wasm-audio-decoders/common')).href);
  new WASMAudioDecoderCommon();  // sets up its static helpers, the inflater among them
  new EmscriptenWASM(WASMAudioDecoderCommon);  // defines `wasm` (nothing is compiled until instantiate)
  return WASMAudioDecoderCommon.inflateDynEncodeString(EmscriptenWASM.wasm);
}
