// GGUF v3 writer (docs/gguf.md, "Container"). The layout is the one llama.cpp insists on when
// reading: tensors back to back in info order, each padded to the alignment, the blob starting
// aligned.
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf/gguf_writer.h"

namespace lf {

namespace {

constexpr uint32_t kDefaultAlignment = 32;

uint64_t padded(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

class Encoder {
 public:
  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // the host is little-endian (checked in gguf/gguf_reader.cpp)
    bytes.insert(bytes.end(), b, b + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void put_scalar(GgufType t, uint64_t u, int64_t i, double f) {
    switch (t) {
      case GgufType::UINT8: case GgufType::BOOL: put<uint8_t>(static_cast<uint8_t>(u)); return;
      case GgufType::INT8: put<int8_t>(static_cast<int8_t>(i)); return;
      case GgufType::UINT16: put<uint16_t>(static_cast<uint16_t>(u)); return;
      case GgufType::INT16: put<int16_t>(static_cast<int16_t>(i)); return;
      case GgufType::UINT32: put<uint32_t>(static_cast<uint32_t>(u)); return;
      case GgufType::INT32: put<int32_t>(static_cast<int32_t>(i)); return;
      case GgufType::UINT64: put<uint64_t>(u); return;
      case GgufType::INT64: put<int64_t>(i); return;
      case GgufType::FLOAT32: put<float>(static_cast<float>(f)); return;
      case GgufType::FLOAT64: put<double>(f); return;
      case GgufType::STRING: case GgufType::ARRAY: return;
    }
  }
  // The value without its type tag; arrays take their count from the element vector.
  void put_value(const GgufValue& v) {
    if (v.type == GgufType::STRING) return put_string(v.str);
    if (v.type != GgufType::ARRAY) return put_scalar(v.type, v.u64, v.i64, v.f64);
    put<uint32_t>(static_cast<uint32_t>(v.elem_type));
    switch (v.elem_type) {
      case GgufType::STRING:
        put<uint64_t>(v.strings.size());
        for (const std::string& s : v.strings) put_string(s);
        return;
      case GgufType::ARRAY:
        put<uint64_t>(v.arrays.size());
        for (const GgufValue& a : v.arrays) put_value(a);
        return;
      case GgufType::FLOAT32: case GgufType::FLOAT64:
        put<uint64_t>(v.floats.size());
        for (double f : v.floats) put_scalar(v.elem_type, 0, 0, f);
        return;
      default:
        put<uint64_t>(v.ints.size());
        for (int64_t i : v.ints) put_scalar(v.elem_type, static_cast<uint64_t>(i), i, 0);
        return;
    }
  }
  void pad_to(uint64_t align) { bytes.resize(padded(bytes.size(), align), 0); }

  std::vector<uint8_t> bytes;
};

GgufValue scalar(GgufType t) {
  GgufValue v;
  v.type = t;
  return v;
}

GgufValue array_of(GgufType elem, uint64_t count) {
  GgufValue v = scalar(GgufType::ARRAY);
  v.elem_type = elem;
  v.count = count;
  return v;
}

// Header, KV, tensor infos and the padding before the blob.
template <typename Tensors>
std::vector<uint8_t> encode_header(const std::vector<std::pair<std::string, GgufValue>>& kv,
                                   const Tensors& tensors, uint32_t alignment) {
  Encoder e;
  e.bytes.insert(e.bytes.end(), {'G', 'G', 'U', 'F'});
  e.put<uint32_t>(3);
  e.put<int64_t>(static_cast<int64_t>(tensors.size()));
  e.put<int64_t>(static_cast<int64_t>(kv.size()));
  for (const auto& [key, value] : kv) {
    e.put_string(key);
    e.put<uint32_t>(static_cast<uint32_t>(value.type));
    e.put_value(value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    e.put_string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) e.put<int64_t>(n);
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(offset);
    offset += padded(t.n_bytes, alignment);
  }
  if (!tensors.empty()) e.pad_to(alignment);
  return std::move(e.bytes);
}

// Streams the file to `sink` (a callable taking bytes, count and returning Status), holding
// at most one tensor's bytes in memory.
template <typename Tensors, typename Sink>
Status emit_file(const std::vector<std::pair<std::string, GgufValue>>& kv, const Tensors& tensors,
                 uint32_t alignment, Sink&& sink) {
  const std::vector<uint8_t> header = encode_header(kv, tensors, alignment);
  LF_RETURN_IF_ERROR(sink(header.data(), header.size()));
  for (const auto& t : tensors) {
    if (t.n_bytes > SIZE_MAX - alignment) {
      return Status(Code::resource_exhausted, "tensor '" + t.name + "' (" + std::to_string(t.n_bytes) +
                                                  " bytes) does not fit in this address space");
    }
    std::vector<uint8_t> data(static_cast<size_t>(padded(t.n_bytes, alignment)), 0);
    if (t.fill) t.fill(data.data(), t.n_bytes);  // no callback: a zero tensor
    LF_RETURN_IF_ERROR(sink(data.data(), data.size()));
  }
  return Status();
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  assert(alignment != 0 && (alignment & (alignment - 1)) == 0);
  if (alignment != kDefaultAlignment) set_u32("general.alignment", alignment);
}

void GgufWriter::set_value(std::string key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::set_u32(std::string key, uint32_t v) {
  GgufValue g = scalar(GgufType::UINT32);
  g.u64 = v;
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_i32(std::string key, int32_t v) {
  GgufValue g = scalar(GgufType::INT32);
  g.i64 = v;
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_f32(std::string key, float v) {
  GgufValue g = scalar(GgufType::FLOAT32);
  g.f64 = v;
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_bool(std::string key, bool v) {
  GgufValue g = scalar(GgufType::BOOL);
  g.u64 = v ? 1 : 0;
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_string(std::string key, std::string v) {
  GgufValue g = scalar(GgufType::STRING);
  g.str = std::move(v);
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_array_i32(std::string key, const std::vector<int32_t>& v) {
  GgufValue g = array_of(GgufType::INT32, v.size());
  g.ints.assign(v.begin(), v.end());
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_array_bool(std::string key, const std::vector<bool>& v) {
  GgufValue g = array_of(GgufType::BOOL, v.size());
  g.ints.assign(v.begin(), v.end());
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_array_f32(std::string key, const std::vector<float>& v) {
  GgufValue g = array_of(GgufType::FLOAT32, v.size());
  g.floats.assign(v.begin(), v.end());
  set_value(std::move(key), std::move(g));
}

void GgufWriter::set_array_string(std::string key, std::vector<std::string> v) {
  GgufValue g = array_of(GgufType::STRING, v.size());
  g.strings = std::move(v);
  set_value(std::move(key), std::move(g));
}

Status GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, FillFn fill) {
  if (name.empty()) return Status(Code::invalid_argument, "tensor name is empty");
  if (name.size() >= kGgufMaxTensorName) {
    return Status(Code::invalid_argument, "tensor name '" + name + "' is " + std::to_string(name.size()) +
                                              " bytes long; the limit is " + std::to_string(kGgufMaxTensorName - 1));
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) return Status(Code::invalid_argument, "duplicate tensor name '" + name + "'");
  }
  if (ne.empty() || ne.size() > 4) {
    return Status(Code::invalid_argument, "tensor '" + name + "' has " + std::to_string(ne.size()) +
                                              " dimensions; 1 to 4 are allowed");
  }
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) {
      return Status(Code::invalid_argument, "tensor '" + name + "' has ne[" + std::to_string(d) + "] = " +
                                                std::to_string(ne[d]) + " (negative)");
    }
  }
  TypeTraits tt;
  if (!type_traits(static_cast<uint32_t>(type), &tt)) {
    return Status(Code::invalid_argument, "tensor '" + name + "' has unknown ggml type " +
                                              std::to_string(static_cast<uint32_t>(type)));
  }
  if (ne[0] % tt.block_elems != 0) {
    return Status(Code::invalid_argument, "tensor '" + name + "' of type " + tt.name + " has ne[0] = " +
                                              std::to_string(ne[0]) + ", not a multiple of the block size " +
                                              std::to_string(tt.block_elems));
  }
  uint64_t n_bytes = row_bytes(tt, static_cast<uint64_t>(ne[0]));
  int64_t elems = ne[0];
  bool overflow = false;
  for (size_t d = 1; d < ne.size(); ++d) {
    overflow |= __builtin_mul_overflow(n_bytes, static_cast<uint64_t>(ne[d]), &n_bytes);
    overflow |= __builtin_mul_overflow(elems, ne[d], &elems);
  }
  if (overflow || n_bytes > UINT64_MAX - alignment_) {
    return Status(Code::invalid_argument, "tensor '" + name + "' is too large: its size overflows 64 bits");
  }
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), n_bytes, std::move(fill)});
  return Status();
}

Status GgufWriter::write_file(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status(Code::io_error, "cannot create '" + path + "': " + std::strerror(errno));
  Status s = emit_file(kv_, tensors_, alignment_, [&](const uint8_t* p, size_t n) {
    if (std::fwrite(p, 1, n, f) == n) return Status();
    return Status(Code::io_error, "cannot write to '" + path + "': " + std::strerror(errno));
  });
  if (std::fclose(f) != 0 && s.ok()) {
    s = Status(Code::io_error, "cannot finish writing '" + path + "': " + std::strerror(errno));
  }
  return s;
}

std::vector<uint8_t> GgufWriter::header_buffer() const { return encode_header(kv_, tensors_, alignment_); }

uint64_t GgufWriter::file_bytes() const {
  uint64_t bytes = header_buffer().size();
  for (const Tensor& t : tensors_) bytes += padded(t.n_bytes, alignment_);
  return bytes;
}

std::vector<uint8_t> GgufWriter::write_buffer() const {
  std::vector<uint8_t> out;
  Status s = emit_file(kv_, tensors_, alignment_, [&](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return Status();
  });
  assert(s.ok());  // only fails for tensors larger than the address space, which cannot be buffered
  (void)s;
  return out;
}

}  // namespace lf
