// Usage: node wasm/gen_q4_0_strips_relaxed.mjs IN.wat OUT.wat
//
// Writes OUT.wat: the hand-written kernel of IN.wat (src/kernels/relaxed_simd.wat) with, at its
// `;; @strips-kernels` line, the multi-strip kernels (docs/kernels.md): for decode,
// lf_q4_0_strips4_t1_relaxed (one token, four strips), and for batched decode
// lf_q4_0_strips_t{T}_relaxed (T = 2..8 tokens, two strips). Each holds its strips·T running
// sums in locals for the whole call, which only a strip and token count fixed per function allows;
// the functions differ only in those counts, so they are written by this one template instead of
// eight near-copies by hand.
//
// Each comes in two forms of the integer block product, which differ only in how x86 engines
// lower them (docs/kernels.md, "Two forms of the dot product"):
//   dot-add  per group, i32x4.relaxed_dot_i8x16_i7x16_add_s: one vpdpbusd with AVX-VNNI, else
//            pmaddubsw + pmaddwd + paddd and the constant of ones;
//   pairs    per group, i16x8.relaxed_dot_i8x16_i7x16_s (one pmaddubsw) summed in i16 lanes, and
//            one i32x4.extadd_pairwise_i16x8_s (pmaddwd) per block;
// the pairs form adds lf_q4_0_strip_pairs_relaxed, the general one-strip kernel's twin, and its
// names end in _pairs_relaxed. Both give the same exact i32 sums: the host runs the faster.
//
// lf_q4_0_strips4_t1{_pairs}_relaxed (wa, wb, wc, wd, x, n_blocks, acc, consts),
// lf_q4_0_strips_t{T}{_pairs}_relaxed (wa, wb, x, n_blocks, acc, consts):
//   W strips a, b (, c, d) (4 rows each in row strips, n_blocks blocks of 72 bytes from wa, wb...)
//   · T tokens (SplatRecords of 160 bytes as pack_strip_activations writes them, [n_blocks][T] from x)
//   -> acc [strips][T][4] f32 (strip a's tokens, then b's..., lane = row), continued:
//   acc = fma(f32(sumi), dw·dy, acc) block after block (f32x4.relaxed_madd, fused where the host
//   loads this module), vec_dot_ref's step and order.
// lf_q4_0_strip_pairs_relaxed (w, x, n_tok, n_blocks, acc, consts): as lf_q4_0_strip_relaxed.
//
// Exactness of the pairs form: an i16 lane of one dot holds two products q·a, q in [0, 15] and
// a in [-128, 127], at most 2·15·128 = 3840 in magnitude; a block's 8 dots summed, 30720, below
// 2^15: no lane wraps or saturates, and the pairwise widening to i32 is exact.
import { readFileSync, writeFileSync } from 'node:fs';

const kMaxTokens = 8;  // gemm_q4_0_strips_relaxed.cpp's kStripsMaxTokens: it names each of these functions
// The two layouts of one token's block record (gemm_q4_0_strips_relaxed.cpp): byte offsets of
// group k's low and high elements, of -8·Σa and of dy, and the load that puts 4 bytes in every
// 32-bit lane. The multi-strip kernels read SplatRecord, its groups already in every lane; the
// one-strip kernels QuantRecord, the block's quants as they are.
const SPLAT = { size: 160, low: (k) => 16 * k, high: (k) => 64 + 16 * k, minus: 128, dy: 144, load: 'v128.load' };
const QUANT = { size: 40, low: (k) => 4 * k, high: (k) => 16 + 4 * k, minus: 32, dy: 36, load: 'v128.load32_splat' };
const FORMS = { 'dot-add': '_relaxed', pairs: '_pairs_relaxed' };

// The record's 4-byte value at offset in every 32-bit lane (a SplatRecord holds it so already)
const activation = (record, x, offset) => `(${record.load} offset=${offset} align=1 (local.get ${x}))`;
const unpackLow = (packed) => `(v128.and (local.get ${packed}) (local.get $nibble))`;
const unpackHigh = (packed) => `(v128.and (i16x8.shr_u (local.get ${packed}) (i32.const 4)) (local.get $nibble))`;

// The integer sum of group k (elements 4k..4k+3 and 16+4k..19+4k: weights lo and hi against the
// token record at x + base) added to the running sum $s: in the dot-add form an i32 sum that
// group 0 starts from -8·Σa, in the pairs form an i16 sum (finished by blockSum).
function groupSum(form, record, s, k, lo, hi, x, base) {
  const low = activation(record, x, base + record.low(k)), high = activation(record, x, base + record.high(k));
  if (form === 'pairs') {
    const pair = `(i16x8.add (i16x8.dot_i8x16_i7x16_s ${high} ${hi}) (i16x8.dot_i8x16_i7x16_s ${low} ${lo}))`;
    return `(local.set ${s} ${k === 0 ? pair : `(i16x8.add (local.get ${s}) ${pair})`})`;
  }
  const start = k === 0 ? activation(record, x, base + record.minus) : '(v128.const i32x4 0 0 0 0)';
  const pair = `(i32x4.dot_i8x16_i7x16_add_s ${high} ${hi}
        (i32x4.dot_i8x16_i7x16_add_s ${low} ${lo} ${start}))`;
  return `(local.set ${s} ${k === 0 ? pair : `(i32x4.add (local.get ${s}) ${pair})`})`;
}

