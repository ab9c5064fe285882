// The routed half of a gemma4 mixture-of-experts FFN (docs/gemma-architecture.md, "Mixture of
// experts"; llama.cpp's gemma4 graph and build_moe_ffn). Only the experts some token chose are
// read, each once for all the tokens that chose it: the 26B-A4B shape has 128 experts of
// 2 × 704 + 704 rows of 2816 per layer, and a prompt uses a few dozen.
import {add, gelu, rmsnorm, softmax} from "./ops.mjs";

/**
 * Each token's k experts and their weights: softmax over the router logits, the k most likely in
 * descending order (ties to the lower index, as libstdc++'s sort of ≤ 16 keeps them), weights
 * renormalized over those k. ggml clamps that sum at 2^-14, which a sum of the k largest of E
 * probabilities (at least k/E) never reaches.
 * @example route([0.3, -1, 2], 2) // [{expert: 2, weight: 0.85…}, {expert: 0, weight: 0.15…}]
 */
export function route(logits, k) {
  const p = softmax(logits);
  const order = Array.from(p.keys()).sort((a, b) => p[b] - p[a] || a - b).slice(0, k);
  const sum = order.reduce((s, e) => s + p[e], 0);
  return order.map((e) => ({expert: e, weight: p[e] / sum}));
}

/**
 * x1 of each token [n_embd] (the residual stream after attention) -> the experts' output,
 * RMSNorm(Σ_j w_j · scale[e_j] · down_e_j · (gelu(gate_e_j · g) ⊙ up_e_j · g)) ⊙ post_ffw_norm_2,
 * with g = RMSNorm(x1) ⊙ pre_ffw_norm_2.
 * @example const o = routedExperts(gguf, "blk.0.", [x1], {eps: 1e-6, nUsed: 8});
 */
export function routedExperts(g, p, x1s, {eps, nUsed}) {
  const nEmbd = x1s[0].length;
  // The router reads x1 itself, normed without a weight, scaled by 1/sqrt(n_embd) and its own scale.
  const routerScale = g.vector(`${p}ffn_gate_inp.scale`);
  const r = x1s.map((x1) => rmsnorm(x1, null, eps).map((v, i) => (v / Math.sqrt(nEmbd)) * routerScale[i]));
  const choices = g.matmul(`${p}ffn_gate_inp.weight`, r).map((logits) => route(logits, nUsed));

  const inputs = x1s.map((x1) => rmsnorm(x1, g.vector(`${p}pre_ffw_norm_2.weight`), eps));
  const fused = g.has(`${p}ffn_gate_up_exps.weight`);
  const F = g.info(`${p}ffn_down_exps.weight`).cols;
  const downScale = g.has(`${p}ffn_down_exps.scale`) ? g.vector(`${p}ffn_down_exps.scale`) : null;
  const sums = x1s.map(() => new Float64Array(nEmbd));
  const users = new Map();  // expert -> [{token, weight}]
  choices.forEach((slots, token) => {
    for (const {expert, weight} of slots) users.set(expert, [...(users.get(expert) ?? []), {token, weight}]);
  });
  for (const [e, us] of users) {
    const gs = us.map((u) => inputs[u.token]);
    let gate, up;
    if (fused) {
      // expert e's 2F rows: its gate rows, then its up rows
      const both = g.matmul(`${p}ffn_gate_up_exps.weight`, gs, 2 * F * e, 2 * F);
      gate = both.map((y) => y.subarray(0, F));
      up = both.map((y) => y.subarray(F));
    } else {
      gate = g.matmul(`${p}ffn_gate_exps.weight`, gs, F * e, F);
      up = g.matmul(`${p}ffn_up_exps.weight`, gs, F * e, F);
    }
    const acts = gate.map((gv, i) => gv.map((v, j) => gelu(v) * up[i][j]));
    const ys = g.matmul(`${p}ffn_down_exps.weight`, acts, nEmbd * e, nEmbd);
    us.forEach(({token, weight}, i) => {
      const factor = weight * (downScale ? downScale[e] : 1);
      sums[token] = add(sums[token], ys[i].map((v) => v * factor));
    });
  }
  return sums.map((s) => rmsnorm(s, g.vector(`${p}post_ffw_norm_2.weight`), eps));
}
