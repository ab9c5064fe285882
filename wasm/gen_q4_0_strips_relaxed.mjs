// Usage: node wasm/gen_q4_0_strips_relaxed.mjs IN.wat OUT.wat
//
// Writes OUT.wat: the hand-written kernel of IN.wat (src/kernels/q4_0_relaxed.wat) with, at its
// `;; @strips-kernels` line, the multi-strip kernels (docs/kernels.md): for decode,
// lf_q4_0_strips4_t1_relaxed (one token, four strips), and for batched decode
// lf_q4_0_strips_t{T}_relaxed (T = 2..8 tokens, two strips). Each holds its strips·T running
// sums in locals for the whole call, which only a strip and token count fixed per function allows;
// the functions differ only in those counts, so they are written by this one template instead of
// eight near-copies by hand.
//
// lf_q4_0_strips4_t1_relaxed (wa, wb, wc, wd, x, n_blocks, acc, consts),
// lf_q4_0_strips_t{T}_relaxed (wa, wb, x, n_blocks, acc, consts):
//   W strips a, b (, c, d) (4 rows each in row strips, n_blocks blocks of 72 bytes from wa, wb...)
//   · T tokens (records of 160 bytes as pack_strip_activations writes them, [n_blocks][T] from x)
//   -> acc [strips][T][4] f32 (strip a's tokens, then b's..., lane = row), continued:
//   acc = fma(f32(sumi), dw·dy, acc) block after block (f32x4.relaxed_madd, fused where the host
//   loads this module), vec_dot_ref's step and order.
import { readFileSync, writeFileSync } from 'node:fs';

const kMaxTokens = 8;  // gemm_q4_0_strips_relaxed.cpp's kStripsMaxTokens: it names each of these functions
const kRecord = 160;  // bytes of one token's block record

// The .wat text of the kernel `name` over the given strips and T tokens. Per block and group k of
// the 4 rows' quants, each strip's packed vector is unpacked just before its use and meets every
// token's two activation vectors, so the unpacking is shared by all tokens and the activation
// loads by all strips. Each strip and token has one sum: group 0's two dot products chained from
// -8·Σa, every later group's two chained from 0 and added to it. emcc's binaryen sinks a chain of
// single-use dot-adds into one expression whose operands, loads included, all come first, and V8
// keeps the loads in that order, so a chain of 8 would hold 16 vectors at once (spilled; measured
// slower), while the add per group keeps each group's loads next to its dot products.
function kernel(name, strips, T) {
  const tokens = [...Array(T).keys()];
  const pairs = strips.flatMap((s) => tokens.map((t) => `${s}${t}`));
  const lines = [];
  const emit = (indent, text) => lines.push(' '.repeat(indent) + text);
  const activation = (t, offset) => `(v128.load offset=${kRecord * t + offset} align=1 (local.get $x))`;
  const low = '(v128.and (local.get $packed) (local.get $nibble))';
  const high = '(v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble))';

  emit(2, `(func $${name} (export "${name}")`);
  emit(4, `${strips.map((s) => `(param $w${s} i32)`).join(' ')} (param $x i32) (param $n_blocks i32) (param $acc i32) (param $consts i32)`);
  emit(4, '(local $packed v128) (local $dw v128) (local $nibble v128) (local $two_112 v128) (local $sign_exponent v128)');
  emit(4, pairs.map((p) => `(local $s${p} v128)`).join(' '));
  emit(4, pairs.map((p) => `(local $acc_${p} v128)`).join(' '));
  emit(4, '(if (i32.le_s (local.get $n_blocks) (i32.const 0)) (then (return)))');
  emit(4, '(local.set $nibble (v128.load offset=0 align=1 (local.get $consts)))');
  emit(4, '(local.set $two_112 (v128.load offset=16 align=1 (local.get $consts)))');
  emit(4, '(local.set $sign_exponent (v128.load offset=32 align=1 (local.get $consts)))');
  pairs.forEach((p, i) => emit(4, `(local.set $acc_${p} (v128.load offset=${16 * i} align=4 (local.get $acc)))`));
  emit(4, '(loop $blocks');
  for (let k = 0; k < 4; ++k) {
    emit(6, `;; group ${k}: elements ${4 * k}..${4 * k + 3} (low nibbles) and ${16 + 4 * k}..${19 + 4 * k} (high)`);
    for (const s of strips) {
      emit(6, `(local.set $packed (v128.load offset=${8 + 16 * k} align=1 (local.get $w${s})))`);
      for (const t of tokens) {
        const pair = `(i32x4.dot_i8x16_i7x16_add_s ${activation(t, 64 + 16 * k)} ${high}\n${' '.repeat(8)}` +
          `(i32x4.dot_i8x16_i7x16_add_s ${activation(t, 16 * k)} ${low} ` +
          (k === 0 ? `${activation(t, 128)}))` : '(v128.const i32x4 0 0 0 0)))');
        emit(6, k === 0 ? `(local.set $s${s}${t} ${pair})` : `(local.set $s${s}${t} (i32x4.add (local.get $s${s}${t}) ${pair}))`);
      }
    }
  }
  for (const s of strips) {
    emit(6, `;; strip ${s}: dw as in lf_q4_0_strip_relaxed, then acc = fma(f32(sumi), dw·dy, acc) per token`);
    emit(6, `(local.set $dw (f32x4.mul (v128.and (i32x4.shl (v128.load16x4_s align=1 (local.get $w${s})) (i32.const 13))`);
    emit(8, '(local.get $sign_exponent)) (local.get $two_112)))');
    for (const t of tokens) {
      emit(6, `(local.set $acc_${s}${t} (f32x4.relaxed_madd (f32x4.convert_i32x4_s (local.get $s${s}${t}))`);
      emit(8, `(f32x4.mul (local.get $dw) ${activation(t, 144)}) (local.get $acc_${s}${t})))`);
    }
  }
  emit(6, `(local.set $x (i32.add (local.get $x) (i32.const ${kRecord * T})))`);
  for (const s of strips) emit(6, `(local.set $w${s} (i32.add (local.get $w${s}) (i32.const 72)))`);
  emit(6, '(local.set $n_blocks (i32.sub (local.get $n_blocks) (i32.const 1)))');
  emit(6, '(br_if $blocks (local.get $n_blocks)))');
  pairs.forEach((p, i) => emit(4, `(v128.store offset=${16 * i} align=4 (local.get $acc) (local.get $acc_${p}))`));
  lines[lines.length - 1] += ')';
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
const kernels = [kernel('lf_q4_0_strips4_t1_relaxed', ['a', 'b', 'c', 'd'], 1)];
for (let T = 2; T <= kMaxTokens; ++T) kernels.push(kernel(`lf_q4_0_strips_t${T}_relaxed`, ['a', 'b'], T));
writeFileSync(outPath, source.replace(marker, () => kernels.join('\n\n') + '\n'));
