// Usage: node wasm/patch_relaxed_ops.mjs (--object | --module) FILE.wasm|FILE.o WAT_SOURCE
//
// Carries the relaxed-SIMD instructions of src/kernels/relaxed_simd.wat through Emscripten
// 3.1.6's link. Its binaryen 108 numbers the relaxed opcodes as the proposal once did:
//   i32x4.relaxed_dot_i8x16_i7x16_add_s, final 0xFD 0x113: to binaryen a two-operand i16x8 dot
//     (it drops an operand and writes a function V8 rejects); its own number is 0x114;
//   f32x4.relaxed_madd, final 0xFD 0x105: unknown to binaryen; its own number is 0xAF.
// Every number encodes in 2 bytes after the prefix, so the instructions cross the link by
// renumbering them in place:
//   --object  wat2wasm's object file: final -> binaryen's, before wasm-ld and binaryen
//   --module  the linked module:      binaryen's -> final, after them
// Instructions are decoded one by one through every function body, so only opcodes are
// rewritten, never an immediate that happens to hold the same bytes. The count rewritten of each
// must equal the instructions written in the .wat (outside comments) or the file is deleted and
// the build fails, so a module whose kernel binaryen changed can never load half-patched.
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';

// name as wat2wasm 1.0.32 spells it, final opcode, binaryen 108's opcode
const OPS = [
  { name: 'i32x4.dot_i8x16_i7x16_add_s', final: 0x113, binaryen: 0x114 },
  { name: 'f32x4.relaxed_madd', final: 0x105, binaryen: 0xaf },
];

const [mode, file, watPath] = process.argv.slice(2);
if ((mode !== '--object' && mode !== '--module') || !file || !watPath) {
  console.error('usage: node patch_relaxed_ops.mjs (--object | --module) FILE WAT_SOURCE');
  process.exit(2);
}
// sub-opcode -> [the op, its new number]
const RENUMBER = new Map(OPS.map((op) => mode === '--object' ? [op.final, [op, op.binaryen]] : [op.binaryen, [op, op.final]]));
const watCode = readFileSync(watPath, 'utf8').replace(/;;.*$/gm, '');
const expected = new Map(OPS.map((op) => [op, watCode.split(op.name).length - 1]));
const bytes = readFileSync(file);

function fail(message) {
  console.error(`${file}: ${message}`);
  unlinkSync(file);  // so that the next build makes it again instead of keeping it
  process.exit(1);
}

