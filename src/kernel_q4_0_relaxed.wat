;; Q4_0 kernels with relaxed SIMD, for the layerfold_mt_relaxed module (docs/kernels.md): the
;; prompt GEMM's row kernel and the decode GEMV, each with its f32 step.
;;
;; Why a .wat file: Debian's clang-14 has no relaxed-SIMD builtins, and Emscripten 3.1.6 runs
;; the linked module through binaryen 108, which numbers the relaxed opcodes as the proposal
;; once did: it reads the final i32x4.relaxed_dot_i8x16_i7x16_add_s (0xFD 0x113) as a
;; two-operand i16x8 dot and drops an operand. The i16x8 form used here, 0xFD 0x112
;; (i16x8.relaxed_dot_i8x16_i7x16_s; wabt 1.0.32 spells it i16x8.dot_i8x16_i7x16_s), means the
;; same to wabt, binaryen 108 and V8, so it survives the link. Assembled with
;;   wat2wasm --enable-relaxed-simd --enable-threads --relocatable
;; and linked by wasm-ld like any C object.
;;
;; Exactness: the i7 operand is the weights' unsigned nibbles q in [0, 15] (top bit clear, so
;; every engine reads them the same) and the i8 operand the activations a in [-128, 127]; a pair
;; sums to at most 2·15·128 = 3840 in magnitude, so no engine saturates. A block's products are
;; Σ (q - 8)·a = Σ q·a - 8·Σ a, formed exactly: the GEMV subtracts 8·Σa in i16 lanes (at most
;; 7680 + 8·512 in magnitude), the row kernel sums 8 pairs in i16 (at most 30720) and subtracts in
;; i32; the lanes are then widened to i32 and added. The result is the exact integer block product
;; the scalar reference computes.
(module
  (import "env" "__linear_memory" (memory 1 65536 shared))

  ;; One W row (block_q4_0 {f16 d; u8 qs[16]}, at its first block; its scales already f32 in
  ;; dw [n_blocks]) · X, tokens in groups of 4, one lane per token -> acc [n_groups][4] f32:
  ;; acc = acc + (sumi·dw)·dy block after block, vec_dot_ref's expression and order per output.
  ;; X is packed by the caller (pack_token_groups in kernel_gemm_q8_0.cpp) as records [n_blocks]
  ;; [n_groups] of 160 bytes: 8 vectors, vector k holding elements 4k..4k+3 of the group's 4
  ;; tokens; then i32 [4] 8·Σa per token (the nibbles q are w + 8); then f32 [4] dy per token.
  ;; Vector k of the weights is elements 4k..4k+3 of the row repeated in every lane, so each dot
  ;; product lane pairs one token with the row, and no lanes are added across rows or tokens:
  ;; one 8-term i16 sum (at most 8·3840 = 30720 in magnitude, exact) and one widening per group.
  (func $lf_q4_0_gemm_row_relaxed (export "lf_q4_0_gemm_row_relaxed")
    (param $w i32) (param $dw i32) (param $x i32) (param $n_groups i32) (param $n_blocks i32) (param $acc i32)
    (local $packed v128) (local $lo v128) (local $hi v128) (local $nibble v128) (local $dw_b v128)
    (local $b0 v128) (local $b1 v128) (local $b2 v128) (local $b3 v128)
    (local $b4 v128) (local $b5 v128) (local $b6 v128) (local $b7 v128)
    (local $s0 v128) (local $s1 v128) (local $zero v128)
    (local $g i32) (local $a i32)
    (if (i32.le_s (local.get $n_blocks) (i32.const 0)) (then (return)))
    (if (i32.le_s (local.get $n_groups) (i32.const 0)) (then (return)))
    ;; set once: V8 would build it again on every iteration
    (local.set $nibble (i8x16.splat (i32.const 15)))
    (loop $blocks
      ;; elements 0-15 are the low nibbles of qs, 16-31 the high ones
      (local.set $packed (v128.load offset=2 align=1 (local.get $w)))
      (local.set $lo (v128.and (local.get $packed) (local.get $nibble)))
      (local.set $hi (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble)))
      (local.set $b0 (i8x16.shuffle 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 (local.get $lo) (local.get $lo)))
      (local.set $b1 (i8x16.shuffle 4 5 6 7 4 5 6 7 4 5 6 7 4 5 6 7 (local.get $lo) (local.get $lo)))
      (local.set $b2 (i8x16.shuffle 8 9 10 11 8 9 10 11 8 9 10 11 8 9 10 11 (local.get $lo) (local.get $lo)))
      (local.set $b3 (i8x16.shuffle 12 13 14 15 12 13 14 15 12 13 14 15 12 13 14 15 (local.get $lo) (local.get $lo)))
      (local.set $b4 (i8x16.shuffle 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 (local.get $hi) (local.get $hi)))
      (local.set $b5 (i8x16.shuffle 4 5 6 7 4 5 6 7 4 5 6 7 4 5 6 7 (local.get $hi) (local.get $hi)))
      (local.set $b6 (i8x16.shuffle 8 9 10 11 8 9 10 11 8 9 10 11 8 9 10 11 (local.get $hi) (local.get $hi)))
      (local.set $b7 (i8x16.shuffle 12 13 14 15 12 13 14 15 12 13 14 15 12 13 14 15 (local.get $hi) (local.get $hi)))
      (local.set $dw_b (f32x4.splat (f32.load align=4 (local.get $dw))))
      (local.set $g (local.get $n_groups))
      (local.set $a (local.get $acc))
      (loop $groups
        ;; sumi = Σ q·a - 8·Σa in two chains of 4 dot products (each i32 lane sums 4 products),
        ;; one starting from -8·Σa, one from 0
        (local.set $s0 (v128.load offset=128 align=1 (local.get $x)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=0 align=1 (local.get $x)) (local.get $b0) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=64 align=1 (local.get $x)) (local.get $b4) (local.get $zero)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=16 align=1 (local.get $x)) (local.get $b1) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=80 align=1 (local.get $x)) (local.get $b5) (local.get $s1)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=32 align=1 (local.get $x)) (local.get $b2) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=96 align=1 (local.get $x)) (local.get $b6) (local.get $s1)))
        (local.set $s0 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=48 align=1 (local.get $x)) (local.get $b3) (local.get $s0)))
        (local.set $s1 (i32x4.dot_i8x16_i7x16_add_s (v128.load offset=112 align=1 (local.get $x)) (local.get $b7) (local.get $s1)))
        ;; acc = acc + (f32(sumi)·dw)·dy
        (v128.store align=4 (local.get $a) (f32x4.add (v128.load align=4 (local.get $a)) (f32x4.mul
          (f32x4.mul (f32x4.convert_i32x4_s (i32x4.add (local.get $s0) (local.get $s1))) (local.get $dw_b))
          (v128.load offset=144 align=1 (local.get $x)))))
        (local.set $x (i32.add (local.get $x) (i32.const 160)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $g (i32.sub (local.get $g) (i32.const 1)))
        (br_if $groups (local.get $g)))
      (local.set $w (i32.add (local.get $w) (i32.const 18)))
      (local.set $dw (i32.add (local.get $dw) (i32.const 4)))
      (local.set $n_blocks (i32.sub (local.get $n_blocks) (i32.const 1)))
      (br_if $blocks (local.get $n_blocks))))

  ;; W rows w0..w7 (block_q4_0, n_blocks each) · x (n_blocks records of 64 bytes, made once per
  ;; call by split_for_gemv in kernel_gemm_q8_0.cpp: the block's 32 quants a, then i16 [8]
  ;; 8·(pairwise sums of a), the "- 8" of every weight, then its f32 scale dy in all 4 lanes)
  ;;   -> acc [8] f32, lane i = row i: acc = acc + (sumi·dw)·dy block after block from 0,
  ;; vec_dot_ref's expression and order, with dw converted from f16 as fp16_to_fp32 converts it
  ;; (halves_to_f32 in kernel_simd.h; all-normal scales, the rule, take a short path). The GEMV
  ;; of decode: every weight byte read once, 8 rows in flight sharing each activation block, the
  ;; integer sums of a block going straight into its f32 step.
  (func $lf_q4_0_gemv_relaxed (export "lf_q4_0_gemv_relaxed")
    (param $w0 i32) (param $w1 i32) (param $w2 i32) (param $w3 i32) (param $w4 i32) (param $w5 i32) (param $w6 i32) (param $w7 i32)
    (param $x i32) (param $n_blocks i32) (param $acc i32)
    (local $a_lo v128) (local $a_hi v128) (local $c v128) (local $packed v128) (local $dy_b v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $ab v128) (local $cd v128) (local $h v128) (local $bits v128) (local $dw v128)
    (local $sum0 v128) (local $sum1 v128)
    (local $zero v128) (local $exponent_one v128) (local $exponent_mask v128) (local $moved_mask v128) (local $nibble v128) (local $magnitude v128) (local $sub_bias v128) (local $two_m14 v128) (local $bias v128) (local $min_normal v128) (local $sign v128) (local $below_inf v128) (local $inf v128) (local $inf_bits v128) (local $quiet v128)
    ;; constants set once: V8 would build each again on every iteration
    (local.set $nibble (i8x16.splat (i32.const 15)))
    (local.set $exponent_one (i32x4.splat (i32.const 0x0400)))
    (local.set $exponent_mask (i32x4.splat (i32.const 0x7800)))
    (local.set $moved_mask (i32x4.splat (i32.const 0x8FFFE000)))
    (local.set $magnitude (i32x4.splat (i32.const 0x7FFF)))
    (local.set $sub_bias (i32x4.splat (i32.const 0x38800000)))
    (local.set $two_m14 (f32x4.splat (f32.const 0x1p-14)))
    (local.set $bias (i32x4.splat (i32.const 0x38000000)))
    (local.set $min_normal (i32x4.splat (i32.const 0x00800000)))
    (local.set $sign (i32x4.splat (i32.const 0x8000)))
    (local.set $below_inf (i32x4.splat (i32.const 0x0F7FFFFF)))
    (local.set $inf (i32x4.splat (i32.const 0x7F800000)))
    (local.set $inf_bits (i32x4.splat (i32.const 0x0F800000)))
    (local.set $quiet (i32x4.splat (i32.const 0x00400000)))
    (if (i32.gt_s (local.get $n_blocks) (i32.const 0)) (then
      (loop $blocks
        (local.set $a_lo (v128.load offset=0 align=1 (local.get $x)))
        (local.set $a_hi (v128.load offset=16 align=1 (local.get $x)))
        (local.set $c (v128.load offset=32 align=1 (local.get $x)))
        (local.set $dy_b (v128.load offset=48 align=1 (local.get $x)))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w0)))
        (local.set $s0 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w1)))
        (local.set $s1 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w2)))
        (local.set $s2 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w3)))
        (local.set $s3 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        ;; [Σ s0, Σ s1, Σ s2, Σ s3], as sum_each in kernel_simd.h
        (local.set $ab (i32x4.add
          (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))
          (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))
        (local.set $cd (i32x4.add
          (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))
          (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))
        ;; the 4 rows' f16 scales (offset 0 of their blocks) in the low 16 bits of i32 lanes
        (local.set $h (i32x4.extend_low_i16x8_u
          (v128.load16_lane align=1 3 (local.get $w3)
            (v128.load16_lane align=1 2 (local.get $w2)
              (v128.load16_lane align=1 1 (local.get $w1)
                (v128.load16_lane align=1 0 (local.get $w0) (local.get $zero)))))))
        ;; as halves_to_f32 in kernel_simd.h: a lane of exponent 0 or 31 has no bit of
        ;; exponent + 1 in 0x7800
        (local.set $dw (if (result v128)
          (v128.any_true (i32x4.eq (v128.and (i32x4.add (local.get $h) (local.get $exponent_one))
                                             (local.get $exponent_mask))
                                   (local.get $zero)))
          (then
            ;; zero, subnormal (as (2^-14 + m·2^-24) - 2^-14, exact, never an f32 subnormal),
            ;; infinite or NaN (every f32 exponent bit set, the NaN quieted) among them
            (local.set $bits (i32x4.shl (v128.and (local.get $h) (local.get $magnitude)) (i32.const 13)))
            (v128.or
              (v128.or
                (v128.bitselect
                  (f32x4.sub (i32x4.add (local.get $bits) (local.get $sub_bias)) (local.get $two_m14))
                  (i32x4.add (local.get $bits) (local.get $bias))
                  (i32x4.lt_s (local.get $bits) (local.get $min_normal)))
                (i32x4.shl (v128.and (local.get $h) (local.get $sign)) (i32.const 16)))
              (v128.or
                (v128.and (i32x4.gt_s (local.get $bits) (local.get $below_inf)) (local.get $inf))
                (v128.and (i32x4.gt_s (local.get $bits) (local.get $inf_bits)) (local.get $quiet)))))
          (else
            ;; all normal: sign, exponent and mantissa moved into place by one arithmetic shift
            ;; (the sign's copies masked off), then the exponent bias
            (i32x4.add (v128.and (i32x4.shr_s (i32x4.shl (local.get $h) (i32.const 16)) (i32.const 3))
                                 (local.get $moved_mask))
                       (local.get $bias)))))
        ;; sum = sum + (sumi·dw)·dy
        (local.set $sum0 (f32x4.add (local.get $sum0) (f32x4.mul
          (f32x4.mul
            (f32x4.convert_i32x4_s (i32x4.add
              (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $ab) (local.get $cd))
              (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $ab) (local.get $cd))))
            (local.get $dw))
          (local.get $dy_b))))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w4)))
        (local.set $s0 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w5)))
        (local.set $s1 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w6)))
        (local.set $s2 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        (local.set $packed (v128.load offset=2 align=1 (local.get $w7)))
        (local.set $s3 (i32x4.extadd_pairwise_i16x8_s (i16x8.sub
          (i16x8.add
            (i16x8.dot_i8x16_i7x16_s (local.get $a_lo) (v128.and (local.get $packed) (local.get $nibble)))
            (i16x8.dot_i8x16_i7x16_s (local.get $a_hi)
                                     (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))))
          (local.get $c))))
        ;; [Σ s0, Σ s1, Σ s2, Σ s3], as sum_each in kernel_simd.h
        (local.set $ab (i32x4.add
          (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))
          (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))
        (local.set $cd (i32x4.add
          (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))
          (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))
        ;; the 4 rows' f16 scales (offset 0 of their blocks) in the low 16 bits of i32 lanes
        (local.set $h (i32x4.extend_low_i16x8_u
          (v128.load16_lane align=1 3 (local.get $w7)
            (v128.load16_lane align=1 2 (local.get $w6)
              (v128.load16_lane align=1 1 (local.get $w5)
                (v128.load16_lane align=1 0 (local.get $w4) (local.get $zero)))))))
        ;; as halves_to_f32 in kernel_simd.h: a lane of exponent 0 or 31 has no bit of
        ;; exponent + 1 in 0x7800
        (local.set $dw (if (result v128)
          (v128.any_true (i32x4.eq (v128.and (i32x4.add (local.get $h) (local.get $exponent_one))
                                             (local.get $exponent_mask))
                                   (local.get $zero)))
          (then
            ;; zero, subnormal (as (2^-14 + m·2^-24) - 2^-14, exact, never an f32 subnormal),
            ;; infinite or NaN (every f32 exponent bit set, the NaN quieted) among them
            (local.set $bits (i32x4.shl (v128.and (local.get $h) (local.get $magnitude)) (i32.const 13)))
            (v128.or
              (v128.or
                (v128.bitselect
                  (f32x4.sub (i32x4.add (local.get $bits) (local.get $sub_bias)) (local.get $two_m14))
                  (i32x4.add (local.get $bits) (local.get $bias))
                  (i32x4.lt_s (local.get $bits) (local.get $min_normal)))
                (i32x4.shl (v128.and (local.get $h) (local.get $sign)) (i32.const 16)))
              (v128.or
                (v128.and (i32x4.gt_s (local.get $bits) (local.get $below_inf)) (local.get $inf))
                (v128.and (i32x4.gt_s (local.get $bits) (local.get $inf_bits)) (local.get $quiet)))))
          (else
            ;; all normal: sign, exponent and mantissa moved into place by one arithmetic shift
            ;; (the sign's copies masked off), then the exponent bias
            (i32x4.add (v128.and (i32x4.shr_s (i32x4.shl (local.get $h) (i32.const 16)) (i32.const 3))
                                 (local.get $moved_mask))
                       (local.get $bias)))))
        ;; sum = sum + (sumi·dw)·dy
        (local.set $sum1 (f32x4.add (local.get $sum1) (f32x4.mul
          (f32x4.mul
            (f32x4.convert_i32x4_s (i32x4.add
              (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $ab) (local.get $cd))
              (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $ab) (local.get $cd))))
            (local.get $dw))
          (local.get $dy_b))))
        (local.set $w0 (i32.add (local.get $w0) (i32.const 18)))
        (local.set $w1 (i32.add (local.get $w1) (i32.const 18)))
        (local.set $w2 (i32.add (local.get $w2) (i32.const 18)))
        (local.set $w3 (i32.add (local.get $w3) (i32.const 18)))
        (local.set $w4 (i32.add (local.get $w4) (i32.const 18)))
        (local.set $w5 (i32.add (local.get $w5) (i32.const 18)))
        (local.set $w6 (i32.add (local.get $w6) (i32.const 18)))
        (local.set $w7 (i32.add (local.get $w7) (i32.const 18)))
        (local.set $x (i32.add (local.get $x) (i32.const 64)))
        (local.set $n_blocks (i32.sub (local.get $n_blocks) (i32.const 1)))
        (br_if $blocks (local.get $n_blocks)))))
    (v128.store offset=0 align=4 (local.get $acc) (local.get $sum0))
    (v128.store offset=16 align=4 (local.get $acc) (local.get $sum1)))
)
