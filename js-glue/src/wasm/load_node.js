// Loads one of the two WASM builds in Node and binds the C ABI (capi.js).
//  - threaded: Emscripten pthreads on a SharedArrayBuffer (Node, Cloud Run);
//  - single:   the wasm32-wasi reactor, for runtimes without threads (edge workers).
// Chosen by capability, not by guessing the platform. The single-thread instantiation itself
// lives in wasi.js, free of node: imports, for edge workers.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import os from 'node:os';

import { bindCapi } from './capi.js';
import { relaxedSimdSupported } from './features.js';
import { instantiateSingleThreadModule, threadsAvailable } from './wasi.js';

const require = createRequire(import.meta.url);
const distDir = new URL('../../dist/', import.meta.url);
const distFile = (name) => fileURLToPath(new URL(name, distDir));

export { threadsAvailable };

/**
 * Loads the threaded Emscripten module; its pthread pool starts once, here, with one Web Worker
 * per engine thread: the engine's workers (lf_model_set_threads, at most `threads`) run every
 * forward, the JS thread only hands it over and awaits it (docs/threads.md). Where the engine
 * validates relaxed SIMD (Node 22+), the variant with the relaxed-SIMD Q4_0 kernel is loaded:
 * same results, bit for bit (docs/kernels.md).
 * @param {{threads?: number, relaxedSimd?: boolean}} [options] pool size (default: the
 *   machine's parallelism); relaxedSimd: force the variant (default: by capability)
 * @example const lf = await loadThreadedModule({ threads: 4 });
 */
export async function loadThreadedModule({ threads = os.availableParallelism(), relaxedSimd = relaxedSimdSupported() } = {}) {
  if (!threadsAvailable()) throw new Error('this runtime has no SharedArrayBuffer: use loadSingleThreadModule');
  const variant = relaxedSimd ? 'layerfold_mt_relaxed' : 'layerfold_mt';
  const createLayerfold = require(distFile(`${variant}.js`));
  // The 3.1.6 glue would fetch() the .wasm by path under Node 18+; hand it the bytes.
  const wasmBinary = await readFile(distFile(`${variant}.wasm`));
  const module = await createLayerfold({
    wasmBinary,
    lfThreads: threads,
    locateFile: (path) => distFile(path),
    print: (line) => process.stdout.write(`${line}\n`),
    printErr: (line) => process.stderr.write(`${line}\n`),
  });
  return bindCapi({
    kind: 'threaded',
    threads,
    // Pool threads may grow the memory while JS awaits them: read the buffer from the memory
    // itself, which never goes stale, rather than from the glue's cached views.
    memory: () => (module.wasmMemory ?? module.HEAPU8).buffer,
    call: (name) => module[`_${name}`],
    raw: module,
    close: () => module.PThread.terminateAllThreads(),
  });
}

/**
 * Instantiates the wasm32-wasi single-thread module from its bytes or a compiled module
 * (default: the package's dist/layerfold_wasi.wasm).
 * @param {{module?: WebAssembly.Module, bytes?: Uint8Array}} [source]
 * @example const lf = await loadSingleThreadModule();
 */
export async function loadSingleThreadModule(source = {}) {
  const compiled = source.module ?? await WebAssembly.compile(source.bytes ?? await readFile(distFile('layerfold_wasi.wasm')));
  return instantiateSingleThreadModule(compiled);
}
