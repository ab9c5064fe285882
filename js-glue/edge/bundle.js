// Bundles the edge worker into one ES module (build/edge/worker.js) with the wasm32-wasi
// module's two variants beside it (build/edge/layerfold_wasi.wasm, SIMD128, and
// layerfold_wasi_relaxed.wasm, relaxed SIMD), and for the gateway the grammar engine's module
// (xgrammar.wasm: xgrammar_bundle.js) and the media decoders' (webp_dec.wasm, mpg123.wasm,
// flac.wasm: media_decoders_bundle.js), which the runtime imports as compiled modules
// (wrangler's CompiledWasm rule, miniflare's modulesRules).
import { copyFile, mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

import { SINGLE_THREAD_FILES } from '../src/wasm/wasi.js';
import { MEDIA_DECODER_WASM, mediaDecodersForIsolates } from './media_decoders_bundle.js';
import { XGRAMMAR_WASM, xgrammarForIsolates } from './xgrammar_bundle.js';

const here = path.dirname(fileURLToPath(import.meta.url));

// Each .wasm import stays an import, of the copy beside the bundle: the relaxed variant's name
// imports it, any other the SIMD128 one. Without the relaxed variant its import is undefined,
// so the worker runs the SIMD128 module.
const wasmBesideBundle = (relaxed) => ({
  name: 'wasm-beside-bundle',
  setup(b) {
    b.onResolve({ filter: /\.wasm$/ }, (args) => {
      if (path.basename(args.path) !== SINGLE_THREAD_FILES.relaxed) return { path: `./${SINGLE_THREAD_FILES.simd128}`, external: true };
      return relaxed ? { path: `./${SINGLE_THREAD_FILES.relaxed}`, external: true } : { path: 'none', namespace: 'no-relaxed-variant' };
    });
    b.onLoad({ filter: /.*/, namespace: 'no-relaxed-variant' }, () => ({ contents: 'export default undefined;', loader: 'js' }));
  },
});

// The audio decoders' Web Worker shim (@eshaz/web-worker) reads the global Worker as it loads and
// is extended there, and an isolate has none: a class that refuses to start stands in for it
// (the decoders are never asked for a worker here).
const noWebWorkers = {
  name: 'no-web-workers',
  setup(b) {
    b.onResolve({ filter: /^@eshaz\/web-worker$/ }, () => ({ path: 'web-worker', namespace: 'no-web-workers' }));
    b.onLoad({ filter: /.*/, namespace: 'no-web-workers' }, () => ({ contents: 'export default class { constructor() { throw new Error("an isolate has no Web Workers"); } }', loader: 'js' }));
  },
};

/**
 * Writes worker.js and the modules it imports into outDir; returns their paths and sizes
 * (`wasm`, `wasmBytes` the SIMD128 module; `relaxedWasm`, `relaxedWasmBytes` the relaxed one,
 * null without it; `xgrammarWasm`, `xgrammarWasmBytes` the grammar engine's module, written when
 * the worker uses it, null otherwise). `entry` bundles another worker module instead of js-glue/edge/worker.js (one
 * that imports edge_node.js, say). `relaxed: false` leaves the relaxed variant out, for
 * runtimes whose engine does not validate relaxed SIMD: they compile every module binding when
 * the script loads, so its presence alone would stop the worker.
 * @example const { script } = await bundleEdgeWorker('build/edge');
 */
export async function bundleEdgeWorker(outDir, { entry = path.join(here, 'worker.js'), relaxed = true } = {}) {
  await mkdir(outDir, { recursive: true });
  const script = path.join(outDir, 'worker.js');
  const xgrammarWasm = path.join(outDir, XGRAMMAR_WASM);
  // a previous bundle's, which this one may not use
  for (const name of [XGRAMMAR_WASM, ...Object.values(MEDIA_DECODER_WASM)]) await rm(path.join(outDir, name), { force: true });
  await build({
    entryPoints: [entry],
    outfile: script,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'browser'],
    target: 'es2022',
    // An entry outside js-glue (a benchmark's worker) takes js-glue's dependencies too.
    nodePaths: [path.join(here, '..', 'node_modules')],
    plugins: [xgrammarForIsolates(outDir), mediaDecodersForIsolates(outDir), wasmBesideBundle(relaxed), noWebWorkers],
    logLevel: 'warning',
  });
  const copy = async (name) => {
    const to = path.join(outDir, name);
    await copyFile(path.join(here, '..', 'dist', name), to);
    return [to, (await stat(to)).size];
  };
  const [wasm, wasmBytes] = await copy(SINGLE_THREAD_FILES.simd128);
  let [relaxedWasm, relaxedWasmBytes] = [null, null];
  if (relaxed) [relaxedWasm, relaxedWasmBytes] = await copy(SINGLE_THREAD_FILES.relaxed);
  else await rm(path.join(outDir, SINGLE_THREAD_FILES.relaxed), { force: true });  // a previous bundle's
  const xgrammarWasmBytes = await stat(xgrammarWasm).then((s) => s.size, () => null);
  return {
    script, wasm, relaxedWasm, xgrammarWasm: xgrammarWasmBytes === null ? null : xgrammarWasm,
    scriptBytes: (await stat(script)).size, wasmBytes, relaxedWasmBytes, xgrammarWasmBytes,
  };
}