// A cursor over the bytes with the readers the instruction encodings need
class Reader {
  constructor(buf, pos) { this.buf = buf; this.pos = pos; }
  byte() { return this.buf[this.pos++]; }
  leb() {  // unsigned or signed: only its length matters here, except for sub-opcodes and counts
    let value = 0, shift = 0, byte;
    do {
      byte = this.byte();
      if (shift < 35) value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return value;
  }
  skip(n) { this.pos += n; }
  memarg() { this.leb(); this.leb(); }
}

// Immediates of the 0xFD (SIMD) instructions by sub-opcode
function simdImmediates(r, op) {
  if (op <= 0x0b || op === 0x5c || op === 0x5d) return r.memarg();  // loads, stores, load_zero
  if (op === 0x0c || op === 0x0d) return r.skip(16);                 // v128.const, i8x16.shuffle
  if (op >= 0x15 && op <= 0x22) return r.skip(1);                    // extract / replace lane
  if (op >= 0x54 && op <= 0x5b) { r.memarg(); r.skip(1); }           // load / store lane
}

// Immediates of the 0xFC (misc) instructions by sub-opcode
function miscImmediates(r, op) {
  if (op <= 0x07) return;                                   // saturating truncations
  if (op === 0x08) { r.leb(); r.skip(1); return; }          // memory.init
  if (op === 0x09 || op === 0x0d || (op >= 0x0f && op <= 0x11)) return void r.leb();
  if (op === 0x0a) return r.skip(2);                        // memory.copy
  if (op === 0x0b) return r.skip(1);                        // memory.fill
  if (op === 0x0c || op === 0x0e) { r.leb(); r.leb(); return; }  // table.init, table.copy
  throw new Error(`unknown 0xFC sub-opcode ${op}`);
}

// One instruction at r; returns [position, sub-opcode] of a 0xFD instruction, else null
function instruction(r) {
  const op = r.byte();
  if (op === 0xfd) {
    const at = r.pos;
    const sub = r.leb();
    simdImmediates(r, sub);
    return [at, sub];
  }
  if (op === 0xfc) miscImmediates(r, r.leb());
  else if (op === 0xfe) {                                   // atomics: memarg, but fence
    if (r.leb() === 0x03) r.skip(1); else r.memarg();
  } else if ((op >= 0x02 && op <= 0x04) || op === 0x06) {  // block, loop, if, try: a block type
    const t = r.buf[r.pos];
    if (t === 0x40 || (t >= 0x6f && t <= 0x7f)) r.skip(1); else r.leb();
  } else if (op === 0x0c || op === 0x0d || op === 0x10 || (op >= 0x20 && op <= 0x26) || (op >= 0x07 && op <= 0x09) ||
             op === 0x18 || op === 0xd0 || op === 0xd2) {
    r.leb();  // br, br_if, call, locals, globals, tables, catch / throw / rethrow / delegate, refs
  } else if (op === 0x0e) { const n = r.leb(); for (let i = 0; i <= n; ++i) r.leb(); }  // br_table
  else if (op === 0x11) { r.leb(); r.leb(); }               // call_indirect
  else if (op === 0x1c) { const n = r.leb(); r.skip(n); }   // typed select
  else if (op >= 0x28 && op <= 0x3e) r.memarg();            // loads, stores
  else if (op === 0x3f || op === 0x40) r.skip(1);           // memory.size, memory.grow
  else if (op === 0x41 || op === 0x42) r.leb();             // i32.const, i64.const
  else if (op === 0x43) r.skip(4);
  else if (op === 0x44) r.skip(8);
  else if (op > 0xc4 && op !== 0xd1) throw new Error(`unknown opcode 0x${op.toString(16)}`);
  return null;
}

// Every function body of the code section (id 10): renumber by RENUMBER, return the counts
function renumber(buf) {
  if (buf.readUInt32LE(0) !== 0x6d736100) fail('not a wasm binary');
  for (const r = new Reader(buf, 8); r.pos < buf.length;) {
    const id = r.byte(), size = r.leb(), end = r.pos + size;
    if (id !== 10) { r.pos = end; continue; }
    const counts = new Map(OPS.map((op) => [op, 0]));
    for (let n = r.leb(); n > 0; --n) {
      const bodySize = r.leb(), bodyEnd = r.pos + bodySize;
      for (let groups = r.leb(); groups > 0; --groups) { r.leb(); r.skip(1); }  // locals
      while (r.pos < bodyEnd) {
        const simd = instruction(r);
        if (!simd || !RENUMBER.has(simd[1])) continue;
        const [op, to] = RENUMBER.get(simd[1]);
        if (r.pos - simd[0] !== 2) fail(`a 0x${simd[1].toString(16)} opcode not in 2 bytes`);
        buf[simd[0]] = 0x80 | (to & 0x7f);
        buf[simd[0] + 1] = to >> 7;
        counts.set(op, counts.get(op) + 1);
      }
      if (r.pos !== bodyEnd) fail('a function body did not decode to its end');
    }
    return counts;
  }
  fail('no code section');
}

let patched;
try {
  patched = renumber(bytes);
} catch (e) {
  fail(e.message);
}
for (const op of OPS) {
  if (patched.get(op) !== expected.get(op)) {
    fail(`${patched.get(op)} ${op.name} renumbered, ${watPath} has ${expected.get(op)}: binaryen changed the kernel?`);
  }
}
writeFileSync(file, bytes);
console.log(`${file}: ${OPS.map((op) => `${patched.get(op)} ${op.name}`).join(', ')} renumbered (${mode.slice(2)})`);
