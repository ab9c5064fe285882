// Writes a handful of small valid GGUF files into argv[1] as the fuzzer's starting corpus:
// every scalar type, string and nested arrays, tensors of several types and alignments.
#include <cstdio>
#include <string>

#include "gguf/gguf_writer.h"

namespace {

lf::GgufValue scalar(lf::GgufType t, uint64_t u, int64_t i, double f) {
  lf::GgufValue v;
  v.type = t;
  v.u64 = u;
  v.i64 = i;
  v.f64 = f;
  return v;
}

lf::GgufValue int_array(lf::GgufType elem, std::vector<int64_t> ints) {
  lf::GgufValue v;
  v.type = lf::GgufType::ARRAY;
  v.elem_type = elem;
  v.count = ints.size();
  v.ints = std::move(ints);
  return v;
}

void fill_counting(uint8_t* dst, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(i * 7 + 3);
}

lf::GgufWriter all_scalars() {
  lf::GgufWriter w;
  w.set_value("u8", scalar(lf::GgufType::UINT8, 200, 0, 0));
  w.set_value("i8", scalar(lf::GgufType::INT8, 0, -100, 0));
  w.set_value("u16", scalar(lf::GgufType::UINT16, 60000, 0, 0));
  w.set_value("i16", scalar(lf::GgufType::INT16, 0, -30000, 0));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_f32("f32", 1e-6f);
  w.set_bool("bool", true);
  w.set_string("general.architecture", "gemma4");
  w.set_value("u64", scalar(lf::GgufType::UINT64, UINT64_MAX, 0, 0));
  w.set_value("i64", scalar(lf::GgufType::INT64, 0, INT64_MIN, 0));
  w.set_value("f64", scalar(lf::GgufType::FLOAT64, 0, 0, -0.1));
  return w;
}

lf::GgufWriter arrays() {
  lf::GgufWriter w;
  w.set_array_string("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "▁the", "a"});
  w.set_array_f32("tokenizer.ggml.scores", {0.0f, -1.5f, 2.25f, -3.0f, 0.5f});
  w.set_array_i32("gemma4.attention.head_count_kv", {16, 16, 4, 16});
  w.set_array_bool("gemma4.attention.sliding_window_pattern", {true, true, true, true, true, false});
  w.set_value("u64s", int_array(lf::GgufType::UINT64, {1, -1}));
  lf::GgufValue nested;
  nested.type = lf::GgufType::ARRAY;
  nested.elem_type = lf::GgufType::ARRAY;
  nested.arrays = {int_array(lf::GgufType::UINT8, {1, 2}), int_array(lf::GgufType::INT16, {-3})};
  nested.count = nested.arrays.size();
  w.set_value("nested", nested);
  return w;
}

lf::GgufWriter tensors(uint32_t alignment) {
  lf::GgufWriter w(alignment);
  w.set_string("general.architecture", "gemma3");
  w.set_u32("gemma3.block_count", 1);
  (void)w.add_tensor("token_embd.weight", lf::GgmlType::Q6_K, {256, 2}, fill_counting);
  (void)w.add_tensor("blk.0.attn_q.weight", lf::GgmlType::Q4_0, {64, 3}, fill_counting);
  (void)w.add_tensor("blk.0.attn_norm.weight", lf::GgmlType::F32, {5}, fill_counting);
  (void)w.add_tensor("blk.0.ffn_up.weight", lf::GgmlType::Q4_K, {256, 1}, fill_counting);
  (void)w.add_tensor("blk.0.ffn_down.weight", lf::GgmlType::BF16, {3, 2, 2}, fill_counting);
  (void)w.add_tensor("blk.0.attn_k.weight", lf::GgmlType::Q8_0, {32, 1, 1, 2}, fill_counting);
  (void)w.add_tensor("blk.0.attn_v.weight", lf::GgmlType::F16, {0, 4}, fill_counting);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output-dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::pair<const char*, lf::GgufWriter> files[] = {
      {"empty.gguf", lf::GgufWriter()},
      {"scalars.gguf", all_scalars()},
      {"arrays.gguf", arrays()},
      {"tensors_a32.gguf", tensors(32)},
      {"tensors_a64.gguf", tensors(64)},
      {"tensors_a16.gguf", tensors(16)},
  };
  for (const auto& [name, writer] : files) {
    const lf::Status s = writer.write_file(dir + "/" + name);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
  }
  return 0;
}
