// A float64 forward pass of a synthetic Gemma GGUF, independent of the engine: its own GGUF
// reader, the weights dequantized to f64 and every activation kept in f64 (no Q8_0 activation
// rounding, no f16 K/V or f16 accumulation, exact GELU, exact softmax). It computes the model
// the file defines (docs/gemma-architecture.md, "Gemma 4 forward" and "Gemma 3") as closely as
// f64 allows, so that our distribution and llama.cpp's can each be measured against it where no
// implementation that is not llama.cpp's exact kernels can match llama.cpp bit for bit
// (docs/forward-pass.md, "Where agreement depends on the shape").
//
// Example:
//   const ref = F64Reference.open("build/models/tiny.gguf");
//   const lp = ref.nextTokenLogProbs([2, 10, 47]);   // Float64Array [n_vocab], natural log
import fs from "node:fs";

const GGUF_MAGIC = 0x46554747;  // "GGUF"
// ggml type id -> [block elements, block bytes]
const TYPES = {0: [1, 4], 1: [1, 2], 8: [32, 34], 2: [32, 18], 30: [1, 2]};
const NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 8: "Q8_0", 30: "BF16"};

function half(h) {
  const sign = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** The file's metadata and tensor table, and its tensors dequantized to f64 on demand. */
class Gguf {
  constructor(path) {
    this.bytes = fs.readFileSync(path);
    this.view = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
    this.pos = 0;
    if (this.u32() !== GGUF_MAGIC) throw new Error(`${path}: not a GGUF file`);
    this.u32();  // version
    const nTensors = Number(this.u64()), nKv = Number(this.u64());
    this.kv = new Map();
    for (let i = 0; i < nKv; i++) {
      const key = this.str();
      this.kv.set(key, this.value(this.u32()));
    }
    this.tensors = new Map();
    for (let i = 0; i < nTensors; i++) {
      const name = this.str(), nDims = this.u32();
      const ne = Array.from({length: nDims}, () => Number(this.u64()));
      const type = this.u32(), offset = Number(this.u64());
      this.tensors.set(name, {ne, type, offset});
    }
    const alignment = this.kv.get("general.alignment") ?? 32;
    this.dataOffset = Math.ceil(this.pos / alignment) * alignment;
    this.cache = new Map();
  }

  u32() { const v = this.view.getUint32(this.pos, true); this.pos += 4; return v; }
  u64() { const v = this.view.getBigUint64(this.pos, true); this.pos += 8; return v; }
  str() {
    const n = Number(this.u64());
    const s = this.bytes.toString("utf8", this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  value(type) {
    const v = this.view, p = this.pos;
    switch (type) {
      case 0: this.pos += 1; return v.getUint8(p);
      case 1: this.pos += 1; return v.getInt8(p);
      case 2: this.pos += 2; return v.getUint16(p, true);
      case 3: this.pos += 2; return v.getInt16(p, true);
      case 4: this.pos += 4; return v.getUint32(p, true);
      case 5: this.pos += 4; return v.getInt32(p, true);
      case 6: this.pos += 4; return v.getFloat32(p, true);
      case 7: this.pos += 1; return v.getUint8(p) !== 0;
      case 8: return this.str();
      case 9: {
        const itemType = this.u32(), n = Number(this.u64());
        return Array.from({length: n}, () => this.value(itemType));
      }
      case 10: this.pos += 8; return Number(v.getBigUint64(p, true));
      case 11: this.pos += 8; return Number(v.getBigInt64(p, true));
      case 12: this.pos += 8; return v.getFloat64(p, true);
      default: throw new Error(`GGUF value type ${type}`);
    }
  }

  has(name) { return this.tensors.has(name); }

  /** name -> {rows, cols, w: Float64Array [rows·cols]} (cols = ne[0], the contiguous axis) */
  tensor(name) {
    if (this.cache.has(name)) return this.cache.get(name);
    const t = this.tensors.get(name);
    if (!t) throw new Error(`no tensor ${name}`);
    const cols = t.ne[0], rows = t.ne.slice(1).reduce((a, b) => a * b, 1);
    if (!(t.type in TYPES)) throw new Error(`${name}: type ${t.type} is not one the reference reads`);
    const w = new Float64Array(rows * cols);
    const base = this.dataOffset + t.offset, v = this.view;
    for (let i = 0; i < rows * cols; i++) {
      switch (t.type) {
        case 0: w[i] = v.getFloat32(base + 4 * i, true); break;
        case 1: w[i] = half(v.getUint16(base + 2 * i, true)); break;
        case 30: w[i] = new Float32Array(new Uint32Array([v.getUint16(base + 2 * i, true) << 16]).buffer)[0]; break;
        case 8: {  // Q8_0: d, 32 int8
          const b = base + 34 * Math.floor(i / 32);
          w[i] = half(v.getUint16(b, true)) * v.getInt8(b + 2 + (i % 32));
          break;
        }
        case 2: {  // Q4_0: d, 16 bytes; element j < 16 the low nibble of byte j, j >= 16 the high one of j - 16
          const b = base + 18 * Math.floor(i / 32), j = i % 32;
          const byte = v.getUint8(b + 2 + (j % 16));
          w[i] = half(v.getUint16(b, true)) * ((j < 16 ? byte & 15 : byte >> 4) - 8);
          break;
        }
      }
    }
    const out = {rows, cols, w, type: NAMES[t.type]};
    this.cache.set(name, out);
    return out;
  }
}

// x [n] -> RMSNorm(x) ⊙ w (w null: no weight)
function rmsnorm(x, w, eps) {
  let ss = 0;
  for (const v of x) ss += v * v;
  const scale = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * scale * (w ? w[i] : 1));
}

// W [rows, cols] · x [cols] -> [rows]
function matvec(W, x) {
  const y = new Float64Array(W.rows);
  for (let r = 0; r < W.rows; r++) {
    let s = 0;
    const o = r * W.cols;
    for (let c = 0; c < W.cols; c++) s += W.w[o + c] * x[c];
    y[r] = s;
  }
  return y;
}

const gelu = (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * x * (1 + 0.044715 * x * x)));

export class F64Reference {
  static open(path) { return new F64Reference(new Gguf(path)); }

  constructor(gguf) {
    const g = gguf, arch = g.kv.get("general.architecture");
    if (arch !== "gemma4" && arch !== "gemma3") throw new Error(`architecture ${arch}`);
    const key = (k, d) => (g.kv.has(`${arch}.${k}`) ? g.kv.get(`${arch}.${k}`) : d);
    const perLayer = (v, il) => (Array.isArray(v) ? v[il] : v);
    this.g = g;
    this.arch = arch;
    this.nLayer = key("block_count");
    this.nEmbd = key("embedding_length");
    this.eps = key("attention.layer_norm_rms_epsilon");
    this.nSwa = key("attention.sliding_window", 0);
    this.softcap = arch === "gemma4" ? key("final_logit_softcapping", 30) : key("final_logit_softcapping", 0);
    const nHead = key("attention.head_count"), nHeadKv = key("attention.head_count_kv", nHead);
    const base = key("rope.freq_base", 10000), baseSwa = key("rope.freq_base_swa", 10000);
    const scaling = key("rope.scaling.factor", 1);
    this.layers = [];
    for (let il = 0; il < this.nLayer; il++) {
      let sliding, D, nRot;
      if (arch === "gemma4") {
        sliding = perLayer(key("attention.sliding_window_pattern"), il);
        D = sliding ? key("attention.key_length_swa") : key("attention.key_length");
        nRot = sliding ? key("rope.dimension_count_swa", key("rope.dimension_count", D)) : key("rope.dimension_count", D);
      } else {
        const period = key("attention.sliding_window_pattern", 6);
        sliding = this.nSwa > 0 && il % period < period - 1;
        D = key("attention.key_length", Math.floor(this.nEmbd / nHead));
        nRot = key("rope.dimension_count", D);
      }
      const p = `blk.${il}.`;
      this.layers.push({
        sliding, D, nRot,
        nHead: perLayer(nHead, il), nHeadKv: perLayer(nHeadKv, il),
        base: sliding ? baseSwa : base,
        freqScale: sliding ? 1 : (arch === "gemma4" ? 1 / scaling : 1 / scaling),
        freqFactors: arch === "gemma4" && !sliding && g.has("rope_freqs.weight") ? g.tensor("rope_freqs.weight").w : null,
        hasV: g.has(`${p}attn_v.weight`),
        outScale: g.has(`${p}layer_output_scale.weight`) ? g.tensor(`${p}layer_output_scale.weight`).w[0] : 1,
        // gemma3 scales q after RoPE; the 27B (62 layers) by n_embd / n_head, others by the head dim
        qScale: arch === "gemma3" ? 1 / Math.sqrt(this.nLayer === 62 ? Math.floor(this.nEmbd / perLayer(nHead, il)) : D) : 1,
      });
    }
    this.nVocab = g.tensor("token_embd.weight").rows;
  }

  // Rotate head h of x (NEOX pairs j, j + nRot/2) at position pos, in f64.
  rope(x, off, l, pos) {
    const half = l.nRot / 2;
    for (let j = 0; j < half; j++) {
      const ff = l.freqFactors ? l.freqFactors[j] : 1;
      const angle = l.freqScale * (pos * l.base ** (-2 * j / l.nRot)) / ff;
      const c = Math.cos(angle), s = Math.sin(angle);
      const x0 = x[off + j], x1 = x[off + j + half];
      x[off + j] = x0 * c - x1 * s;
      x[off + j + half] = x0 * s + x1 * c;
    }
  }

  /** tokens -> ln p of every token after the last one (Float64Array [n_vocab]) */
  nextTokenLogProbs(tokens) {
    const g = this.g, E = this.nEmbd, n = tokens.length;
    const embd = g.tensor("token_embd.weight");
    let x = tokens.map((t) => embd.w.slice(t * E, (t + 1) * E).map((v) => v * Math.sqrt(E)));
    for (let il = 0; il < this.nLayer; il++) {
      const l = this.layers[il], p = `blk.${il}.`, D = l.D;
      const W = (name) => g.tensor(p + name);
      const h = x.map((row) => rmsnorm(row, W("attn_norm.weight").w, this.eps));
      const q = [], k = [], v = [];
      for (let t = 0; t < n; t++) {
        const qt = matvec(W("attn_q.weight"), h[t]), kRaw = matvec(W("attn_k.weight"), h[t]);
        const vRaw = l.hasV ? matvec(W("attn_v.weight"), h[t]) : kRaw;
        const kt = new Float64Array(kRaw.length), vt = new Float64Array(vRaw.length);
        for (let hh = 0; hh < l.nHead; hh++) {
          qt.set(rmsnorm(qt.subarray(hh * D, (hh + 1) * D), W("attn_q_norm.weight").w, this.eps), hh * D);
          this.rope(qt, hh * D, l, t);
          for (let d = 0; d < D; d++) qt[hh * D + d] *= l.qScale;
        }
        for (let hh = 0; hh < l.nHeadKv; hh++) {
          kt.set(rmsnorm(kRaw.subarray(hh * D, (hh + 1) * D), W("attn_k_norm.weight").w, this.eps), hh * D);
          this.rope(kt, hh * D, l, t);
          const vh = vRaw.subarray(hh * D, (hh + 1) * D);
          vt.set(this.arch === "gemma4" ? rmsnorm(vh, null, this.eps) : vh, hh * D);
        }
        q.push(qt); k.push(kt); v.push(vt);
      }
      const next = [];
      for (let t = 0; t < n; t++) {
        const o = new Float64Array(l.nHead * D);
        for (let hh = 0; hh < l.nHead; hh++) {
          const kvh = Math.floor(hh / (l.nHead / l.nHeadKv));
          const scores = [];
          for (let j = 0; j <= t; j++) {
            if (l.sliding && t - j >= this.nSwa) continue;
            let s = 0;
            for (let d = 0; d < D; d++) s += q[t][hh * D + d] * k[j][kvh * D + d];
            scores.push([j, s]);
          }
          const m = Math.max(...scores.map(([, s]) => s));
          let z = 0;
          for (const e of scores) { e[1] = Math.exp(e[1] - m); z += e[1]; }
          for (const [j, w] of scores) for (let d = 0; d < D; d++) o[hh * D + d] += (w / z) * v[j][kvh * D + d];
        }
        const a = rmsnorm(matvec(W("attn_output.weight"), o), W("post_attention_norm.weight").w, this.eps);
        const x1 = x[t].map((xv, i) => xv + a[i]);
        const f = rmsnorm(x1, W("ffn_norm.weight").w, this.eps);
        const gate = matvec(W("ffn_gate.weight"), f), up = matvec(W("ffn_up.weight"), f);
        const act = gate.map((gv, i) => gelu(gv) * up[i]);
        const down = rmsnorm(matvec(W("ffn_down.weight"), act), W("post_ffw_norm.weight").w, this.eps);
        next.push(x1.map((xv, i) => (xv + down[i]) * l.outScale));
      }
      x = next;
    }
    const out = rmsnorm(x[n - 1], g.tensor("output_norm.weight").w, this.eps);
    const head = g.has("output.weight") ? g.tensor("output.weight") : embd;
    const logits = matvec(head, out);
    if (this.softcap) for (let i = 0; i < logits.length; i++) logits[i] = this.softcap * Math.tanh(logits[i] / this.softcap);
    let m = -Infinity;
    for (const z of logits) m = Math.max(m, z);
    let sum = 0;
    for (const z of logits) sum += Math.exp(z - m);
    const lse = m + Math.log(sum);
    return logits.map((z) => z - lse);
  }
}
