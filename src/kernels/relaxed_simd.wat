;; The relaxed-SIMD kernels of the relaxed modules (docs/kernels.md): the Q4_0 kernels, over
;; weights in the row-strip layout (src/layout/row_strips.h), each with its f32 step: a strip of
;; 4 rows times any number of tokens (prompts), and its twins with the strip and token counts
;; fixed, four strips for one token (decode) and two strips for 2 to 8 tokens (batched decode),
;; which wasm/gen_q4_0_strips_relaxed.mjs writes in at the end of this file, with every kernel's
;; twin in the other form of the dot product (docs/kernels.md, "Two forms of the dot product");
;; and attention's value step, its FMA fused (docs/attention.md).
;;
;; Why a .wat file: Debian's clang-14 has no relaxed-SIMD builtins. Emscripten 3.1.6 runs the
;; linked module through binaryen 108, which numbers the relaxed opcodes as the proposal once did
;; and would read the final i32x4.relaxed_dot_i8x16_i7x16_add_s (0xFD 0x113) as a two-operand
;; i16x8 dot and f32x4.relaxed_madd (0xFD 0x105) not at all, so wasm/patch_relaxed_ops.mjs
;; renumbers them to binaryen's 0x114 and 0xAF in the object and back in the linked module.
;; Assembled with
;;   wat2wasm --enable-relaxed-simd --enable-threads --relocatable
;; (wabt 1.0.32 spells the dot-add i32x4.dot_i8x16_i7x16_add_s) and linked by wasm-ld like any
;; C object.
;;
;; The f32 step is vec_dot_ref's, fma_f32(f32(sumi), dw·dy, acc) (quant/quant.h): sumi is an
;; exact i32 below 2^24 in magnitude (so its f32 is exact), dw·dy the exact f32 product of two
;; halves, and f32x4.relaxed_madd adds their product to acc rounded once, where the engine fuses
;; it (V8 on x86 with FMA3 and on ARM64). An engine may instead round the product first, so the
;; host loads this module only where a probe finds relaxed_madd fused (js-glue/src/wasm/
;; features.js).
;;
;; Exactness: the i7 operand is the weights' unsigned nibbles q in [0, 15] (top bit clear, so
;; every engine reads them the same), the i8 operand the activations a in [-128, 127]; a lane
;; adds 4 products (at most 4·15·128 in magnitude) to an i32, and an i16 intermediate pair (x86
;; without VNNI) is at most 2·15·128 = 3840: no engine saturates. A block's products are
;; Σ (q - 8)·a = Σ q·a - 8·Σa, formed exactly in i32 lanes: the exact integer block product the
;; scalar reference computes.
(module
  (import "env" "__linear_memory" (memory 1 65536 shared))

  ;; W strip (4 rows in row strips, n_blocks blocks of 72 bytes from w) · X (n_tok tokens) ->
  ;; acc [n_tok][4] f32, lane i = row i, continued: acc = fma(sumi, dw·dy, acc) block after
  ;; block, vec_dot_ref's step and order per output.
  ;; X is packed by the caller (pack_strip_activations in kernels/gemm_q4_0_q8_0.cpp) as records
  ;; [n_blocks][n_tok] of 160 bytes: 8 vectors, vector k < 4 holding elements 4k..4k+3 of the
  ;; token's block in every 32-bit lane and vector 4 + k elements 16+4k..16+4k+3; then -8·Σa in
  ;; every i32 lane (the nibbles q are w + 8); then the token's scale dy in every f32 lane.
  ;; Vector k of the strip holds group k of each row in that row's lane, so each dot-product lane
  ;; is one row's: no lanes are added across rows. Each block is unpacked once for all tokens.
  ;; The 4 f16 scales dw become f32 as fp16_to_fp32 makes finite ones, in 3 operations: each
  ;; half sign-extended to 32 bits and shifted left by 13 puts its exponent and mantissa in an
  ;; f32's low exponent bits and mantissa and its sign in bits 31..28; masking bits 30..28 off
  ;; leaves the sign alone in bit 31, and the product with 2^112 (the f32 exponent bias minus
  ;; f16's) is the half's value, with its sign (exact for normal, subnormal and zero halves,
  ;; -0 included; a subnormal one passes through an f32 subnormal, slow on x86 and rare in
  ;; weights). Strips never hold an infinite or NaN scale (can_row_strips).
  ;; The constants come from memory at consts (16 bytes of 15, then 2^112 in 4 f32 lanes, then
  ;; 0x8fffffff in 4 lanes): binaryen turns a constant set once into a v128.const at every use,
  ;; which V8 builds anew each time (3 instructions).
  (func $lf_q4_0_strip_relaxed (export "lf_q4_0_strip_relaxed")
    (param $w i32) (param $x i32) (param $n_tok i32) (param $n_blocks i32) (param $acc i32) (param $consts i32)
    (local $packed v128) (local $dw v128)
    (local $lo0 v128) (local $lo1 v128) (local $lo2 v128) (local $lo3 v128)
    (local $hi0 v128) (local $hi1 v128) (local $hi2 v128) (local $hi3 v128)
    (local $s0 v128) (local $s1 v128) (local $zero v128) (local $nibble v128) (local $two_112 v128)
    (local $sign_exponent v128) (local $t i32) (local $a i32)
    (if (i32.le_s (local.get $n_blocks) (i32.const 0)) (then (return)))
    (if (i32.le_s (local.get $n_tok) (i32.const 0)) (then (return)))
    (local.set $nibble (v128.load offset=0 align=1 (local.get $consts)))
    (local.set $two_112 (v128.load offset=16 align=1 (local.get $consts)))
    (local.set $sign_exponent (v128.load offset=32 align=1 (local.get $consts)))
    (loop $blocks
      ;; the 4 rows' quants: low nibbles are elements 4k..4k+3, high ones 16+4k..16+4k+3
      (local.set $packed (v128.load offset=8 align=1 (local.get $w)))
      (local.set $lo0 (v128.and (local.get $packed) (local.get $nibble)))
      (local.set $hi0 (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble)))
      (local.set $packed (v128.load offset=24 align=1 (local.get $w)))
      (local.set $lo1 (v128.and (local.get $packed) (local.get $nibble)))
      (local.set $hi1 (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble)))
      (local.set $packed (v128.load offset=40 align=1 (local.get $w)))
      (local.set $lo2 (v128.and (local.get $packed) (local.get $nibble)))
      (local.set $hi2 (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble)))
      (local.set $packed (v128.load offset=56 align=1 (local.get $w)))
      (local.set $lo3 (v128.and (local.get $packed) (local.get $nibble)))
      (local.set $hi3 (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble)))
      ;; dw: the 4 rows' f16 scales (sign-extended to i32 lanes) -> f32
      (local.set $dw (f32x4.mul (v128.and (i32x4.shl (v128.load16x4_s align=1 (local.get $w)) (i32.const 13))
        (local.get $sign_exponent)) (local.get $two_112)))
      (local.set $t (local.get $n_tok))
      (local.set $a (local.get $acc))
      (loop $tokens
        ;; sumi = Σ q·a - 8·Σa in two chains of 4 dot products, one from -8·Σa, one from 0
        (local.set $s0 (v128.load offset=128 align=1 (local.get $x)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=0 align=1 (local.get $x)) (local.get $lo0) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=64 align=1 (local.get $x)) (local.get $hi0) (local.get $zero)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=16 align=1 (local.get $x)) (local.get $lo1) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=80 align=1 (local.get $x)) (local.get $hi1) (local.get $s1)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=32 align=1 (local.get $x)) (local.get $lo2) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=96 align=1 (local.get $x)) (local.get $hi2) (local.get $s1)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=48 align=1 (local.get $x)) (local.get $lo3) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=112 align=1 (local.get $x)) (local.get $hi3) (local.get $s1)))
        ;; acc = fma(f32(sumi), dw·dy, acc)
        (v128.store align=4 (local.get $a) (f32x4.relaxed_madd
          (f32x4.convert_i32x4_s (i32x4.add (local.get $s0) (local.get $s1)))
          (f32x4.mul (local.get $dw) (v128.load offset=144 align=1 (local.get $x)))
          (v128.load align=4 (local.get $a))))
        (local.set $x (i32.add (local.get $x) (i32.const 160)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $t (i32.sub (local.get $t) (i32.const 1)))
        (br_if $tokens (local.get $t)))
      (local.set $w (i32.add (local.get $w) (i32.const 72)))
      (local.set $n_blocks (i32.sub (local.get $n_blocks) (i32.const 1)))
      (br_if $blocks (local.get $n_blocks))))

  ;; a·b + c by f32x4.relaxed_madd, lane 0: relaxed_madd_fused (kernels/gemm_q4_0_q8_0.cpp) asks
  ;; it whether this engine fuses the instruction, which the kernels' exactness rests on.
  (func $lf_relaxed_madd_probe (export "lf_relaxed_madd_probe") (param $a f32) (param $b f32) (param $c f32) (result f32)
    (f32x4.extract_lane 0 (f32x4.relaxed_madd (f32x4.splat (local.get $a)) (f32x4.splat (local.get $b))
      (f32x4.splat (local.get $c)))))

  ;; acc [n] <- f16(f32(fma(v, w, acc))) lane by lane, held as f32 (n a positive multiple of 8):
  ;; attention's value step (kernels/attention_steps.h, add_weighted; docs/attention.md), the FMA
  ;; fused where the host loads this module. The rounding to f16 is simd_wasm.h's: for two
  ;; vectors whose lanes are all f16 normals (one biased signed compare each) the f32 mantissa's
  ;; low 13 bits rounded to nearest even with integer adds and a mask, else $round_to_half_any.
  ;; Constants from consts (HalfRounding in attention_steps.h), loaded once per call.
  (func $lf_attn_add_weighted_relaxed (export "lf_attn_add_weighted_relaxed")
    (param $acc i32) (param $v i32) (param $w f32) (param $n i32) (param $consts i32)
    (local $weight v128) (local $end i32) (local $x0 v128) (local $x1 v128)
    (local $abs v128) (local $bias v128) (local $limit v128) (local $one v128) (local $round v128) (local $keep v128)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return)))
    (local.set $weight (f32x4.splat (local.get $w)))
    (local.set $abs (v128.load offset=0 align=4 (local.get $consts)))
    (local.set $bias (v128.load offset=16 align=4 (local.get $consts)))
    (local.set $limit (v128.load offset=32 align=4 (local.get $consts)))
    (local.set $one (v128.load offset=48 align=4 (local.get $consts)))
    (local.set $round (v128.load offset=64 align=4 (local.get $consts)))
    (local.set $keep (v128.load offset=80 align=4 (local.get $consts)))
    (local.set $end (i32.add (local.get $acc) (i32.shl (local.get $n) (i32.const 2))))
    (loop $lanes
      (local.set $x0 (f32x4.relaxed_madd (v128.load align=4 (local.get $v)) (local.get $weight)
        (v128.load align=4 (local.get $acc))))
      (local.set $x1 (f32x4.relaxed_madd (v128.load offset=16 align=4 (local.get $v)) (local.get $weight)
        (v128.load offset=16 align=4 (local.get $acc))))
      (if (i32x4.all_true (v128.and
            (i32x4.lt_s (i32x4.add (v128.and (local.get $x0) (local.get $abs)) (local.get $bias)) (local.get $limit))
            (i32x4.lt_s (i32x4.add (v128.and (local.get $x1) (local.get $abs)) (local.get $bias)) (local.get $limit))))
        (then
          (v128.store align=4 (local.get $acc) (v128.and (i32x4.add (i32x4.add (local.get $x0) (local.get $round))
            (v128.and (i32x4.shr_u (local.get $x0) (i32.const 13)) (local.get $one))) (local.get $keep)))
          (v128.store offset=16 align=4 (local.get $acc) (v128.and (i32x4.add (i32x4.add (local.get $x1) (local.get $round))
            (v128.and (i32x4.shr_u (local.get $x1) (i32.const 13)) (local.get $one))) (local.get $keep))))
        (else
          (v128.store align=4 (local.get $acc) (call $round_to_half_any (local.get $x0) (local.get $consts)))
          (v128.store offset=16 align=4 (local.get $acc) (call $round_to_half_any (local.get $x1) (local.get $consts)))))
      (local.set $acc (i32.add (local.get $acc) (i32.const 32)))
      (local.set $v (i32.add (local.get $v) (i32.const 32)))
      (br_if $lanes (i32.lt_u (local.get $acc) (local.get $end)))))

  ;; acc [n] <- f32(fma(v, w, acc)) lane by lane (n a positive multiple of 4): the value step of
  ;; an f32 accumulator (a quantized V's; kernels/attention_quantized.cpp), ggml_vec_mad_f32's.
  (func $lf_attn_madd_relaxed (export "lf_attn_madd_relaxed") (param $acc i32) (param $v i32) (param $w f32) (param $n i32)
    (local $weight v128) (local $end i32)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return)))
    (local.set $weight (f32x4.splat (local.get $w)))
    (local.set $end (i32.add (local.get $acc) (i32.shl (local.get $n) (i32.const 2))))
    (loop $lanes
      (v128.store align=4 (local.get $acc)
        (f32x4.relaxed_madd (v128.load align=4 (local.get $v)) (local.get $weight) (v128.load align=4 (local.get $acc))))
      (local.set $acc (i32.add (local.get $acc) (i32.const 16)))
      (local.set $v (i32.add (local.get $v) (i32.const 16)))
      (br_if $lanes (i32.lt_u (local.get $acc) (local.get $end)))))

  ;; x rounded to f16, held as f32, for any lane (simd_wasm.h's round_to_half_any): the normal
  ;; rounding, f16 subnormals as multiples of 2^-24 by adding and removing 0.5 (ties to even),
  ;; infinity from 65520, NaN the f16 NaN's f32, the sign kept.
  (func $round_to_half_any (param $x v128) (param $consts i32) (result v128)
    (local $sign v128) (local $a v128) (local $r v128)
    (local.set $sign (v128.and (local.get $x) (v128.load offset=96 align=4 (local.get $consts))))
    (local.set $a (v128.and (local.get $x) (v128.load offset=0 align=4 (local.get $consts))))
    (local.set $r (v128.and (i32x4.add (i32x4.add (local.get $x) (v128.load offset=64 align=4 (local.get $consts)))
      (v128.and (i32x4.shr_u (local.get $x) (i32.const 13)) (v128.load offset=48 align=4 (local.get $consts))))
      (v128.load offset=80 align=4 (local.get $consts))))
    (local.set $r (v128.bitselect
      (v128.or (f32x4.sub (f32x4.add (local.get $a) (v128.load offset=112 align=4 (local.get $consts)))
        (v128.load offset=112 align=4 (local.get $consts))) (local.get $sign))
      (local.get $r) (i32x4.lt_s (local.get $a) (v128.load offset=128 align=4 (local.get $consts)))))
    (local.set $r (v128.bitselect (v128.or (local.get $sign) (v128.load offset=144 align=4 (local.get $consts)))
      (local.get $r) (i32x4.gt_s (local.get $a) (v128.load offset=160 align=4 (local.get $consts)))))
    (v128.bitselect (v128.or (local.get $sign) (v128.load offset=176 align=4 (local.get $consts)))
      (local.get $r) (i32x4.gt_s (local.get $a) (v128.load offset=144 align=4 (local.get $consts)))))

  ;; The multi-strip kernels, lf_q4_0_strips4_t1_relaxed (decode) and lf_q4_0_strips_t{T}_relaxed
  ;; (2 to 8 tokens), and the _pairs twins of every kernel here, are written here at build time by
  ;; wasm/gen_q4_0_strips_relaxed.mjs, which says what they compute.
  ;; @strips-kernels
)
