// Bundles the edge worker into one ES module (build/edge/worker.js) with the wasm32-wasi
// module beside it (build/edge/layerfold_wasi.wasm), which the runtime imports as a compiled
// module (wrangler's CompiledWasm rule, miniflare's modulesRules).
import { copyFile, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const WASM = 'layerfold_wasi.wasm';

// The .wasm import stays an import, of the copy beside the bundle.
const wasmBesideBundle = {
  name: 'wasm-beside-bundle',
  setup(b) {
    b.onResolve({ filter: /\.wasm$/ }, () => ({ path: `./${WASM}`, external: true }));
  },
};

/**
 * Writes worker.js and layerfold_wasi.wasm into outDir; returns their paths and sizes. `entry`
 * bundles another worker module instead of js-glue/edge/worker.js (one that imports
 * edge_node.js, say); any .wasm it imports becomes the layerfold module beside the bundle.
 * @example const { script } = await bundleEdgeWorker('build/edge');
 */
export async function bundleEdgeWorker(outDir, { entry = path.join(here, 'worker.js') } = {}) {
  await mkdir(outDir, { recursive: true });
  const script = path.join(outDir, 'worker.js');
  const wasm = path.join(outDir, WASM);
  await build({
    entryPoints: [entry],
    outfile: script,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'browser'],
    target: 'es2022',
    plugins: [wasmBesideBundle],
    logLevel: 'warning',
  });
  await copyFile(path.join(here, '..', 'dist', WASM), wasm);
  return { script, wasm, scriptBytes: (await stat(script)).size, wasmBytes: (await stat(wasm)).size };
}
