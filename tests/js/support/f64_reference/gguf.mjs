// A GGUF file read on demand: the header once, tensor bytes only when a product needs them. The
// 31B- and 26B-A4B-shaped test files hold 0.5–1.3 GB of quantized weights, several GB as f64, so
// only small tensors are kept decoded; large ones are decoded row by row into one scratch row
// as they stream past (docs/gguf.md has the layout).
//
// Example:
//   const g = Gguf.open("build/models/tiny.gguf");
//   const [y] = g.matmul("blk.0.attn_q.weight", [x]);   // x [n_embd] -> y [n_head·D]
//   g.close();
import fs from "node:fs";

import {FORMATS} from "./formats.mjs";

const GGUF_MAGIC = 0x46554747;  // "GGUF"
const HEADER_CHUNK = 1 << 20;
// Tensors up to this many elements stay decoded (8 MB of f64): every norm and every matrix of
// the tiny models; nothing whose size grows with a 31B or 26B-A4B shape's width.
const CACHE_ELEMENTS = 1 << 20;
// Bytes of quantized rows read from the file at once.
const STREAM_BYTES = 8 << 20;

export class Gguf {
  static open(path) { return new Gguf(path); }

  constructor(path) {
    this.path = path;
    this.fd = fs.openSync(path, "r");
    this.size = fs.fstatSync(this.fd).size;
    this.buf = Buffer.alloc(0);
    this.pos = 0;
    if (this.u32() !== GGUF_MAGIC) throw new Error(`${path}: not a GGUF file`);
    this.u32();  // version
    const nTensors = Number(this.u64()), nKv = Number(this.u64());
    this.kv = new Map();
    for (let i = 0; i < nKv; i++) {
      const key = this.str();
      this.kv.set(key, this.value(this.u32()));
    }
    /** name -> {ne, type, offset, rows, cols, rowBytes}; cols = ne[0], the contiguous axis */
    this.tensors = new Map();
    for (let i = 0; i < nTensors; i++) {
      const name = this.str(), nDims = this.u32();
      const ne = Array.from({length: nDims}, () => Number(this.u64()));
      const type = this.u32(), offset = Number(this.u64());
      const f = FORMATS[type];
      if (!f) throw new Error(`${path}: ${name} has ggml type ${type}, not one the reference reads`);
      const cols = ne[0], rows = ne.slice(1).reduce((a, b) => a * b, 1);
      if (cols % f.block) throw new Error(`${path}: ${name} rows of ${cols} do not fill ${f.name} blocks of ${f.block}`);
      this.tensors.set(name, {ne, type, offset, rows, cols, rowBytes: (cols / f.block) * f.bytes});
    }
    const alignment = this.kv.get("general.alignment") ?? 32;
    this.dataOffset = Math.ceil(this.pos / alignment) * alignment;
    for (const [name, t] of this.tensors) {
      if (this.dataOffset + t.offset + t.rows * t.rowBytes > this.size) throw new Error(`${path}: ${name} runs past the end of the file`);
    }
    this.buf = null;
    this.cache = new Map();
  }

  close() { fs.closeSync(this.fd); }

