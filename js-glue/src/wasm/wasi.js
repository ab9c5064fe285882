// The wasm32-wasi single-thread module, instantiated from a compiled WebAssembly.Module with the
// few WASI imports it has answered here. No node: imports: Node (load_node.js) and edge workers
// (js-glue/edge/) share this file.
//
// It comes in two variants, like the threaded module: SIMD128, and relaxed SIMD (the relaxed
// Q4_0 kernel over weights in row strips, docs/kernels.md), which only engines that validate
// relaxed SIMD (Node 22+, workerd) can compile, and whose kernels run only where the engine
// fuses f32x4.relaxed_madd (features.js). Both give the same bytes.
import { bindCapi } from './capi.js';
import { chooseDotForm } from './dot_form.js';
import { kernelChoiceReason } from './features.js';

/**
 * The variants' file names, in the package's dist/ and beside an edge bundle; the host picks
 * one by relaxedSimdChoice() (features.js).
 */
export const SINGLE_THREAD_FILES = Object.freeze({ simd128: 'layerfold_wasi.wasm', relaxed: 'layerfold_wasi_relaxed.wasm' });

/** Whether this runtime can run the threaded build (SharedArrayBuffer and Atomics). */
export function threadsAvailable() {
  return typeof SharedArrayBuffer === 'function' && typeof Atomics === 'object';
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
 * Instantiates the compiled wasm32-wasi module and binds its C ABI. Workers cannot compile wasm
 * from bytes at run time, so this takes a WebAssembly.Module (a module binding on the edge).
 * `variant` says which one it is, for lf.kernelChoice: relaxed or not, chosen by the caller
 * (forced) or by relaxedSimdChoice(); without it, the module is the caller's own.
 * @param {WebAssembly.Module} compiled
 * @param {{relaxed: boolean, forced: boolean}} [variant]
 * @param {{dotForm?: string}} [options] dotForm: force the relaxed kernels' dot form (dot_form.js)
 * @example import wasm from '../layerfold_wasi.wasm'; const lf = await instantiateSingleThreadModule(wasm);
 */
export async function instantiateSingleThreadModule(compiled, variant, { dotForm } = {}) {
  if (!(compiled instanceof WebAssembly.Module)) {
    throw new TypeError(`expected the compiled layerfold_wasi.wasm as a WebAssembly.Module, got ${Object.prototype.toString.call(compiled)}`);
  }
  let memory;
  const instance = await WebAssembly.instantiate(compiled, wasiImports(() => memory));
  memory = instance.exports.memory;
  instance.exports._initialize();
  const lf = bindCapi({
    kind: 'single',
    threads: 1,
    memory: () => memory.buffer,
    call: (name) => instance.exports[name],
    raw: instance,
  });
  const kernels = lf.readCString(lf.fn.lf_kernel_isa());
  lf.kernelChoice = variant ? kernelChoiceReason({ ...variant, kernels }) : `the module the caller gave (${kernels})`;
  lf.dotForm = chooseDotForm(lf, dotForm);
  return lf;
}