// The block's exact i32 sums from the running sum $s, as groupSum left it
function blockSum(form, record, s, x, base) {
  if (form === 'pairs') return `(i32x4.add (i32x4.extadd_pairwise_i16x8_s (local.get ${s})) ${activation(record, x, base + record.minus)})`;
  return `(local.get ${s})`;
}

// The 4 rows' f16 scales of the strip block at w as f32, as in lf_q4_0_strip_relaxed
const stripScales = (w) => `(f32x4.mul (v128.and (i32x4.shl (v128.load16x4_s align=1 (local.get ${w})) (i32.const 13))
        (local.get $sign_exponent)) (local.get $two_112))`;

// The constants every kernel reads from consts (StripConstants)
const CONSTANT_LOCALS = '(local $nibble v128) (local $two_112 v128) (local $sign_exponent v128)';
const LOAD_CONSTANTS = [
  '(local.set $nibble (v128.load offset=0 align=1 (local.get $consts)))',
  '(local.set $two_112 (v128.load offset=16 align=1 (local.get $consts)))',
  '(local.set $sign_exponent (v128.load offset=32 align=1 (local.get $consts)))',
];

// The .wat text of the kernel `name` over the given strips and T tokens. Per block and group k of
// the 4 rows' quants, each strip's packed vector is unpacked just before its use and meets every
// token's two activation vectors, so the unpacking is shared by all tokens and the activation
// loads by all strips. Each strip and token has one running sum, to which every group's pair of
// dots is added. emcc's binaryen sinks a chain of single-use dot-adds into one expression whose
// operands, loads included, all come first, and V8 keeps the loads in that order, so a chain of 8
// would hold 16 vectors at once (spilled; measured slower), while the add per group keeps each
// group's loads next to its dot products.
function kernel(form, name, strips, T) {
  const tokens = [...Array(T).keys()];
  const pairs = strips.flatMap((s) => tokens.map((t) => `${s}${t}`));
  const lines = [];
  const emit = (indent, text) => lines.push(' '.repeat(indent) + text);

  emit(2, `(func $${name} (export "${name}")`);
  emit(4, `${strips.map((s) => `(param $w${s} i32)`).join(' ')} (param $x i32) (param $n_blocks i32) (param $acc i32) (param $consts i32)`);
  emit(4, `(local $packed v128) (local $dw v128) ${CONSTANT_LOCALS}`);
  emit(4, pairs.map((p) => `(local $s${p} v128)`).join(' '));
  emit(4, pairs.map((p) => `(local $acc_${p} v128)`).join(' '));
  emit(4, '(if (i32.le_s (local.get $n_blocks) (i32.const 0)) (then (return)))');
  for (const line of LOAD_CONSTANTS) emit(4, line);
  pairs.forEach((p, i) => emit(4, `(local.set $acc_${p} (v128.load offset=${16 * i} align=4 (local.get $acc)))`));
  emit(4, '(loop $blocks');
  for (let k = 0; k < 4; ++k) {
    emit(6, `;; group ${k}: elements ${4 * k}..${4 * k + 3} (low nibbles) and ${16 + 4 * k}..${19 + 4 * k} (high)`);
    for (const s of strips) {
      emit(6, `(local.set $packed (v128.load offset=${8 + 16 * k} align=1 (local.get $w${s})))`);
      for (const t of tokens) emit(6, groupSum(form, SPLAT, `$s${s}${t}`, k, unpackLow('$packed'), unpackHigh('$packed'), '$x', SPLAT.size * t));
    }
  }
  for (const s of strips) {
    emit(6, `;; strip ${s}: dw as in lf_q4_0_strip_relaxed, then acc = fma(f32(sumi), dw·dy, acc) per token`);
    emit(6, `(local.set $dw ${stripScales(`$w${s}`)})`);
    for (const t of tokens) {
      emit(6, `(local.set $acc_${s}${t} (f32x4.relaxed_madd (f32x4.convert_i32x4_s ${blockSum(form, SPLAT, `$s${s}${t}`, '$x', SPLAT.size * t)})`);
      emit(8, `(f32x4.mul (local.get $dw) ${activation(SPLAT, '$x', SPLAT.size * t + SPLAT.dy)}) (local.get $acc_${s}${t})))`);
    }
  }
  emit(6, `(local.set $x (i32.add (local.get $x) (i32.const ${SPLAT.size * T})))`);
  for (const s of strips) emit(6, `(local.set $w${s} (i32.add (local.get $w${s}) (i32.const 72)))`);
  emit(6, '(local.set $n_blocks (i32.sub (local.get $n_blocks) (i32.const 1)))');
  emit(6, '(br_if $blocks (local.get $n_blocks)))');
  pairs.forEach((p, i) => emit(4, `(v128.store offset=${16 * i} align=4 (local.get $acc) (local.get $acc_${p}))`));
  lines[lines.length - 1] += ')';
  return lines.join('\n');
}

