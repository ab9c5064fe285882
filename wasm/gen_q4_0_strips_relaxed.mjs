// Usage: node wasm/gen_q4_0_strips_relaxed.mjs IN.wat OUT.wat
//
// Writes OUT.wat: the hand-written kernels of IN.wat (src/kernels/q4_0_relaxed.wat) with, at its
// `;; @strips-kernels` line, the two-strip kernels lf_q4_0_strips_t{T}_relaxed for T = 1..8 tokens
// (docs/kernels.md, "Batched decode"). Each holds its 2·T running sums in locals for the whole
// call, which only a token count fixed per function allows; the functions differ only in T, so
// they are written by this one template instead of eight near-copies by hand.
//
// lf_q4_0_strips_t{T}_relaxed (wa, wb, x, x_stride, n_blocks, acc, consts):
//   W strips a and b (4 rows each in row strips, n_blocks blocks of 72 bytes from wa and wb) ·
//   T tokens (records of 160 bytes as pack_strip_activations writes them, token t of block b at
//   x + b·x_stride + 160·t) -> acc [2][T][4] f32 (strip a's tokens, then b's, lane = row),
//   continued: acc = acc + (sumi·dw)·dy block after block, vec_dot_ref's expression and order.
import { readFileSync, writeFileSync } from 'node:fs';

const kMaxTokens = 8;  // gemm_q4_0_q8_0.cpp's kStripsMaxTokens: it names each of these functions
const kRecord = 160;  // bytes of one token's block record
const kStrips = ['a', 'b'];