  // The header is parsed from a buffer that grows from the file as the cursor needs it.
  need(n) {
    if (this.pos + n <= this.buf.length) return;
    if (this.pos + n > this.size) throw new Error(`${this.path}: header runs past the end of the file`);
    const next = Buffer.alloc(Math.min(2 * Math.max(this.pos + n, this.buf.length + HEADER_CHUNK), this.size));
    fs.readSync(this.fd, next, 0, next.length, 0);
    this.buf = next;
  }
  u32() { this.need(4); const v = this.buf.readUInt32LE(this.pos); this.pos += 4; return v; }
  u64() { this.need(8); const v = this.buf.readBigUInt64LE(this.pos); this.pos += 8; return v; }
  str() {
    const n = Number(this.u64());
    this.need(n);
    const s = this.buf.toString("utf8", this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  value(type) {
    const sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8};
    if (type === 8) return this.str();
    if (type === 9) {
      const itemType = this.u32(), n = Number(this.u64());
      return Array.from({length: n}, () => this.value(itemType));
    }
    if (!(type in sizes)) throw new Error(`${this.path}: GGUF value type ${type}`);
    this.need(sizes[type]);
    const b = this.buf, p = this.pos;
    this.pos += sizes[type];
    switch (type) {
      case 0: return b.readUInt8(p);
      case 1: return b.readInt8(p);
      case 2: return b.readUInt16LE(p);
      case 3: return b.readInt16LE(p);
      case 4: return b.readUInt32LE(p);
      case 5: return b.readInt32LE(p);
      case 6: return b.readFloatLE(p);
      case 7: return b.readUInt8(p) !== 0;
      case 10: return Number(b.readBigUInt64LE(p));
      case 11: return Number(b.readBigInt64LE(p));
      default: return b.readDoubleLE(p);
    }
  }

  has(name) { return this.tensors.has(name); }

  info(name) {
    const t = this.tensors.get(name);
    if (!t) throw new Error(`${this.path}: no tensor ${name}`);
    return t;
  }

  /** A small tensor, decoded whole: Float64Array [rows·cols] (norms, scales, rope factors). */
  vector(name) {
    const t = this.info(name);
    if (t.rows * t.cols > CACHE_ELEMENTS) throw new Error(`${name}: too large to decode whole; stream its rows`);
    if (!this.cache.has(name)) {
      const bytes = Buffer.alloc(t.rows * t.rowBytes);
      fs.readSync(this.fd, bytes, 0, bytes.length, this.dataOffset + t.offset);
      const w = new Float64Array(t.rows * t.cols);
      FORMATS[t.type].decode(bytes, 0, w, w.length);
      this.cache.set(name, w);
    }
    return this.cache.get(name);
  }

  /** Calls fn(r, row) for rows start .. start+count-1, row a Float64Array [cols] valid during the call. */
  forRows(name, start, count, fn) {
    const t = this.info(name);
    if (start < 0 || start + count > t.rows) throw new Error(`${name}: rows ${start}..${start + count} outside its ${t.rows}`);
    if (t.rows * t.cols <= CACHE_ELEMENTS) {
      const w = this.vector(name);
      for (let r = 0; r < count; r++) fn(r, w.subarray((start + r) * t.cols, (start + r + 1) * t.cols));
      return;
    }
    const per = Math.max(1, Math.floor(STREAM_BYTES / t.rowBytes));
    const bytes = Buffer.alloc(Math.min(per, count) * t.rowBytes), row = new Float64Array(t.cols);
    for (let r0 = 0; r0 < count; r0 += per) {
      const n = Math.min(per, count - r0);
      fs.readSync(this.fd, bytes, 0, n * t.rowBytes, this.dataOffset + t.offset + (start + r0) * t.rowBytes);
      for (let i = 0; i < n; i++) {
        FORMATS[t.type].decode(bytes, i * t.rowBytes, row, t.cols);
        fn(r0 + i, row);
      }
    }
  }

  /** Row r of a matrix as a new Float64Array [cols] (an embedding lookup). */
  row(name, r) {
    let out;
    this.forRows(name, r, 1, (_, row) => { out = Float64Array.from(row); });
    return out;
  }

  /**
   * W rows [start, start+count) · each x [cols] -> one y [count] per x. Each row is decoded once
   * for all the xs, so a prompt's tokens share the decoding.
   */
  matmul(name, xs, start = 0, count = this.info(name).rows - start) {
    const ys = xs.map(() => new Float64Array(count));
    this.forRows(name, start, count, (r, row) => {
      // Four inputs per pass, so each weight is loaded once for four products (the products
      // dominate the reference's time).
      let i = 0;
      for (; i + 4 <= xs.length; i += 4) {
        const [x0, x1, x2, x3] = xs.slice(i, i + 4);
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let c = 0; c < row.length; c++) {
          const w = row[c];
          s0 += w * x0[c]; s1 += w * x1[c]; s2 += w * x2[c]; s3 += w * x3[c];
        }
        ys[i][r] = s0; ys[i + 1][r] = s1; ys[i + 2][r] = s2; ys[i + 3][r] = s3;
      }
      for (; i < xs.length; i++) {
        const x = xs[i];
        let s = 0;
        for (let c = 0; c < row.length; c++) s += row[c] * x[c];
        ys[i][r] = s;
      }
    });
    return ys;
  }
}