// The general one-strip kernel of the given form, for any number of tokens (prompts), as the
// hand-written lf_q4_0_strip_relaxed: per block the strip's 8 vectors unpacked once, then per
// token one running sum over the 4 groups and the f32 step.
function loopKernel(form, name) {
  const lines = [];
  const emit = (indent, text) => lines.push(' '.repeat(indent) + text);
  const groups = [0, 1, 2, 3];
  emit(2, `(func $${name} (export "${name}")`);
  emit(4, '(param $w i32) (param $x i32) (param $n_tok i32) (param $n_blocks i32) (param $acc i32) (param $consts i32)');
  emit(4, `(local $packed v128) (local $dw v128) (local $s v128) ${CONSTANT_LOCALS} (local $t i32) (local $a i32)`);
  emit(4, groups.map((k) => `(local $lo${k} v128) (local $hi${k} v128)`).join(' '));
  emit(4, '(if (i32.le_s (local.get $n_blocks) (i32.const 0)) (then (return)))');
  emit(4, '(if (i32.le_s (local.get $n_tok) (i32.const 0)) (then (return)))');
  for (const line of LOAD_CONSTANTS) emit(4, line);
  emit(4, '(loop $blocks');
  for (const k of groups) {
    emit(6, `(local.set $packed (v128.load offset=${8 + 16 * k} align=1 (local.get $w)))`);
    emit(6, `(local.set $lo${k} ${unpackLow('$packed')})`);
    emit(6, `(local.set $hi${k} ${unpackHigh('$packed')})`);
  }
  emit(6, `(local.set $dw ${stripScales('$w')})`);
  emit(6, '(local.set $t (local.get $n_tok))');
  emit(6, '(local.set $a (local.get $acc))');
  emit(6, '(loop $tokens');
  for (const k of groups) emit(8, groupSum(form, QUANT, '$s', k, `(local.get $lo${k})`, `(local.get $hi${k})`, '$x', 0));
  emit(8, `(v128.store align=4 (local.get $a) (f32x4.relaxed_madd (f32x4.convert_i32x4_s ${blockSum(form, QUANT, '$s', '$x', 0)})`);
  emit(10, `(f32x4.mul (local.get $dw) ${activation(QUANT, '$x', QUANT.dy)}) (v128.load align=4 (local.get $a))))`);
  emit(8, `(local.set $x (i32.add (local.get $x) (i32.const ${QUANT.size})))`);
  emit(8, '(local.set $a (i32.add (local.get $a) (i32.const 16)))');
  emit(8, '(local.set $t (i32.sub (local.get $t) (i32.const 1)))');
  emit(8, '(br_if $tokens (local.get $t)))');
  emit(6, '(local.set $w (i32.add (local.get $w) (i32.const 72)))');
  emit(6, '(local.set $n_blocks (i32.sub (local.get $n_blocks) (i32.const 1)))');
  emit(6, '(br_if $blocks (local.get $n_blocks))))');
  return lines.join('\n');
}

const [inPath, outPath] = process.argv.slice(2);
if (!inPath || !outPath) {
  console.error('usage: node gen_q4_0_strips_relaxed.mjs IN.wat OUT.wat');
  process.exit(2);
}
const source = readFileSync(inPath, 'utf8');
const marker = /^ *;; @strips-kernels\n/m;
if (!marker.test(source)) {
  console.error(`${inPath}: no ";; @strips-kernels" line to put the multi-strip kernels at`);
  process.exit(1);
}
const kernels = [loopKernel('pairs', 'lf_q4_0_strip_pairs_relaxed')];
for (const [form, suffix] of Object.entries(FORMS)) {
  kernels.push(kernel(form, `lf_q4_0_strips4_t1${suffix}`, ['a', 'b', 'c', 'd'], 1));
  for (let T = 2; T <= kMaxTokens; ++T) kernels.push(kernel(form, `lf_q4_0_strips_t${T}${suffix}`, ['a', 'b'], T));
}
writeFileSync(outPath, source.replace(marker, () => kernels.join('\n\n') + '\n'));