// The .wat text of the T-token kernel. Per block and group k of the 4 rows' quants, each strip's
// packed vector is unpacked just before its use and meets every token's two activation vectors:
// the unpacking is shared by all tokens; each activation vector is loaded once per strip (T > 1:
// locals holding them would be spilled) or once for both strips (T = 1). One token has two
// chains of dot products per strip (one from -8·Σa, one from 0), enough independent ones for
// the core. With more tokens each strip and token has one sum from -8·Σa, and each group's two
// dot products, chained from 0, are added to it: emcc's binaryen sinks a chain of single-use
// dot-adds into one expression whose operands, loads included, all come first, and V8 keeps the
// loads in that order, so a chain of 8 would hold 16 vectors at once (spilled; measured slower
// than the general kernel), while the add per group keeps each group's loads next to its dot
// products. The adds cost less than the spills.
function kernel(T) {
  const tokens = [...Array(T).keys()];
  const chains = T === 1 ? [0, 1] : [0];
  const sums = kStrips.flatMap((s) => tokens.flatMap((t) => chains.map((c) => `$s${s}${t}_${c}`)));
  const accs = kStrips.flatMap((s) => tokens.map((t) => `$acc_${s}${t}`));
  const shareLoads = T === 1;
  const lines = [];
  const emit = (indent, text) => lines.push(' '.repeat(indent) + text);
  const activation = (t, offset) => `(v128.load offset=${kRecord * t + offset} align=1 (local.get $x))`;

  emit(2, `(func $lf_q4_0_strips_t${T}_relaxed (export "lf_q4_0_strips_t${T}_relaxed")`);
  emit(4, '(param $wa i32) (param $wb i32) (param $x i32) (param $x_stride i32) (param $n_blocks i32)');
  emit(4, '(param $acc i32) (param $consts i32)');
  emit(4, '(local $packed v128) (local $h v128) (local $dw v128) (local $nibble v128) (local $two_112 v128)');
  if (shareLoads) emit(4, tokens.map((t) => `(local $x_lo${t} v128) (local $x_hi${t} v128)`).join(' '));
  emit(4, sums.map((s) => `(local ${s} v128)`).join(' '));
  emit(4, accs.map((a) => `(local ${a} v128)`).join(' '));
  emit(4, '(if (i32.le_s (local.get $n_blocks) (i32.const 0)) (then (return)))');
  emit(4, '(local.set $nibble (v128.load offset=0 align=1 (local.get $consts)))');
  emit(4, '(local.set $two_112 (v128.load offset=16 align=1 (local.get $consts)))');
  accs.forEach((a, i) => emit(4, `(local.set ${a} (v128.load offset=${16 * i} align=4 (local.get $acc)))`));
  emit(4, '(loop $blocks');
  for (const s of kStrips) {
    for (const t of tokens) {
      emit(6, `(local.set $s${s}${t}_0 ${activation(t, 128)})`);
      for (const c of chains.slice(1)) emit(6, `(local.set $s${s}${t}_${c} (v128.const i32x4 0 0 0 0))`);
    }
  }
  for (let k = 0; k < 4; ++k) {
    emit(6, `;; group ${k}: elements ${4 * k}..${4 * k + 3} (low nibbles) and ${16 + 4 * k}..${19 + 4 * k} (high)`);
    if (shareLoads) {
      for (const t of tokens) {
        emit(6, `(local.set $x_lo${t} ${activation(t, 16 * k)})`);
        emit(6, `(local.set $x_hi${t} ${activation(t, 64 + 16 * k)})`);
      }
    }
    for (const s of kStrips) {
      emit(6, `(local.set $packed (v128.load offset=${8 + 16 * k} align=1 (local.get $w${s})))`);
      for (const t of tokens) {
        const lo = shareLoads ? `(local.get $x_lo${t})` : activation(t, 16 * k);
        const hi = shareLoads ? `(local.get $x_hi${t})` : activation(t, 64 + 16 * k);
        const [cLo, cHi] = [chains[0], chains[chains.length - 1]];
        if (T === 1) {
          emit(6, `(local.set $s${s}${t}_${cLo} (i32x4.dot_i8x16_i7x16_add_s ${lo} (v128.and (local.get $packed) (local.get $nibble)) (local.get $s${s}${t}_${cLo})))`);
          emit(6, `(local.set $s${s}${t}_${cHi} (i32x4.dot_i8x16_i7x16_add_s ${hi} (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble)) (local.get $s${s}${t}_${cHi})))`);
        } else {
          emit(6, `(local.set $s${s}${t}_0 (i32x4.add (local.get $s${s}${t}_0) (i32x4.dot_i8x16_i7x16_add_s ${hi} (v128.and (i16x8.shr_u (local.get $packed) (i32.const 4)) (local.get $nibble)) (i32x4.dot_i8x16_i7x16_add_s ${lo} (v128.and (local.get $packed) (local.get $nibble)) (v128.const i32x4 0 0 0 0)))))`);
        }
      }
    }
  }
  for (const s of kStrips) {
    emit(6, `;; strip ${s}: dw as in lf_q4_0_strip_relaxed, then acc = acc + (f32(sumi)·dw)·dy per token`);
    emit(6, `(local.set $h (v128.load16x4_u align=1 (local.get $w${s})))`);
    emit(6, '(local.set $dw (v128.or');
    emit(8, '(f32x4.mul (i32x4.shr_u (i32x4.shl (local.get $h) (i32.const 17)) (i32.const 4)) (local.get $two_112))');
    emit(8, '(i32x4.shl (i32x4.shr_u (local.get $h) (i32.const 15)) (i32.const 31))))');
    for (const t of tokens) {
      const sumi = chains.length === 1 ? `(local.get $s${s}${t}_0)` : `(i32x4.add (local.get $s${s}${t}_0) (local.get $s${s}${t}_1))`;
      emit(6, `(local.set $acc_${s}${t} (f32x4.add (local.get $acc_${s}${t}) (f32x4.mul`);
      emit(8, `(f32x4.mul (f32x4.convert_i32x4_s ${sumi}) (local.get $dw)) ${activation(t, 144)})))`);
    }
  }
  emit(6, '(local.set $x (i32.add (local.get $x) (local.get $x_stride)))');
  emit(6, '(local.set $wa (i32.add (local.get $wa) (i32.const 72)))');
  emit(6, '(local.set $wb (i32.add (local.get $wb) (i32.const 72)))');
  emit(6, '(local.set $n_blocks (i32.sub (local.get $n_blocks) (i32.const 1)))');
  emit(6, '(br_if $blocks (local.get $n_blocks)))');
  accs.forEach((a, i) => emit(4, `(v128.store offset=${16 * i} align=4 (local.get $acc) (local.get ${a}))`));
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
  console.error(`${inPath}: no ";; @strips-kernels" line to put the two-strip kernels at`);
  process.exit(1);
}
const kernels = [];
for (let T = 1; T <= kMaxTokens; ++T) kernels.push(kernel(T));
writeFileSync(outPath, source.replace(marker, () => kernels.join('\n\n') + '\n'));
