// A float64 forward pass of a synthetic Gemma GGUF, independent of the engine: its own GGUF
// reader, the weights dequantized to f64 and every activation kept in f64 (no Q8_0 activation
// rounding, no f16 K/V or f16 accumulation, GELU and softmax in f64). It computes the model the
// file defines (docs/gemma-architecture.md: "Gemma 4 forward", "Gemma 3", "E2B and E4B",
// "Mixture of experts") as closely as f64 allows, so that our distribution and llama.cpp's can
// each be measured against it where no implementation that is not llama.cpp's exact kernels can
// match llama.cpp bit for bit (docs/forward-pass.md, "Where agreement depends on the shape").
// The pieces: f64_reference/formats.mjs (block formats), gguf.mjs (on-demand tensor rows),
// ops.mjs (norm, GELU, softmax, RoPE), moe.mjs (routed experts).
//
// Example:
//   const ref = F64Reference.open("build/models/tiny.gguf");
//   const lp = ref.nextTokenLogProbs([2, 10, 47]);   // Float64Array [n_vocab], natural log
//   ref.close();
import {Gguf} from "./f64_reference/gguf.mjs";
import {routedExperts} from "./f64_reference/moe.mjs";
import {add, gelu, logSoftmax, rmsnorm, rope} from "./f64_reference/ops.mjs";

export class F64Reference {
  static open(path) { return new F64Reference(Gguf.open(path)); }

