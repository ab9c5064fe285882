// Instantiates one of the two WASM builds and binds the C ABI (capi.js).
//  - threaded: Emscripten pthreads on a SharedArrayBuffer (Node, Cloud Run);
//  - single:   the wasm32-wasi reactor, for runtimes without threads (edge workers).
// Chosen by capability, not by guessing the platform.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import os from 'node:os';

import { bindCapi } from './capi.js';

const require = createRequire(import.meta.url);
const distDir = new URL('../dist/', import.meta.url);
const distFile = (name) => fileURLToPath(new URL(name, distDir));

export function threadsAvailable() {
  return typeof SharedArrayBuffer === 'function' && typeof Atomics === 'object';
}

/**
 * Loads the threaded Emscripten module; its pthread pool starts once, here, with one Web Worker
 * per engine thread: the engine's workers (lf_model_set_threads, at most `threads`) run every
 * forward, the JS thread only hands it over and awaits it (docs/threads.md).
 * @param {{threads?: number}} [options] pool size (default: the machine's parallelism)
 * @example const lf = await loadThreadedModule({ threads: 4 });
 */
export async function loadThreadedModule({ threads = os.availableParallelism() } = {}) {
  if (!threadsAvailable()) throw new Error('this runtime has no SharedArrayBuffer: use loadSingleThreadModule');
  const createLayerfold = require(distFile('layerfold_mt.js'));
  // The 3.1.6 glue would fetch() the .wasm by path under Node 18+; hand it the bytes.
  const wasmBinary = await readFile(distFile('layerfold_mt.wasm'));
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

// The reactor imports only a few WASI calls (stdio for fatal messages, a clock for per-layer
// timings); we answer them here rather than pull in a WASI runtime.
function wasiImports(getMemory) {
  const ENOSYS = 52;
  return {
    wasi_snapshot_preview1: {
      fd_write(fd, iovs, iovsLen, nwrittenPtr) {
        const view = new DataView(getMemory().buffer);
        let text = '';
        let written = 0;
        for (let i = 0; i < iovsLen; i++) {
          const ptr = view.getUint32(iovs + i * 8, true);
          const len = view.getUint32(iovs + i * 8 + 4, true);
          text += new TextDecoder().decode(new Uint8Array(getMemory().buffer, ptr, len));
          written += len;
        }
        if (text) console.error(`[layerfold wasi fd ${fd}] ${text.trimEnd()}`);
        view.setUint32(nwrittenPtr, written, true);
        return 0;
      },
      fd_close: () => ENOSYS,
      fd_seek: () => ENOSYS,
      clock_time_get(clockId, precision, timePtr) {
        const ns = BigInt(Math.round(performance.now() * 1e6));
        new DataView(getMemory().buffer).setBigUint64(timePtr, ns, true);
        return 0;
      },
      proc_exit(code) { throw new Error(`layerfold wasm exited with code ${code}`); },
    },
  };
}

/**
 * Instantiates the wasm32-wasi single-thread module from its bytes or a compiled module
 * (workers cannot compile wasm from bytes at run time: they pass a WebAssembly.Module).
 * @param {{module?: WebAssembly.Module, bytes?: Uint8Array}} [source]
 */
export async function loadSingleThreadModule(source = {}) {
  const compiled = source.module ?? await WebAssembly.compile(source.bytes ?? await readFile(distFile('layerfold_wasi.wasm')));
  let memory;
  const instance = await WebAssembly.instantiate(compiled, wasiImports(() => memory));
  memory = instance.exports.memory;
  instance.exports._initialize();
  return bindCapi({
    kind: 'single',
    threads: 1,
    memory: () => memory.buffer,
    call: (name) => instance.exports[name],
    raw: instance,
  });
}
