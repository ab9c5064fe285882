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
  ;; X is packed by the caller (pack_strip_activations in kernels/gemm_q4_0_strips_relaxed.cpp)
  ;; as records [n_blocks][n_tok] of 40 bytes: the token's block's 32 quants, -8·Σa (the nibbles
  ;; q are w + 8) and its scale dy; v128.load32_splat puts a group of 4 quants (elements 4k..4k+3
  ;; or 16+4k..16+4k+3), -8·Σa or dy in every 32-bit lane as it reads it.
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
        (local.set $s0 (v128.load32_splat offset=32 align=1 (local.get $x)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=0 align=1 (local.get $x)) (local.get $lo0) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=16 align=1 (local.get $x)) (local.get $hi0) (local.get $zero)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=4 align=1 (local.get $x)) (local.get $lo1) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=20 align=1 (local.get $x)) (local.get $hi1) (local.get $s1)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=8 align=1 (local.get $x)) (local.get $lo2) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=24 align=1 (local.get $x)) (local.get $hi2) (local.get $s1)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=12 align=1 (local.get $x)) (local.get $lo3) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load32_splat offset=28 align=1 (local.get $x)) (local.get $hi3) (local.get $s1)))
        ;; acc = fma(f32(sumi), dw·dy, acc)
        (v128.store align=4 (local.get $a) (f32x4.relaxed_madd
          (f32x4.convert_i32x4_s (i32x4.add (local.get $s0) (local.get $s1)))
          (f32x4.mul (local.get $dw) (v128.load32_splat offset=36 align=1 (local.get $x)))
          (v128.load align=4 (local.get $a))))
        (local.set $x (i32.add (local.get $x) (i32.const 40)))
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
  ;; vectors whose lanes are all f16 normals (one biased signed compare each) the f32 rounded to
  ;; f16's 11 significant bits by Veltkamp's split (t = x·8193, x' = t + (x - t): three exact-by-
  ;; construction f32 operations that round to nearest even there, docs/attention.md), else
  ;; $round_to_half_any. Constants from consts (HalfRounding in attention_steps.h), loaded once
  ;; per call.
  (func $lf_attn_add_weighted_relaxed (export "lf_attn_add_weighted_relaxed")
    (param $acc i32) (param $v i32) (param $w f32) (param $n i32) (param $consts i32)
    (local $weight v128) (local $end i32) (local $x0 v128) (local $x1 v128) (local $t v128)
    (local $abs v128) (local $bias v128) (local $limit v128) (local $split v128)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return)))
    (local.set $weight (f32x4.splat (local.get $w)))
    (local.set $abs (v128.load offset=0 align=4 (local.get $consts)))
    (local.set $bias (v128.load offset=16 align=4 (local.get $consts)))
    (local.set $limit (v128.load offset=32 align=4 (local.get $consts)))
    (local.set $split (v128.load offset=48 align=4 (local.get $consts)))
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
          (local.set $t (f32x4.mul (local.get $x0) (local.get $split)))
          (v128.store align=4 (local.get $acc) (f32x4.add (local.get $t) (f32x4.sub (local.get $x0) (local.get $t))))
          (local.set $t (f32x4.mul (local.get $x1) (local.get $split)))
          (v128.store offset=16 align=4 (local.get $acc) (f32x4.add (local.get $t) (f32x4.sub (local.get $x1) (local.get $t)))))
        (else
          (v128.store align=4 (local.get $acc) (call $round_to_half_any (local.get $x0) (local.get $consts)))
          (v128.store offset=16 align=4 (local.get $acc) (call $round_to_half_any (local.get $x1) (local.get $consts)))))
      (local.set $acc (i32.add (local.get $acc) (i32.const 32)))
      (local.set $v (i32.add (local.get $v) (i32.const 32)))
      (br_if $lanes (i32.lt_u (local.get $acc) (local.get $end)))))

  ;; acc [n] <- lf_attn_add_weighted_relaxed(acc, rows[k], weights[k], n) for k = 0 .. keys-1 in
  ;; order (keys > 0, n a positive multiple of 16): a run of keys' value steps in one pass over
  ;; acc. Sixteen lanes at a time stay in registers across the keys, each step rounded as that
  ;; function's fast way rounds, with the weights flushed (subnormal ones 0, which give the same
  ;; bits there: attention_steps.h, kSmallestNormal), while the largest (|x| - 2^-14) seen,
  ;; unsigned, tells whether every step stayed in the f16 normal range; where one did not, the
  ;; sixteen lanes go through the keys again from acc (still as it was) by that function.
  (func $lf_attn_add_weighted_keys_relaxed (export "lf_attn_add_weighted_keys_relaxed")
    (param $acc i32) (param $rows i32) (param $flushed i32) (param $weights i32) (param $keys i32) (param $n i32)
    (param $consts i32)
    (local $d i32) (local $end i32) (local $k i32) (local $k_end i32) (local $row i32) (local $w v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $x v128) (local $t v128) (local $far v128)
    (local $abs v128) (local $split v128) (local $min v128) (local $span v128)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return)))
    (local.set $abs (v128.load offset=0 align=4 (local.get $consts)))
    (local.set $split (v128.load offset=48 align=4 (local.get $consts)))
    (local.set $min (v128.load offset=96 align=4 (local.get $consts)))
    (local.set $span (v128.load offset=160 align=4 (local.get $consts)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (local.set $k_end (i32.shl (local.get $keys) (i32.const 2)))
    (loop $chunks
      (local.set $a0 (v128.load align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $a1 (v128.load offset=16 align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $a2 (v128.load offset=32 align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $a3 (v128.load offset=48 align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $far (v128.const i32x4 0 0 0 0))
      (local.set $k (i32.const 0))
      (loop $steps
        (local.set $row (i32.add (i32.load align=4 (i32.add (local.get $rows) (local.get $k))) (local.get $d)))
        (local.set $w (v128.load32_splat align=4 (i32.add (local.get $flushed) (local.get $k))))
        (local.set $x (f32x4.relaxed_madd (v128.load align=4 (local.get $row)) (local.get $w) (local.get $a0)))
        (local.set $far (i32x4.max_u (local.get $far) (i32x4.sub (v128.and (local.get $x) (local.get $abs)) (local.get $min))))
        (local.set $t (f32x4.mul (local.get $x) (local.get $split)))
        (local.set $a0 (f32x4.add (local.get $t) (f32x4.sub (local.get $x) (local.get $t))))
        (local.set $x (f32x4.relaxed_madd (v128.load offset=16 align=4 (local.get $row)) (local.get $w) (local.get $a1)))
        (local.set $far (i32x4.max_u (local.get $far) (i32x4.sub (v128.and (local.get $x) (local.get $abs)) (local.get $min))))
        (local.set $t (f32x4.mul (local.get $x) (local.get $split)))
        (local.set $a1 (f32x4.add (local.get $t) (f32x4.sub (local.get $x) (local.get $t))))
        (local.set $x (f32x4.relaxed_madd (v128.load offset=32 align=4 (local.get $row)) (local.get $w) (local.get $a2)))
        (local.set $far (i32x4.max_u (local.get $far) (i32x4.sub (v128.and (local.get $x) (local.get $abs)) (local.get $min))))
        (local.set $t (f32x4.mul (local.get $x) (local.get $split)))
        (local.set $a2 (f32x4.add (local.get $t) (f32x4.sub (local.get $x) (local.get $t))))
        (local.set $x (f32x4.relaxed_madd (v128.load offset=48 align=4 (local.get $row)) (local.get $w) (local.get $a3)))
        (local.set $far (i32x4.max_u (local.get $far) (i32x4.sub (v128.and (local.get $x) (local.get $abs)) (local.get $min))))
        (local.set $t (f32x4.mul (local.get $x) (local.get $split)))
        (local.set $a3 (f32x4.add (local.get $t) (f32x4.sub (local.get $x) (local.get $t))))
        (local.set $k (i32.add (local.get $k) (i32.const 4)))
        (br_if $steps (i32.lt_u (local.get $k) (local.get $k_end))))
      (if (i32x4.all_true (i32x4.lt_u (local.get $far) (local.get $span)))
        (then
          (v128.store align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a0))
          (v128.store offset=16 align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a1))
          (v128.store offset=32 align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a2))
          (v128.store offset=48 align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a3))
        )
        (else
          (local.set $k (i32.const 0))
          (loop $exact
            (call $lf_attn_add_weighted_relaxed (i32.add (local.get $acc) (local.get $d))
              (i32.add (i32.load align=4 (i32.add (local.get $rows) (local.get $k))) (local.get $d))
              (f32.load align=4 (i32.add (local.get $weights) (local.get $k))) (i32.const 16) (local.get $consts))
            (local.set $k (i32.add (local.get $k) (i32.const 4)))
            (br_if $exact (i32.lt_u (local.get $k) (local.get $k_end))))))
      (local.set $d (i32.add (local.get $d) (i32.const 64)))
      (br_if $chunks (i32.lt_u (local.get $d) (local.get $end)))))

  ;; acc [n] <- f32(fma(rows[k], weights[k], acc)) lane by lane for k = 0 .. keys-1 in order (keys
  ;; > 0, n a positive multiple of 16): a run of keys' value steps over an f32 accumulator (a
  ;; quantized V's; kernels/attention_quantized.cpp) in one pass, sixteen lanes at a time in
  ;; registers across the keys.
  (func $lf_attn_madd_keys_relaxed (export "lf_attn_madd_keys_relaxed")
    (param $acc i32) (param $rows i32) (param $weights i32) (param $keys i32) (param $n i32)
    (local $d i32) (local $end i32) (local $k i32) (local $k_end i32) (local $row i32) (local $w v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (local.set $k_end (i32.shl (local.get $keys) (i32.const 2)))
    (loop $chunks
      (local.set $a0 (v128.load align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $a1 (v128.load offset=16 align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $a2 (v128.load offset=32 align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $a3 (v128.load offset=48 align=4 (i32.add (local.get $acc) (local.get $d))))
      (local.set $k (i32.const 0))
      (loop $steps
        (local.set $row (i32.add (i32.load align=4 (i32.add (local.get $rows) (local.get $k))) (local.get $d)))
        (local.set $w (v128.load32_splat align=4 (i32.add (local.get $weights) (local.get $k))))
        (local.set $a0 (f32x4.relaxed_madd (v128.load align=4 (local.get $row)) (local.get $w) (local.get $a0)))
        (local.set $a1 (f32x4.relaxed_madd (v128.load offset=16 align=4 (local.get $row)) (local.get $w) (local.get $a1)))
        (local.set $a2 (f32x4.relaxed_madd (v128.load offset=32 align=4 (local.get $row)) (local.get $w) (local.get $a2)))
        (local.set $a3 (f32x4.relaxed_madd (v128.load offset=48 align=4 (local.get $row)) (local.get $w) (local.get $a3)))
        (local.set $k (i32.add (local.get $k) (i32.const 4)))
        (br_if $steps (i32.lt_u (local.get $k) (local.get $k_end))))
      (v128.store align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a0))
      (v128.store offset=16 align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a1))
      (v128.store offset=32 align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a2))
      (v128.store offset=48 align=4 (i32.add (local.get $acc) (local.get $d)) (local.get $a3))
      (local.set $d (i32.add (local.get $d) (i32.const 64)))
      (br_if $chunks (i32.lt_u (local.get $d) (local.get $end)))))

  ;; x · y over n_blocks > 0 blocks of 32 values as int16, each 16 in widen_for_dot's order
  ;; (kernels/attention_quantized.cpp), with block scales x_scale, y_scale: that file's
  ;; dot_q8_0 (ggml's AVX2 vec_dot_q8_0_q8_0): per block, lane l of 8 takes the exact integer
  ;; sum of the products of values 4l .. 4l+3 (two i32x4.dot_i16x8_s added) and lane +=
  ;; (x_scale·y_scale) · that sum in one fused step, lanes 0-3 and 4-7 as two vectors; then
  ;; lane l + lane l+4, and (0 + 2) + (1 + 3).
  (func $lf_attn_dot_q8_0_relaxed (export "lf_attn_dot_q8_0_relaxed")
    (param $x i32) (param $x_scale i32) (param $y i32) (param $y_scale i32) (param $n_blocks i32) (result f32)
    (local $lo v128) (local $hi v128) (local $d v128) (local $end i32)
    (local.set $end (i32.add (local.get $x_scale) (i32.shl (local.get $n_blocks) (i32.const 2))))
    (loop $blocks
      (local.set $d (f32x4.splat (f32.mul (f32.load align=4 (local.get $x_scale)) (f32.load align=4 (local.get $y_scale)))))
      (local.set $lo (f32x4.relaxed_madd (f32x4.convert_i32x4_s (i32x4.add
          (i32x4.dot_i16x8_s (v128.load align=2 (local.get $x)) (v128.load align=2 (local.get $y)))
          (i32x4.dot_i16x8_s (v128.load offset=16 align=2 (local.get $x)) (v128.load offset=16 align=2 (local.get $y)))))
        (local.get $d) (local.get $lo)))
      (local.set $hi (f32x4.relaxed_madd (f32x4.convert_i32x4_s (i32x4.add
          (i32x4.dot_i16x8_s (v128.load offset=32 align=2 (local.get $x)) (v128.load offset=32 align=2 (local.get $y)))
          (i32x4.dot_i16x8_s (v128.load offset=48 align=2 (local.get $x)) (v128.load offset=48 align=2 (local.get $y)))))
        (local.get $d) (local.get $hi)))
      (local.set $x (i32.add (local.get $x) (i32.const 64)))
      (local.set $y (i32.add (local.get $y) (i32.const 64)))
      (local.set $x_scale (i32.add (local.get $x_scale) (i32.const 4)))
      (local.set $y_scale (i32.add (local.get $y_scale) (i32.const 4)))
      (br_if $blocks (i32.lt_u (local.get $x_scale) (local.get $end))))
    (local.set $lo (f32x4.add (local.get $lo) (local.get $hi)))
    (f32.add (f32.add (f32x4.extract_lane 0 (local.get $lo)) (f32x4.extract_lane 2 (local.get $lo)))
      (f32.add (f32x4.extract_lane 1 (local.get $lo)) (f32x4.extract_lane 3 (local.get $lo)))))

  ;; out [16] <- the int8 lanes of x, each times d (f32x4.convert then multiply: exact, a value of
  ;; at most 8 bits times an f16 scale)
  (func $store_scaled_bytes (param $x v128) (param $d v128) (param $out i32)
    (local $h v128)
    (local.set $h (i16x8.extend_low_i8x16_s (local.get $x)))
    (v128.store align=4 (local.get $out) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $h))) (local.get $d)))
    (v128.store offset=16 align=4 (local.get $out)
      (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $h))) (local.get $d)))
    (local.set $h (i16x8.extend_high_i8x16_s (local.get $x)))
    (v128.store offset=32 align=4 (local.get $out)
      (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $h))) (local.get $d)))
    (v128.store offset=48 align=4 (local.get $out)
      (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $h))) (local.get $d))))

  ;; A block's f16 scale at p as f32, as fp16_to_fp32 makes a finite one (the strips' way, above:
  ;; sign-extended, shifted left by 13, bits 30..28 masked off, times 2^112); the caller has
  ;; checked that it is finite.
  (func $block_scale (param $p i32) (result f32)
    (f32.mul (f32.reinterpret_i32 (i32.and (i32.shl (i32.load16_s align=2 (local.get $p)) (i32.const 13))
      (i32.const 0x8fffffff))) (f32.const 0x1p112)))

  ;; v [32·i] <- dequantize_row's values of Q8_0 or Q4_0 blocks (kind 8 or 4; 34 or 18 bytes from
  ;; blocks) for i = 0 .. n_blocks-1, up to the first block whose scale is infinite or NaN:
  ;; returns how many it converted. Attention's quantized V rows (kernels/attention_quantized.cpp),
  ;; here because clang folds C++'s widen-then-convert into a scalar conversion per lane.
  (func $lf_kv_values_relaxed (export "lf_kv_values_relaxed")
    (param $blocks i32) (param $kind i32) (param $v i32) (param $n_blocks i32) (result i32)
    (local $i i32) (local $d v128) (local $q v128)
    (block $done
      (loop $each
        (br_if $done (i32.ge_s (local.get $i) (local.get $n_blocks)))
        (br_if $done (i32.eq (i32.and (i32.load16_u align=2 (local.get $blocks)) (i32.const 0x7c00)) (i32.const 0x7c00)))
        (local.set $d (f32x4.splat (call $block_scale (local.get $blocks))))
        (if (i32.eq (local.get $kind) (i32.const 8))
          (then
            (call $store_scaled_bytes (v128.load offset=2 align=1 (local.get $blocks)) (local.get $d) (local.get $v))
            (call $store_scaled_bytes (v128.load offset=18 align=1 (local.get $blocks)) (local.get $d)
              (i32.add (local.get $v) (i32.const 64)))
            (local.set $blocks (i32.add (local.get $blocks) (i32.const 34))))
          (else
            (local.set $q (v128.load offset=2 align=1 (local.get $blocks)))
            (call $store_scaled_bytes (i8x16.sub (v128.and (local.get $q) (i8x16.splat (i32.const 15))) (i8x16.splat (i32.const 8)))
              (local.get $d) (local.get $v))
            (call $store_scaled_bytes (i8x16.sub (i8x16.shr_u (local.get $q) (i32.const 4)) (i8x16.splat (i32.const 8)))
              (local.get $d) (i32.add (local.get $v) (i32.const 64)))
            (local.set $blocks (i32.add (local.get $blocks) (i32.const 18)))))
        (local.set $v (i32.add (local.get $v) (i32.const 128)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (local.get $i))

  ;; f [i] <- the half h [i] as f32 (fp16_to_fp32) for i = 0 .. n-1 (n a multiple of 8), eight
  ;; at a time as simd_wasm.h's try_halves_to_f32 converts them, up to the first eight that hold
  ;; an infinity or a NaN: returns how many it converted (n if all). Attention's key and value
  ;; rows (kernels/attention_steps.h, halves_to_f32); here rather than in C++ because V8 builds
  ;; a v128.const anew at each use (3 instructions), and this loop's constants stay in
  ;; registers: consts is HalfWidening (attention_steps.h).
  (func $lf_halves_to_f32_relaxed (export "lf_halves_to_f32_relaxed")
    (param $h i32) (param $f i32) (param $n i32) (param $consts i32) (result i32)
    (local $i i32) (local $x v128) (local $exponent v128) (local $keep v128) (local $scale v128)
    (local.set $exponent (v128.load offset=0 align=4 (local.get $consts)))
    (local.set $keep (v128.load offset=16 align=4 (local.get $consts)))
    (local.set $scale (v128.load offset=32 align=4 (local.get $consts)))
    (block $done
      (loop $groups
        (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
        (local.set $x (v128.load align=2 (local.get $h)))
        (br_if $done (v128.any_true (i16x8.eq (v128.and (local.get $x) (local.get $exponent)) (local.get $exponent))))
        (v128.store align=4 (local.get $f) (f32x4.mul (v128.and (i32x4.shl (i32x4.extend_low_i16x8_s (local.get $x))
          (i32.const 13)) (local.get $keep)) (local.get $scale)))
        (v128.store offset=16 align=4 (local.get $f) (f32x4.mul (v128.and (i32x4.shl (i32x4.extend_high_i16x8_s (local.get $x))
          (i32.const 13)) (local.get $keep)) (local.get $scale)))
        (local.set $h (i32.add (local.get $h) (i32.const 16)))
        (local.set $f (i32.add (local.get $f) (i32.const 32)))
        (local.set $i (i32.add (local.get $i) (i32.const 8)))
        (br $groups)))
    (local.get $i))

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

  ;; One of tinyBLAS's 16 lanes of an F16 GEMM (kernels/gemm_lanes16.cpp) for a strip of 8
  ;; output rows and 6 tokens: acc [6][8] <- Σ w[i][row] · x_t[i] over i = 0 .. n-1 in order
  ;; from 0, w [n][8] the strip's elements of this lane (f16 values as f32) and x_t [n] token t's
  ;; (f16-valued). A product of two f16 values is exact in f32, so the madd's result is the same
  ;; fused or not. A group of fewer tokens repeats its last token's pointer.
  (func $lf_f16_lane_sums_relaxed (export "lf_f16_lane_sums_relaxed")
    (param $w i32) (param $x0 i32) (param $x1 i32) (param $x2 i32) (param $x3 i32) (param $x4 i32) (param $x5 i32)
    (param $n i32) (param $acc i32)
    (local $i i32) (local $end i32) (local $lo v128) (local $hi v128) (local $a v128)
    (local $c0l v128) (local $c0h v128) (local $c1l v128) (local $c1h v128) (local $c2l v128) (local $c2h v128)
    (local $c3l v128) (local $c3h v128) (local $c4l v128) (local $c4h v128) (local $c5l v128) (local $c5h v128)
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (loop $elements
      (local.set $lo (v128.load align=4 (local.get $w)))
      (local.set $hi (v128.load offset=16 align=4 (local.get $w)))
      (local.set $a (v128.load32_splat align=4 (i32.add (local.get $x0) (local.get $i))))
      (local.set $c0l (f32x4.relaxed_madd (local.get $lo) (local.get $a) (local.get $c0l)))
      (local.set $c0h (f32x4.relaxed_madd (local.get $hi) (local.get $a) (local.get $c0h)))
      (local.set $a (v128.load32_splat align=4 (i32.add (local.get $x1) (local.get $i))))
      (local.set $c1l (f32x4.relaxed_madd (local.get $lo) (local.get $a) (local.get $c1l)))
      (local.set $c1h (f32x4.relaxed_madd (local.get $hi) (local.get $a) (local.get $c1h)))
      (local.set $a (v128.load32_splat align=4 (i32.add (local.get $x2) (local.get $i))))
      (local.set $c2l (f32x4.relaxed_madd (local.get $lo) (local.get $a) (local.get $c2l)))
      (local.set $c2h (f32x4.relaxed_madd (local.get $hi) (local.get $a) (local.get $c2h)))
      (local.set $a (v128.load32_splat align=4 (i32.add (local.get $x3) (local.get $i))))
      (local.set $c3l (f32x4.relaxed_madd (local.get $lo) (local.get $a) (local.get $c3l)))
      (local.set $c3h (f32x4.relaxed_madd (local.get $hi) (local.get $a) (local.get $c3h)))
      (local.set $a (v128.load32_splat align=4 (i32.add (local.get $x4) (local.get $i))))
      (local.set $c4l (f32x4.relaxed_madd (local.get $lo) (local.get $a) (local.get $c4l)))
      (local.set $c4h (f32x4.relaxed_madd (local.get $hi) (local.get $a) (local.get $c4h)))
      (local.set $a (v128.load32_splat align=4 (i32.add (local.get $x5) (local.get $i))))
      (local.set $c5l (f32x4.relaxed_madd (local.get $lo) (local.get $a) (local.get $c5l)))
      (local.set $c5h (f32x4.relaxed_madd (local.get $hi) (local.get $a) (local.get $c5h)))
      (local.set $w (i32.add (local.get $w) (i32.const 32)))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br_if $elements (i32.lt_u (local.get $i) (local.get $end))))
    (v128.store offset=0 align=4 (local.get $acc) (local.get $c0l)) (v128.store offset=16 align=4 (local.get $acc) (local.get $c0h))
    (v128.store offset=32 align=4 (local.get $acc) (local.get $c1l)) (v128.store offset=48 align=4 (local.get $acc) (local.get $c1h))
    (v128.store offset=64 align=4 (local.get $acc) (local.get $c2l)) (v128.store offset=80 align=4 (local.get $acc) (local.get $c2h))
    (v128.store offset=96 align=4 (local.get $acc) (local.get $c3l)) (v128.store offset=112 align=4 (local.get $acc) (local.get $c3h))
    (v128.store offset=128 align=4 (local.get $acc) (local.get $c4l)) (v128.store offset=144 align=4 (local.get $acc) (local.get $c4h))
    (v128.store offset=160 align=4 (local.get $acc) (local.get $c5l)) (v128.store offset=176 align=4 (local.get $acc) (local.get $c5h)))

  ;; The f32 tile path's steps (kernels/attention_f32_tiles.cpp; docs/attention.md, "The f32
  ;; tile path") for three query rows at a time, 12 running sums in registers, so that each
  ;; vector of keys or values loaded serves three rows. A group of fewer rows repeats its last
  ;; row's pointers: the repeated row computes and stores the same bits twice.

;; s_r [64] <- the scores of query row q_r (r = 0, 1, 2) against the tile's 64 keys kt [d][64]
  ;; (transposed), times scale: each one FMA chain over the head dim from 0, fma(q[i], k[i], s)
  ;; for i = 0 .. d-1 (ggml's simd_gemm), 16 keys of the three rows at a time. max [3] <- each
  ;; row's largest as scale_tile (kernels/attention_f32_tiles.cpp) finds it: lane l keeping
  ;; m > s ? m : s over keys l, l + 4, ... in order (f32x4.pmax(s, m)), then the lanes in order.
  ;; Returns bit r set where row r has a NaN score, whose max its caller finds again by a scan.
  (func $lf_attn_scores3_relaxed (export "lf_attn_scores3_relaxed")
    (param $s0 i32) (param $s1 i32) (param $s2 i32) (param $kt i32) (param $q0 i32) (param $q1 i32) (param $q2 i32)
    (param $d i32) (param $scale f32) (param $max i32) (result i32)
    (local $keys i32) (local $k i32) (local $i i32) (local $end i32) (local $out i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $x v128) (local $sc v128)
    (local $m0 v128) (local $m1 v128) (local $m2 v128) (local $nan0 v128) (local $nan1 v128) (local $nan2 v128)
    (local $s00 v128) (local $s01 v128) (local $s02 v128) (local $s03 v128)
    (local $s10 v128) (local $s11 v128) (local $s12 v128) (local $s13 v128)
    (local $s20 v128) (local $s21 v128) (local $s22 v128) (local $s23 v128)
    (local.set $end (i32.shl (local.get $d) (i32.const 2)))
    (local.set $sc (f32x4.splat (local.get $scale)))
    (local.set $m0 (f32x4.splat (f32.const -inf)))
    (local.set $m1 (local.get $m0))
    (local.set $m2 (local.get $m0))
    (loop $chunks
      (local.set $s00 (v128.const i32x4 0 0 0 0)) (local.set $s01 (v128.const i32x4 0 0 0 0))
      (local.set $s02 (v128.const i32x4 0 0 0 0)) (local.set $s03 (v128.const i32x4 0 0 0 0))
      (local.set $s10 (v128.const i32x4 0 0 0 0)) (local.set $s11 (v128.const i32x4 0 0 0 0))
      (local.set $s12 (v128.const i32x4 0 0 0 0)) (local.set $s13 (v128.const i32x4 0 0 0 0))
      (local.set $s20 (v128.const i32x4 0 0 0 0)) (local.set $s21 (v128.const i32x4 0 0 0 0))
      (local.set $s22 (v128.const i32x4 0 0 0 0)) (local.set $s23 (v128.const i32x4 0 0 0 0))
      (local.set $k (i32.add (local.get $kt) (local.get $keys)))
      (local.set $i (i32.const 0))
      (loop $dims
        (local.set $a0 (v128.load32_splat align=4 (i32.add (local.get $q0) (local.get $i))))
        (local.set $a1 (v128.load32_splat align=4 (i32.add (local.get $q1) (local.get $i))))
        (local.set $a2 (v128.load32_splat align=4 (i32.add (local.get $q2) (local.get $i))))
        (local.set $x (v128.load align=4 (local.get $k)))
        (local.set $s00 (f32x4.relaxed_madd (local.get $a0) (local.get $x) (local.get $s00)))
        (local.set $s10 (f32x4.relaxed_madd (local.get $a1) (local.get $x) (local.get $s10)))
        (local.set $s20 (f32x4.relaxed_madd (local.get $a2) (local.get $x) (local.get $s20)))
        (local.set $x (v128.load offset=16 align=4 (local.get $k)))
        (local.set $s01 (f32x4.relaxed_madd (local.get $a0) (local.get $x) (local.get $s01)))
        (local.set $s11 (f32x4.relaxed_madd (local.get $a1) (local.get $x) (local.get $s11)))
        (local.set $s21 (f32x4.relaxed_madd (local.get $a2) (local.get $x) (local.get $s21)))
        (local.set $x (v128.load offset=32 align=4 (local.get $k)))
        (local.set $s02 (f32x4.relaxed_madd (local.get $a0) (local.get $x) (local.get $s02)))
        (local.set $s12 (f32x4.relaxed_madd (local.get $a1) (local.get $x) (local.get $s12)))
        (local.set $s22 (f32x4.relaxed_madd (local.get $a2) (local.get $x) (local.get $s22)))
        (local.set $x (v128.load offset=48 align=4 (local.get $k)))
        (local.set $s03 (f32x4.relaxed_madd (local.get $a0) (local.get $x) (local.get $s03)))
        (local.set $s13 (f32x4.relaxed_madd (local.get $a1) (local.get $x) (local.get $s13)))
        (local.set $s23 (f32x4.relaxed_madd (local.get $a2) (local.get $x) (local.get $s23)))
        (local.set $k (i32.add (local.get $k) (i32.const 256)))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br_if $dims (i32.lt_u (local.get $i) (local.get $end))))
      (local.set $out (i32.add (local.get $s0) (local.get $keys)))
      (local.set $x (f32x4.mul (local.get $s00) (local.get $sc))) (v128.store offset=0 align=4 (local.get $out) (local.get $x))
      (local.set $m0 (f32x4.pmax (local.get $x) (local.get $m0))) (local.set $nan0 (v128.or (local.get $nan0) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s01) (local.get $sc))) (v128.store offset=16 align=4 (local.get $out) (local.get $x))
      (local.set $m0 (f32x4.pmax (local.get $x) (local.get $m0))) (local.set $nan0 (v128.or (local.get $nan0) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s02) (local.get $sc))) (v128.store offset=32 align=4 (local.get $out) (local.get $x))
      (local.set $m0 (f32x4.pmax (local.get $x) (local.get $m0))) (local.set $nan0 (v128.or (local.get $nan0) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s03) (local.get $sc))) (v128.store offset=48 align=4 (local.get $out) (local.get $x))
      (local.set $m0 (f32x4.pmax (local.get $x) (local.get $m0))) (local.set $nan0 (v128.or (local.get $nan0) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $out (i32.add (local.get $s1) (local.get $keys)))
      (local.set $x (f32x4.mul (local.get $s10) (local.get $sc))) (v128.store offset=0 align=4 (local.get $out) (local.get $x))
      (local.set $m1 (f32x4.pmax (local.get $x) (local.get $m1))) (local.set $nan1 (v128.or (local.get $nan1) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s11) (local.get $sc))) (v128.store offset=16 align=4 (local.get $out) (local.get $x))
      (local.set $m1 (f32x4.pmax (local.get $x) (local.get $m1))) (local.set $nan1 (v128.or (local.get $nan1) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s12) (local.get $sc))) (v128.store offset=32 align=4 (local.get $out) (local.get $x))
      (local.set $m1 (f32x4.pmax (local.get $x) (local.get $m1))) (local.set $nan1 (v128.or (local.get $nan1) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s13) (local.get $sc))) (v128.store offset=48 align=4 (local.get $out) (local.get $x))
      (local.set $m1 (f32x4.pmax (local.get $x) (local.get $m1))) (local.set $nan1 (v128.or (local.get $nan1) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $out (i32.add (local.get $s2) (local.get $keys)))
      (local.set $x (f32x4.mul (local.get $s20) (local.get $sc))) (v128.store offset=0 align=4 (local.get $out) (local.get $x))
      (local.set $m2 (f32x4.pmax (local.get $x) (local.get $m2))) (local.set $nan2 (v128.or (local.get $nan2) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s21) (local.get $sc))) (v128.store offset=16 align=4 (local.get $out) (local.get $x))
      (local.set $m2 (f32x4.pmax (local.get $x) (local.get $m2))) (local.set $nan2 (v128.or (local.get $nan2) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s22) (local.get $sc))) (v128.store offset=32 align=4 (local.get $out) (local.get $x))
      (local.set $m2 (f32x4.pmax (local.get $x) (local.get $m2))) (local.set $nan2 (v128.or (local.get $nan2) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $x (f32x4.mul (local.get $s23) (local.get $sc))) (v128.store offset=48 align=4 (local.get $out) (local.get $x))
      (local.set $m2 (f32x4.pmax (local.get $x) (local.get $m2))) (local.set $nan2 (v128.or (local.get $nan2) (f32x4.ne (local.get $x) (local.get $x))))
      (local.set $keys (i32.add (local.get $keys) (i32.const 64)))
      (br_if $chunks (i32.lt_u (local.get $keys) (i32.const 256))))
    (f32.store offset=0 align=4 (local.get $max) (call $lanes_max (local.get $m0)))
    (f32.store offset=4 align=4 (local.get $max) (call $lanes_max (local.get $m1)))
    (f32.store offset=8 align=4 (local.get $max) (call $lanes_max (local.get $m2)))
    (i32.or (v128.any_true (local.get $nan0))
      (i32.or (i32.shl (v128.any_true (local.get $nan1)) (i32.const 1)) (i32.shl (v128.any_true (local.get $nan2)) (i32.const 2)))))

  ;; m's lanes in order, each kept where the running value is not greater: the scan's last step
  (func $lanes_max (param $m v128) (result f32)
    (local $r f32) (local $l f32)
    (local.set $r (f32.const -inf))
    (local.set $l (f32x4.extract_lane 0 (local.get $m)))
    (local.set $r (select (local.get $r) (local.get $l) (f32.gt (local.get $r) (local.get $l))))
    (local.set $l (f32x4.extract_lane 1 (local.get $m)))
    (local.set $r (select (local.get $r) (local.get $l) (f32.gt (local.get $r) (local.get $l))))
    (local.set $l (f32x4.extract_lane 2 (local.get $m)))
    (local.set $r (select (local.get $r) (local.get $l) (f32.gt (local.get $r) (local.get $l))))
    (local.set $l (f32x4.extract_lane 3 (local.get $m)))
    (select (local.get $r) (local.get $l) (f32.gt (local.get $r) (local.get $l))))

  ;; acc_r [d] <- each element one FMA chain continued over the tile's keys in order, fma(v[t],
  ;; w_r[t], acc) for t = 0 .. n-1 (n > 0), v [n][d] the tile's values and w_r [n] row r's
  ;; weights; 16 elements of the three rows at a time (d a multiple of 16).
  (func $lf_attn_values3_relaxed (export "lf_attn_values3_relaxed")
    (param $acc0 i32) (param $acc1 i32) (param $acc2 i32) (param $v i32) (param $w0 i32) (param $w1 i32) (param $w2 i32)
    (param $n i32) (param $d i32)
    (local $dims i32) (local $row i32) (local $t i32) (local $end i32) (local $stride i32) (local $p i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $x v128)
    (local $c00 v128) (local $c01 v128) (local $c02 v128) (local $c03 v128)
    (local $c10 v128) (local $c11 v128) (local $c12 v128) (local $c13 v128)
    (local $c20 v128) (local $c21 v128) (local $c22 v128) (local $c23 v128)
    (local.set $stride (i32.shl (local.get $d) (i32.const 2)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (loop $chunks
      (local.set $p (i32.add (local.get $acc0) (local.get $dims)))
      (local.set $c00 (v128.load align=4 (local.get $p))) (local.set $c01 (v128.load offset=16 align=4 (local.get $p)))
      (local.set $c02 (v128.load offset=32 align=4 (local.get $p))) (local.set $c03 (v128.load offset=48 align=4 (local.get $p)))
      (local.set $p (i32.add (local.get $acc1) (local.get $dims)))
      (local.set $c10 (v128.load align=4 (local.get $p))) (local.set $c11 (v128.load offset=16 align=4 (local.get $p)))
      (local.set $c12 (v128.load offset=32 align=4 (local.get $p))) (local.set $c13 (v128.load offset=48 align=4 (local.get $p)))
      (local.set $p (i32.add (local.get $acc2) (local.get $dims)))
      (local.set $c20 (v128.load align=4 (local.get $p))) (local.set $c21 (v128.load offset=16 align=4 (local.get $p)))
      (local.set $c22 (v128.load offset=32 align=4 (local.get $p))) (local.set $c23 (v128.load offset=48 align=4 (local.get $p)))
      (local.set $row (i32.add (local.get $v) (local.get $dims)))
      (local.set $t (i32.const 0))
      (loop $keys
        (local.set $a0 (v128.load32_splat align=4 (i32.add (local.get $w0) (local.get $t))))
        (local.set $a1 (v128.load32_splat align=4 (i32.add (local.get $w1) (local.get $t))))
        (local.set $a2 (v128.load32_splat align=4 (i32.add (local.get $w2) (local.get $t))))
        (local.set $x (v128.load align=4 (local.get $row)))
        (local.set $c00 (f32x4.relaxed_madd (local.get $x) (local.get $a0) (local.get $c00)))
        (local.set $c10 (f32x4.relaxed_madd (local.get $x) (local.get $a1) (local.get $c10)))
        (local.set $c20 (f32x4.relaxed_madd (local.get $x) (local.get $a2) (local.get $c20)))
        (local.set $x (v128.load offset=16 align=4 (local.get $row)))
        (local.set $c01 (f32x4.relaxed_madd (local.get $x) (local.get $a0) (local.get $c01)))
        (local.set $c11 (f32x4.relaxed_madd (local.get $x) (local.get $a1) (local.get $c11)))
        (local.set $c21 (f32x4.relaxed_madd (local.get $x) (local.get $a2) (local.get $c21)))
        (local.set $x (v128.load offset=32 align=4 (local.get $row)))
        (local.set $c02 (f32x4.relaxed_madd (local.get $x) (local.get $a0) (local.get $c02)))
        (local.set $c12 (f32x4.relaxed_madd (local.get $x) (local.get $a1) (local.get $c12)))
        (local.set $c22 (f32x4.relaxed_madd (local.get $x) (local.get $a2) (local.get $c22)))
        (local.set $x (v128.load offset=48 align=4 (local.get $row)))
        (local.set $c03 (f32x4.relaxed_madd (local.get $x) (local.get $a0) (local.get $c03)))
        (local.set $c13 (f32x4.relaxed_madd (local.get $x) (local.get $a1) (local.get $c13)))
        (local.set $c23 (f32x4.relaxed_madd (local.get $x) (local.get $a2) (local.get $c23)))
        (local.set $row (i32.add (local.get $row) (local.get $stride)))
        (local.set $t (i32.add (local.get $t) (i32.const 4)))
        (br_if $keys (i32.lt_u (local.get $t) (local.get $end))))
      (local.set $p (i32.add (local.get $acc0) (local.get $dims)))
      (v128.store align=4 (local.get $p) (local.get $c00)) (v128.store offset=16 align=4 (local.get $p) (local.get $c01))
      (v128.store offset=32 align=4 (local.get $p) (local.get $c02)) (v128.store offset=48 align=4 (local.get $p) (local.get $c03))
      (local.set $p (i32.add (local.get $acc1) (local.get $dims)))
      (v128.store align=4 (local.get $p) (local.get $c10)) (v128.store offset=16 align=4 (local.get $p) (local.get $c11))
      (v128.store offset=32 align=4 (local.get $p) (local.get $c12)) (v128.store offset=48 align=4 (local.get $p) (local.get $c13))
      (local.set $p (i32.add (local.get $acc2) (local.get $dims)))
      (v128.store align=4 (local.get $p) (local.get $c20)) (v128.store offset=16 align=4 (local.get $p) (local.get $c21))
      (v128.store offset=32 align=4 (local.get $p) (local.get $c22)) (v128.store offset=48 align=4 (local.get $p) (local.get $c23))
      (local.set $dims (i32.add (local.get $dims) (i32.const 64)))
      (br_if $chunks (i32.lt_u (local.get $dims) (local.get $stride)))))

  ;; x [n] <- expf_ggml(x - max) lane by lane (n a positive multiple of 4, at most 128): ggml's
  ;; AVX-512 exponential (kernels/exp_ggml.cpp) with its FMAs fused, j · 2^n made from 2^n's
  ;; bits, for n below -125 as (j · 2^(n+126)) · 2^-126 (one rounding, as scalef's), 0 below
  ;; -192 (scalef_ggml). Returns a mask with bit i set where vector i (lanes 4i .. 4i+3) holds
  ;; a NaN or an n above 127: that vector is left as it was, for the scalar expf_ggml.
  ;; Constants from consts (ExpConstants in attention_f32_tiles.cpp).
  (func $lf_exp_ggml_relaxed (export "lf_exp_ggml_relaxed")
    (param $x i32) (param $n i32) (param $max f32) (param $consts i32) (result i32)
    (local $m v128) (local $bit i32) (local $mask i32) (local $end i32)
    (local $v v128) (local $r v128) (local $f v128) (local $mn v128) (local $b v128) (local $u v128) (local $j v128)
    (local $under v128)
    (local.set $m (f32x4.splat (local.get $max)))
    (local.set $r (v128.load offset=16 align=4 (local.get $consts)))
    (local.set $end (i32.add (local.get $x) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $bit (i32.const 1))
    (loop $vectors
      (local.set $v (f32x4.sub (v128.load align=4 (local.get $x)) (local.get $m)))
      (local.set $f (f32x4.sub (f32x4.relaxed_madd (local.get $v) (v128.load offset=0 align=4 (local.get $consts))
        (local.get $r)) (local.get $r)))
      (local.set $mn (f32x4.neg (local.get $f)))
      (local.set $b (f32x4.relaxed_madd (local.get $mn) (v128.load offset=48 align=4 (local.get $consts))
        (f32x4.relaxed_madd (local.get $mn) (v128.load offset=32 align=4 (local.get $consts)) (local.get $v))))
      (local.set $u (f32x4.mul (local.get $b) (local.get $b)))
      (local.set $j (f32x4.relaxed_madd
        (f32x4.relaxed_madd
          (f32x4.relaxed_madd (v128.load offset=64 align=4 (local.get $consts)) (local.get $b)
            (v128.load offset=80 align=4 (local.get $consts)))
          (local.get $u)
          (f32x4.relaxed_madd (v128.load offset=96 align=4 (local.get $consts)) (local.get $b)
            (v128.load offset=112 align=4 (local.get $consts))))
        (local.get $u)
        (f32x4.relaxed_madd (v128.load offset=128 align=4 (local.get $consts)) (local.get $b)
          (v128.load offset=144 align=4 (local.get $consts)))))
      (if (i32x4.all_true (f32x4.le (local.get $f) (v128.load offset=160 align=4 (local.get $consts))))
        (then
          (local.set $under (f32x4.lt (local.get $f) (v128.load offset=176 align=4 (local.get $consts))))
          (v128.store align=4 (local.get $x) (v128.andnot
            (f32x4.mul
              (f32x4.mul (local.get $j)
                (i32x4.shl
                  (i32x4.add
                    (i32x4.trunc_sat_f32x4_s (f32x4.max (local.get $f) (v128.load offset=192 align=4 (local.get $consts))))
                    (v128.bitselect (v128.load offset=208 align=4 (local.get $consts))
                      (v128.load offset=224 align=4 (local.get $consts)) (local.get $under)))
                  (i32.const 23)))
              (v128.bitselect (v128.load offset=240 align=4 (local.get $consts))
                (v128.load offset=144 align=4 (local.get $consts)) (local.get $under)))
            (f32x4.lt (local.get $f) (v128.load offset=256 align=4 (local.get $consts))))))
        (else (local.set $mask (i32.or (local.get $mask) (local.get $bit)))))
      (local.set $bit (i32.shl (local.get $bit) (i32.const 1)))
      (local.set $x (i32.add (local.get $x) (i32.const 16)))
      (br_if $vectors (i32.lt_u (local.get $x) (local.get $end))))
    (local.get $mask))

  ;; x rounded to f16, held as f32, for any lane (simd_wasm.h's round_to_half_any): the normal
  ;; rounding, f16 subnormals as multiples of 2^-24 by adding and removing 0.5 (ties to even),
  ;; infinity from 65520, NaN the f16 NaN's f32, the sign kept.
  (func $round_to_half_any (param $x v128) (param $consts i32) (result v128)
    (local $sign v128) (local $a v128) (local $r v128) (local $t v128)
    (local.set $sign (v128.and (local.get $x) (v128.load offset=64 align=4 (local.get $consts))))
    (local.set $a (v128.and (local.get $x) (v128.load offset=0 align=4 (local.get $consts))))
    (local.set $t (f32x4.mul (local.get $x) (v128.load offset=48 align=4 (local.get $consts))))
    (local.set $r (f32x4.add (local.get $t) (f32x4.sub (local.get $x) (local.get $t))))
    (local.set $r (v128.bitselect
      (v128.or (f32x4.sub (f32x4.add (local.get $a) (v128.load offset=80 align=4 (local.get $consts)))
        (v128.load offset=80 align=4 (local.get $consts))) (local.get $sign))
      (local.get $r) (i32x4.lt_s (local.get $a) (v128.load offset=96 align=4 (local.get $consts)))))
    (local.set $r (v128.bitselect (v128.or (local.get $sign) (v128.load offset=112 align=4 (local.get $consts)))
      (local.get $r) (i32x4.gt_s (local.get $a) (v128.load offset=128 align=4 (local.get $consts)))))
    (v128.bitselect (v128.or (local.get $sign) (v128.load offset=144 align=4 (local.get $consts)))
      (local.get $r) (i32x4.gt_s (local.get $a) (v128.load offset=112 align=4 (local.get $consts)))))

  ;; The multi-strip kernels, lf_q4_0_strips4_t1_relaxed (decode) and lf_q4_0_strips_t{T}_relaxed
  ;; (2 to 8 tokens), and the _pairs twins of every kernel here, are written here at build time by
  ;; wasm/gen_q4_0_strips_relaxed.mjs, which says what they compute.
  ;; @strips-kernels
)
