// Capability detection for the WASM module variants (docs/kernels.md).
//
// layerfold_mt_relaxed and layerfold_wasi_relaxed use relaxed SIMD in their Q4_0 kernels:
// i32x4.relaxed_dot_i8x16_i7x16_add_s, and f32x4.relaxed_madd for each block's f32 step, whose
// bits are llama.cpp's (and the SIMD128 modules') only where the engine fuses it: the spec lets
// an engine round the product first. V8 fuses it on x86 with FMA3 and on ARM64. Node 22+ and
// workerd validate relaxed SIMD by default; Node 20 only behind --experimental-wasm-relaxed-simd
// and would refuse the whole module. So the host asks both questions first and loads the SIMD128
// variant otherwise, with the reason. Where wasm cannot be compiled from bytes (workers), the
// second question is left to the relaxed module, which asks it of itself and runs its SIMD128
// kernels where the answer is no. No node: imports: edge workers ask too.

// (module (func (param v128 v128 v128) (result v128)
//   (i32x4.relaxed_dot_i8x16_i7x16_add_s (local.get 0) (local.get 1) (local.get 2))))
const RELAXED_DOT_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b, // type: (v128, v128, v128) -> v128
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x0a, 0x0d, 0x01, 0x0b, 0x00, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0xfd, 0x93, 0x02, 0x0b, // its body
]);

// (module (func (export "f") (param f32 f32 f32) (result f32)
//   (f32x4.extract_lane 0 (f32x4.relaxed_madd (f32x4.splat (local.get 0)) (f32x4.splat (local.get 1))
//     (f32x4.splat (local.get 2))))))
const RELAXED_MADD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x08, 0x01, 0x60, 0x03, 0x7d, 0x7d, 0x7d, 0x01, 0x7d, // type: (f32, f32, f32) -> f32
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, // exported as "f"
  0x0a, 0x16, 0x01, 0x14, 0x00, 0x20, 0x00, 0xfd, 0x13, 0x20, 0x01, 0xfd, 0x13, 0x20, 0x02, 0xfd, 0x13, // splats
  0xfd, 0x85, 0x02, 0xfd, 0x1f, 0x00, 0x0b, // relaxed_madd, extract_lane 0
]);

/**
 * Whether madd(a, b, c) = a·b + c is fused: (1 + 2^-23)·(1 - 2^-23) - 1 is -2^-46 rounded once,
 * and 0 with the product rounded first (to 1).
 * @param {(a: number, b: number, c: number) => number} madd
 * @returns {boolean}
 * @example maddIsFused((a, b, c) => Math.fround(Math.fround(a * b) + c)) // false
 */
export function maddIsFused(madd) {
  return madd(1 + 2 ** -23, 1 - 2 ** -23, -1) === -(2 ** -46);
}

/**
 * The variant to load, from what the engine was seen to do.
 * @param {{validates: boolean, maddFused: boolean | null}} seen validates: the relaxed
 *   instructions validate; maddFused: the madd probe's answer, null where it could not run
 * @returns {{relaxed: boolean, reason: string}}
 * @example relaxedSimdDecision({ validates: true, maddFused: false }).relaxed // false
 */
export function relaxedSimdDecision({ validates, maddFused }) {
  if (!validates) return { relaxed: false, reason: 'this engine does not validate relaxed SIMD' };
  if (maddFused === false) {
    return { relaxed: false, reason: 'this engine does not fuse f32x4.relaxed_madd: the relaxed kernels would round each block step twice' };
  }
  if (maddFused === null) {
    return { relaxed: true, reason: 'relaxed SIMD validates; wasm cannot be compiled here, so the relaxed module checks relaxed_madd is fused itself' };
  }
  return { relaxed: true, reason: 'relaxed SIMD validates and f32x4.relaxed_madd is fused' };
}

// The madd probe's answer, or null where wasm cannot be compiled from bytes at run time
function probeMadd() {
  let instance;
  try {
    instance = new WebAssembly.Instance(new WebAssembly.Module(RELAXED_MADD_PROBE));
  } catch {
    return null;
  }
  return maddIsFused(instance.exports.f);
}

let choice;

/**
 * Whether to load a relaxed-SIMD variant here, and why: checked once (two modules of about 50
 * bytes, validated, and the madd one run where the engine allows), then cached.
 * @returns {{relaxed: boolean, reason: string}}
 * @example const { relaxed, reason } = relaxedSimdChoice();
 */
export function relaxedSimdChoice() {
  if (choice === undefined) {
    const validates = WebAssembly.validate(RELAXED_DOT_PROBE) && WebAssembly.validate(RELAXED_MADD_PROBE);
    choice = relaxedSimdDecision({ validates, maddFused: validates ? probeMadd() : null });
  }
  return choice;
}

/**
 * relaxedSimdChoice().relaxed.
 * @returns {boolean}
 * @example
 *   const file = relaxedSimdSupported() ? 'layerfold_mt_relaxed.wasm' : 'layerfold_mt.wasm';
 */
export function relaxedSimdSupported() {
  return relaxedSimdChoice().relaxed;
}

/**
 * Why a loaded module runs the kernels it reports (lf_kernel_isa): the host's reason for the
 * variant, or that the caller chose it, or that a relaxed module found relaxed_madd unfused on
 * its own check and runs its SIMD128 kernels.
 * @param {{relaxed: boolean, forced: boolean, kernels: string}} loaded
 * @returns {string}
 * @example kernelChoiceReason({ relaxed: true, forced: true, kernels: 'wasm-relaxed-simd' })
 */
export function kernelChoiceReason({ relaxed, forced, kernels }) {
  if (relaxed && kernels !== 'wasm-relaxed-simd') {
    return 'the relaxed module found f32x4.relaxed_madd unfused on this engine and runs its SIMD128 kernels';
  }
  if (forced) return `the ${relaxed ? 'relaxed-SIMD' : 'SIMD128'} variant, as the caller chose (relaxedSimd option)`;
  return relaxedSimdChoice().reason;
}