  constructor(gguf) {
    const g = gguf, arch = g.kv.get("general.architecture");
    if (arch !== "gemma4" && arch !== "gemma3") throw new Error(`${g.path}: architecture ${arch}`);
    const key = (k, d) => (g.kv.has(`${arch}.${k}`) ? g.kv.get(`${arch}.${k}`) : d);
    const perLayer = (v, il) => (Array.isArray(v) ? v[il] : v);
    this.g = g;
    this.arch = arch;
    this.nLayer = key("block_count");
    this.nEmbd = key("embedding_length");
    this.eps = key("attention.layer_norm_rms_epsilon");
    this.nSwa = key("attention.sliding_window", 0);
    this.softcap = arch === "gemma4" ? key("final_logit_softcapping", 30) : key("final_logit_softcapping", 0);
    this.nPerLayer = arch === "gemma4" ? key("embedding_length_per_layer_input", 0) : 0;
    const nHead = key("attention.head_count"), nHeadKv = key("attention.head_count_kv", nHead);
    const base = key("rope.freq_base", 10000), baseSwa = key("rope.freq_base_swa", 10000);
    const scaling = key("rope.scaling.factor", 1);
    // Layers from nKv on read the cache of the last earlier layer of their kind (sliding: nKv − 2,
    // global: nKv − 1) instead of computing K and V.
    const nKv = this.nLayer - (arch === "gemma4" ? key("attention.shared_kv_layers", 0) : 0);
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
        freqScale: sliding ? 1 : 1 / scaling,
        freqFactors: arch === "gemma4" && !sliding && g.has("rope_freqs.weight") ? g.vector("rope_freqs.weight") : null,
        kvSource: il < nKv ? il : nKv - (sliding ? 2 : 1),
        hasV: g.has(`${p}attn_v.weight`),
        outScale: g.has(`${p}layer_output_scale.weight`) ? g.vector(`${p}layer_output_scale.weight`)[0] : 1,
        // gemma3 scales q after RoPE; the 27B (62 layers) by n_embd / n_head, others by the head dim
        qScale: arch === "gemma3" ? 1 / Math.sqrt(this.nLayer === 62 ? Math.floor(this.nEmbd / perLayer(nHead, il)) : D) : 1,
        nExpertUsed: g.has(`${p}ffn_gate_inp.weight`) ? perLayer(key("expert_used_count"), il) : 0,
      });
    }
    this.nVocab = g.info("token_embd.weight").rows;
  }

  close() { this.g.close(); }

  /** tokens -> ln p of every token after the last one (Float64Array [n_vocab]) */
  nextTokenLogProbs(tokens) {
    const g = this.g, E = this.nEmbd, n = tokens.length;
    for (const t of tokens) {
      if (!Number.isInteger(t) || t < 0 || t >= this.nVocab) throw new Error(`token ${t} is not in the vocabulary of ${this.nVocab}`);
    }
    // x: one row [n_embd] per position still computed, `positions` their positions.
    let x = tokens.map((t) => g.row("token_embd.weight", t).map((v) => v * Math.sqrt(E)));
    let positions = tokens.map((_, i) => i);
    let perLayerIn = this.nPerLayer ? this.perLayerInputs(tokens, x) : null;
    const caches = [];
    for (let il = 0; il < this.nLayer; il++) {
      const l = this.layers[il], p = `blk.${il}.`;
      let h = x.map((row) => rmsnorm(row, g.vector(`${p}attn_norm.weight`), this.eps));
      if (l.kvSource === il) caches[il] = this.keysValues(l, p, h, positions);
      // Once no later layer computes K/V, only the last position's row reaches the head.
      if (!this.layers.slice(il + 1).some((m, i) => m.kvSource === il + 1 + i) && x.length > 1) {
        [x, h, positions] = [x.slice(-1), h.slice(-1), positions.slice(-1)];
        if (perLayerIn) perLayerIn = perLayerIn.slice(-1);
      }
      const o = this.attention(l, p, h, positions, caches[l.kvSource]);
      const a = g.matmul(`${p}attn_output.weight`, o).map((y) => rmsnorm(y, g.vector(`${p}post_attention_norm.weight`), this.eps));
      const x1 = x.map((row, t) => add(row, a[t]));
      let x2 = this.feedForward(l, p, x1);
      if (perLayerIn) x2 = this.perLayerBranch(p, x2, perLayerIn.map((inputs) => inputs[il]));
      x = x2.map((row) => row.map((v) => v * l.outScale));
    }
    const out = rmsnorm(x.at(-1), g.vector("output_norm.weight"), this.eps);
    const [logits] = g.matmul(g.has("output.weight") ? "output.weight" : "token_embd.weight", [out]);
    if (this.softcap) for (let i = 0; i < logits.length; i++) logits[i] = this.softcap * Math.tanh(logits[i] / this.softcap);
    return logSoftmax(logits);
  }

  // Per-layer embeddings: for each token, layer l's input [n_pl] =
  // (RMSNorm(slice l of per_layer_model_proj · x0 / sqrt(n_embd)) ⊙ per_layer_proj_norm
  //  + slice l of per_layer_token_embd[token] · sqrt(n_pl)) / sqrt(2).
  perLayerInputs(tokens, x0) {
    const g = this.g, nPl = this.nPerLayer;
    const proj = g.matmul("per_layer_model_proj.weight", x0);
    return tokens.map((token, t) => {
      const embd = g.row("per_layer_token_embd.weight", token);
      return this.layers.map((_, l) => {
        const q = rmsnorm(proj[t].subarray(l * nPl, (l + 1) * nPl).map((v) => v / Math.sqrt(this.nEmbd)),
                          g.vector("per_layer_proj_norm.weight"), this.eps);
        return q.map((v, j) => (v + embd[l * nPl + j] * Math.sqrt(nPl)) / Math.SQRT2);
      });
    });
  }

  // K and V of every position of h [n][n_embd]: k = RoPE(RMSNorm(Wk·h) ⊙ k_norm) per head;
  // v = Wv·h (gemma4 without attn_v: the K projection before its norm), RMSNorm'd per head
  // without weight on gemma4.
  keysValues(l, p, h, positions) {
    const g = this.g, D = l.D;
    const kRaw = g.matmul(`${p}attn_k.weight`, h);
    const vRaw = l.hasV ? g.matmul(`${p}attn_v.weight`, h) : kRaw;
    const k = [], v = [];
    positions.forEach((pos, t) => {
      const kt = new Float64Array(kRaw[t].length), vt = new Float64Array(vRaw[t].length);
      for (let hh = 0; hh < l.nHeadKv; hh++) {
        kt.set(rmsnorm(kRaw[t].subarray(hh * D, (hh + 1) * D), g.vector(`${p}attn_k_norm.weight`), this.eps), hh * D);
        rope(kt, hh * D, l, pos);
        const vh = vRaw[t].subarray(hh * D, (hh + 1) * D);
        vt.set(this.arch === "gemma4" ? rmsnorm(vh, null, this.eps) : vh, hh * D);
      }
      k[pos] = kt;
      v[pos] = vt;
    });
    return {k, v};
  }

  // Each row of h attends at its position over the cache's positions up to it (on a sliding
  // layer, the last n_swa of them): o [n_head·D] per row.
  attention(l, p, h, positions, cache) {
    const g = this.g, D = l.D;
    const q = g.matmul(`${p}attn_q.weight`, h);
    return positions.map((pos, t) => {
      const qt = q[t], o = new Float64Array(l.nHead * D);
      for (let hh = 0; hh < l.nHead; hh++) {
        qt.set(rmsnorm(qt.subarray(hh * D, (hh + 1) * D), g.vector(`${p}attn_q_norm.weight`), this.eps), hh * D);
        rope(qt, hh * D, l, pos);
        for (let d = 0; d < D; d++) qt[hh * D + d] *= l.qScale;
        const kvh = Math.floor(hh / (l.nHead / l.nHeadKv));
        const scores = [];
        for (let j = 0; j <= pos; j++) {
          if (l.sliding && pos - j >= this.nSwa) continue;
          let s = 0;
          for (let d = 0; d < D; d++) s += qt[hh * D + d] * cache.k[j][kvh * D + d];
          scores.push([j, s]);
        }
        const m = Math.max(...scores.map(([, s]) => s));
        let z = 0;
        for (const e of scores) { e[1] = Math.exp(e[1] - m); z += e[1]; }
        for (const [j, w] of scores) for (let d = 0; d < D; d++) o[hh * D + d] += (w / z) * cache.v[j][kvh * D + d];
      }
      return o;
    });
  }

  // x1 [n][n_embd] -> x1 + RMSNorm(y) ⊙ post_ffw_norm, y the GeGLU MLP of RMSNorm(x1) ⊙ ffn_norm;
  // on a MoE layer y = RMSNorm(MLP) ⊙ post_ffw_norm_1 + the routed experts' output.
  feedForward(l, p, x1) {
    const g = this.g;
    const f = x1.map((row) => rmsnorm(row, g.vector(`${p}ffn_norm.weight`), this.eps));
    const gate = g.matmul(`${p}ffn_gate.weight`, f), up = g.matmul(`${p}ffn_up.weight`, f);
    let y = g.matmul(`${p}ffn_down.weight`, gate.map((gv, t) => gv.map((v, i) => gelu(v) * up[t][i])));
    if (l.nExpertUsed) {
      const experts = routedExperts(g, p, x1, {eps: this.eps, nUsed: l.nExpertUsed});
      y = y.map((row, t) => add(rmsnorm(row, g.vector(`${p}post_ffw_norm_1.weight`), this.eps), experts[t]));
    }
    return x1.map((row, t) => add(row, rmsnorm(y[t], g.vector(`${p}post_ffw_norm.weight`), this.eps)));
  }

  // x2 + RMSNorm(proj · (gelu(inp_gate · x2) ⊙ inp)) ⊙ post_norm, inp the layer's per-layer input.
  perLayerBranch(p, x2, inputs) {
    const g = this.g;
    const gated = g.matmul(`${p}inp_gate.weight`, x2).map((y, t) => y.map((v, i) => gelu(v) * inputs[t][i]));
    return g.matmul(`${p}proj.weight`, gated).map((y, t) => add(x2[t], rmsnorm(y, g.vector(`${p}post_norm.weight`), this.eps)));
  }
}
