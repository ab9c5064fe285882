// Loads one of the two WASM builds in Node and binds the C ABI (capi.js).
//  - threaded: Emscripten pthreads on a SharedArrayBuffer (Node, Cloud Run);
//  - single:   the wasm32-wasi reactor, for runtimes without threads (edge workers).
// Chosen by capability, not by guessing the platform; so is each build's variant (SIMD128, or
// relaxed SIMD where the engine validates it and fuses its madd, features.js), and the reason is
// kept as lf.kernelChoice (LayerNode.info().kernelChoice). The single-thread instantiation itself
// lives in wasi.js, free of node: imports, for edge workers.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import os from 'node:os';

import { bindCapi } from './capi.js';
import { checkDotFormOption, chooseDotForm } from './dot_form.js';
import { kernelChoiceReason, relaxedSimdSupported } from './features.js';
import { SINGLE_THREAD_FILES, instantiateSingleThreadModule, threadsAvailable } from './wasi.js';

const require = createRequire(import.meta.url);
const distDir = new URL('../../dist/', import.meta.url);
const distFile = (name) => fileURLToPath(new URL(name, distDir));

export { threadsAvailable };

/**
 * Loads the threaded Emscripten module; its pthread pool starts once, here, with one Web Worker
 * per engine thread: the engine's workers (lf_model_set_threads, at most `threads`) run every
 * forward, the JS thread only hands it over and awaits it (docs/threads.md). Where the engine
 * validates relaxed SIMD and fuses f32x4.relaxed_madd (Node 22+ on x86 with FMA3 or ARM64), the
 * variant with the relaxed-SIMD Q4_0 kernel is loaded: same results, bit for bit (docs/kernels.md).
 * @param {{threads?: number, withDrafter?: boolean, pools?: number, relaxedSimd?: boolean, dotForm?: string}} [options]
 *   the engine's threads (default: the machine's parallelism); withDrafter: as many more pthreads,
 *   for an MTP drafter's pool of its own; pools: pools of `threads` each the module will hold at
 *   once (a projector's vision tower and audio encoder: 2), whose pthreads must all start here: a
 *   pthread made later waits for the event loop, which a pool's join would block; relaxedSimd:
 *   force the variant (default: by capability);
 *   dotForm: force the relaxed kernels' dot form, 'dot-add' or 'pairs' (default: the faster here,
 *   timed at load; dot_form.js), kept as lf.dotForm
 * @example const lf = await loadThreadedModule({ threads: 4 });
 */
export async function loadThreadedModule({ threads = os.availableParallelism(), withDrafter = false, pools = 1, relaxedSimd, dotForm } = {}) {
  if (!threadsAvailable()) throw new Error('this runtime has no SharedArrayBuffer: use loadSingleThreadModule');
  checkDotFormOption(dotForm);
  const relaxed = relaxedSimd ?? relaxedSimdSupported();
  const variant = relaxed ? 'layerfold_mt_relaxed' : 'layerfold_mt';
  const createLayerfold = require(distFile(`${variant}.js`));
  // The 3.1.6 glue would fetch() the .wasm by path under Node 18+; hand it the bytes.
  const wasmBinary = await readFile(distFile(`${variant}.wasm`));
  const module = await createLayerfold({
    wasmBinary,
    lfThreads: Math.max(pools, withDrafter ? 2 : 1) * threads,
    locateFile: (path) => distFile(path),
    print: (line) => process.stdout.write(`${line}\n`),
    printErr: (line) => process.stderr.write(`${line}\n`),
  });
  const lf = bindCapi({
    kind: 'threaded',
    threads,
    // Pool threads may grow the memory while JS awaits them: read the buffer from the memory
    // itself, which never goes stale, rather than from the glue's cached views.
    memory: () => (module.wasmMemory ?? module.HEAPU8).buffer,
    call: (name) => module[`_${name}`],
    raw: module,
    close: () => module.PThread.terminateAllThreads(),
  });
  lf.kernelChoice = kernelChoiceReason({ relaxed, forced: relaxedSimd !== undefined, kernels: lf.readCString(lf.fn.lf_kernel_isa()) });
  lf.withDrafter = withDrafter;
  try {
    lf.dotForm = chooseDotForm(lf, dotForm);
  } catch (error) {
    lf.close();
    throw error;
  }
  return lf;
}

/**
 * Instantiates the wasm32-wasi single-thread module from its bytes or a compiled module
 * (default: the package's dist/layerfold_wasi_relaxed.wasm where the engine validates relaxed
 * SIMD and fuses its madd, Node 22+, else dist/layerfold_wasi.wasm: same results, bit for bit).
 * @param {{module?: WebAssembly.Module, bytes?: Uint8Array, relaxedSimd?: boolean, dotForm?: string}} [source]
 *   relaxedSimd: force the dist/ variant (default: by capability); dotForm: as loadThreadedModule's
 * @example const lf = await loadSingleThreadModule();
 */
export async function loadSingleThreadModule({ module, bytes, relaxedSimd, dotForm } = {}) {
  checkDotFormOption(dotForm);
  if (module || bytes) return instantiateSingleThreadModule(module ?? await WebAssembly.compile(bytes), undefined, { dotForm });
  const relaxed = relaxedSimd ?? relaxedSimdSupported();
  const compiled = await WebAssembly.compile(await readFile(distFile(SINGLE_THREAD_FILES[relaxed ? 'relaxed' : 'simd128'])));
  return instantiateSingleThreadModule(compiled, { relaxed, forced: relaxedSimd !== undefined }, { dotForm });
}
