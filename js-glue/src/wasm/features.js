// Capability detection for the WASM module variants (docs/kernels.md).
//
// layerfold_mt_relaxed and layerfold_wasi_relaxed use relaxed SIMD
// (i32x4.relaxed_dot_i8x16_i7x16_add_s in their Q4_0 kernels). Node 22+ and workerd validate it
// by default; Node 20 only behind --experimental-wasm-relaxed-simd and would refuse the whole
// module, so the host asks first and loads the SIMD128 variant otherwise. No node: imports:
// edge workers ask too.

// (module (func (param v128 v128 v128) (result v128)
//   (i32x4.relaxed_dot_i8x16_i7x16_add_s (local.get 0) (local.get 1) (local.get 2))))
const RELAXED_DOT_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b, // type: (v128, v128, v128) -> v128
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x0a, 0x0d, 0x01, 0x0b, 0x00, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0xfd, 0x93, 0x02, 0x0b, // its body
]);

let relaxedSimd;

/**
 * Whether this engine validates the relaxed-SIMD instruction the relaxed variants use.
 * Checked once (WebAssembly.validate of a 37-byte module), then cached.
 * @returns {boolean}
 * @example
 *   const file = relaxedSimdSupported() ? 'layerfold_mt_relaxed.wasm' : 'layerfold_mt.wasm';
 */
export function relaxedSimdSupported() {
  if (relaxedSimd === undefined) relaxedSimd = WebAssembly.validate(RELAXED_DOT_PROBE);
  return relaxedSimd;
}
