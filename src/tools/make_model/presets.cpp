#include "presets.h"

#include <sstream>

namespace lf::make_model {
namespace {

// Every ne0 of every matrix is a multiple of 32 so each preset also works with Q4_0/Q8_0.
// Options a preset leaves out keep default_model() and MakeSettings' defaults: gemma4, 2 layers
// SG, n_embd 64, 4 heads, kv 2/1, head dims 32/64, n_ff 128, window 4, 1024 synthetic tokens, Q4_0.
const Preset kPresets[] = {
    {"tiny", "gemma4, 2 layers SG, n_embd 64, 4 heads, kv 2/1, head dims 32/64, n_ff 128, window 4, 1024 synthetic tokens, Q4_0",
     nullptr, "--ctx 512"},
    {"tiny-gemma3", "gemma3, 3 layers SSG (period 3), n_embd 64, 4 heads, kv 2, head dim 32, n_ff 128, window 4, 1024 synthetic tokens, Q4_0",
     nullptr, "--arch gemma3 --n-layer 3 --swa-period 3 --n-head-kv 2 --head-dim 32 --ctx 512"},
    {"small", "gemma4, 6 layers SSSSSG, n_embd 256, 8 heads, kv 4/1, head dims 64/128, n_ff 1024, window 16, 2048 synthetic tokens, Q4_0",
     nullptr,
     "--n-layer 6 --n-embd 256 --n-head 8 --n-head-kv-swa 4 --n-head-kv-global 1 --head-dim-swa 64 --head-dim-global 128 "
     "--n-ff 1024 --sliding-window 16 --n-vocab 2048 --ctx 1024"},
    {"31b-shape", "gemma4 with gemma-4-31B layer shapes (n_embd 5376, 32 heads, kv 16/4, head dims 256/512, n_ff 21504, window 1024, no V on global layers), 2 layers SG (--n-layer 6 for SSSSSG), 4096 synthetic tokens, Q4_0",
     nullptr,
     "--n-embd 5376 --n-head 32 --n-head-kv-swa 16 --n-head-kv-global 4 --head-dim-swa 256 --head-dim-global 512 "
     "--n-ff 21504 --sliding-window 1024 --n-vocab 4096 --ctx 4096"},
    // E2B (docs/gemma-architecture.md, "E2B and E4B"): 35 layers of period 5, the last 20
    // sharing KV, double-wide FFN on those. Seven layers keep the period and the sharing rule:
    // SSSSG with K/V, then S (reads layer 3) and G (reads layer 4).
    {"e2b-shape", "gemma4 with gemma-4-E2B layer shapes (n_embd 1536, 8 heads, kv 1, head dims 256/512, n_ff 6144, 12288 on shared-KV layers, window 512, per-layer input 256, no V on global layers), 7 layers SSSSGSG, the last 2 shared-KV, 2048 synthetic tokens, Q4_0",
     nullptr,
     "--n-layer 7 --swa-period 5 --n-embd 1536 --n-head 8 --n-head-kv 1 --head-dim-swa 256 --head-dim-global 512 "
     "--n-ff 6144 --double-wide-shared --sliding-window 512 --n-embd-per-layer 256 --shared-kv-layers 2 "
     "--n-vocab 2048 --ctx 1024"},
    // E4B: 42 layers of period 6, the last 18 sharing KV, one FFN width. Eight layers: SSSSSG
    // with K/V, then S (reads layer 4) and G (reads layer 5).
    {"e4b-shape", "gemma4 with gemma-4-E4B layer shapes (n_embd 2560, 8 heads, kv 2, head dims 256/512, n_ff 10240, window 512, per-layer input 256, no V on global layers), 8 layers SSSSSGSG, the last 2 shared-KV, 2048 synthetic tokens, Q4_0",
     nullptr,
     "--n-layer 8 --swa-period 6 --n-embd 2560 --n-head 8 --n-head-kv 2 --head-dim-swa 256 --head-dim-global 512 "
     "--n-ff 10240 --sliding-window 512 --n-embd-per-layer 256 --shared-kv-layers 2 --n-vocab 2048 --ctx 1024"},
    {"tiny-shared-kv1", "tiny with per-layer input 32, 4 layers SSGG, the last one shared-KV (reads layer 2), FFN widths 128,192,256,160",
     nullptr,
     "--n-layer 4 --swa-pattern SSGG --n-embd-per-layer 32 --shared-kv-layers 1 --n-ff-layers 128,192,256,160 --ctx 512"},
    {"tiny-shared-kv2", "tiny with per-layer input 32, 5 layers SSGSG, the last two shared-KV (layer 3 reads 1, layer 4 reads 2), double-wide FFN (256) on them",
     nullptr, "--n-layer 5 --swa-pattern SSGSG --n-embd-per-layer 32 --shared-kv-layers 2 --double-wide-shared --ctx 512"},
    {"26b-a4b-shape", "gemma4 with gemma-4-26B-A4B layer shapes (n_embd 2816, 16 heads, kv 8/2, head dims 256/512, shared MLP 2112, 128 experts of width 704 with 8 used, fused gate/up, window 1024, no V on global layers), 2 layers SG (--n-layer 6 for SSSSSG), 4096 synthetic tokens, Q4_0",
     nullptr,
     "--n-embd 2816 --n-head 16 --n-head-kv-swa 8 --n-head-kv-global 2 --head-dim-swa 256 --head-dim-global 512 "
     "--n-ff 2112 --n-expert 128 --n-expert-used 8 --n-ff-exp 704 --sliding-window 1024 --n-vocab 4096 --ctx 4096"},
    // A dynamic-quant mix as published for this model: 4-5 bit experts, 6-8 bit attention and
    // shared MLP. Rows of 704 (ffn_down_exps) and 2112 (ffn_down) hold no 256-blocks, so those are
    // Q8_0, what llama-quantize falls back to when asked for Q6_K there.
    {"26b-a4b-mixed", "26b-a4b-shape's layers in a dynamic K-quant mix: experts' gate/up Q4_K (layer 0 Q5_K), ffn_down_exps Q8_0, attn_q/attn_k Q6_K, attn_v Q8_0, attn_output Q5_K, shared MLP Q8_0, token_embd Q6_K",
     "26b-a4b-shape",
     "--type Q4_K --tensor-type token_embd=Q6_K --tensor-type attn_q=Q6_K --tensor-type attn_k=Q6_K "
     "--tensor-type attn_v=Q8_0 --tensor-type attn_output=Q5_K --tensor-type ffn_gate=Q8_0 --tensor-type ffn_up=Q8_0 "
     "--tensor-type ffn_down=Q8_0 --tensor-type ffn_down_exps=Q8_0 --tensor-type blk.0.ffn_gate_up_exps=Q5_K"},
    // Widths of 256-multiples so every matrix can be a K-quant; 5 experts, 2 used, separate gate
    // and up in different types.
    {"moe-kquant", "gemma4, 3 layers SSG, n_embd 256, 4 heads, kv 2/1, head dims 64/128, shared MLP 768, 5 experts of width 512, 2 used, separate gate/up, per-expert down scale; experts' gate Q4_K, up Q5_K, down Q6_K, attention Q5_K, attn_output Q6_K, shared MLP Q8_0 with ffn_down Q4_K, token_embd Q6_K",
     nullptr,
     "--n-layer 3 --swa-period 3 --n-embd 256 --head-dim-swa 64 --head-dim-global 128 --n-ff 768 --ctx 512 "
     "--n-expert 5 --n-expert-used 2 --n-ff-exp 512 --separate-gate-up --type Q5_K --tensor-type token_embd=Q6_K "
     "--tensor-type attn_output=Q6_K --tensor-type ffn_gate=Q8_0 --tensor-type ffn_up=Q8_0 --tensor-type ffn_down=Q4_K "
     "--tensor-type ffn_gate_exps=Q4_K --tensor-type ffn_up_exps=Q5_K --tensor-type ffn_down_exps=Q6_K"},
    {"tiny-kquant", "gemma4, 2 layers SG, n_embd 256, 4 heads, kv 2/1, head dims 64/128, n_ff 768, window 4, 1024 synthetic tokens, Q4_K_M-like: Q4_K, token_embd and attn_v Q6_K, ffn_down Q5_K, attn_output Q8_0",
     nullptr,
     "--n-embd 256 --head-dim-swa 64 --head-dim-global 128 --n-ff 768 --ctx 512 --type Q4_K --tensor-type token_embd=Q6_K "
     "--tensor-type attn_v=Q6_K --tensor-type ffn_down=Q5_K --tensor-type attn_output=Q8_0"},
    {"moe-tiny", "tiny with experts: 7 experts of width 96, 3 used, fused gate/up, per-expert down scale",
     nullptr, "--ctx 512 --n-expert 7 --n-expert-used 3 --n-ff-exp 96"},
    {"moe-top1", "tiny with experts: 5 experts of width 160, 1 used, separate gate and up, no down scale",
     nullptr, "--ctx 512 --n-expert 5 --n-expert-used 1 --n-ff-exp 160 --separate-gate-up --no-down-exps-scale"},
    {"moe-wide", "gemma4, 3 layers SSG, n_embd 96, shared MLP 160, 20 experts of width 224, 6 used, separate gate and up, per-expert down scale",
     nullptr,
     "--n-layer 3 --swa-period 3 --n-embd 96 --n-ff 160 --ctx 512 --n-expert 20 --n-expert-used 6 --n-ff-exp 224 "
     "--separate-gate-up"},
    {"gemma-vocab", "tiny with the real Gemma vocabulary (262144 tokens from --tokenizer-json)",
     nullptr, "--vocab gemma --n-vocab 262144 --ctx 512"},
    {"gemma4-vocab", "tiny with the real Gemma 4 vocabulary and chat template (262144 tokens from --vocab-gguf, llama.cpp's models/ggml-vocab-gemma-4.gguf)",
     nullptr, "--vocab gguf --n-vocab 262144 --ctx 512"},
};

}  // namespace

std::span<const Preset> presets() { return kPresets; }

const Preset* find_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::vector<std::string> preset_args(const Preset& preset) {
  std::vector<std::string> args;
  if (preset.base != nullptr) args = preset_args(*find_preset(preset.base));
  std::istringstream words(preset.options);
  for (std::string word; words >> word;) args.push_back(word);
  return args;
}

std::string presets_text() {
  std::string text;
  for (const Preset& p : kPresets) text += std::string(p.name) + "\t" + p.summary + "\n";
  return text;
}

}  // namespace lf::make_model
