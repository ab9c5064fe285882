// GGUF v3 parser (docs/gguf.md, "Container"). Validates what llama.cpp's gguf_init_from_file validates, on a
// byte prefix: every count is checked against the bytes that could exist before anything is
// allocated, so a hostile header costs an error message, not memory.
#include <bit>
#include <cstring>
#include <string>
#include <unordered_set>

#include "gguf/gguf_reader.h"

namespace lf {

static_assert(std::endian::native == std::endian::little, "GGUF fields are read by memcpy");

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;  // llama.cpp allows none; bounded so the recursion is bounded
// Key length, type, 1-byte value; an empty key is counted so that it gets its own message.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kMinNestedArrayBytes = 4 + 8;         // elem_type, count

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

// Bytes of one scalar element; 0 for STRING and ARRAY, whose size is not fixed.
uint64_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

bool is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }
bool is_signed(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 || t == GgufType::INT64;
}

// Decodes one little-endian scalar of type t at p (scalar_bytes(t) bytes).
void decode_scalar(GgufType t, const uint8_t* p, uint64_t* u, int64_t* i, double* f) {
  switch (t) {
    case GgufType::UINT8: case GgufType::BOOL: *u = p[0]; return;
    case GgufType::INT8: *i = static_cast<int8_t>(p[0]); return;
    case GgufType::UINT16: { uint16_t v; std::memcpy(&v, p, 2); *u = v; return; }
    case GgufType::INT16: { int16_t v; std::memcpy(&v, p, 2); *i = v; return; }
    case GgufType::UINT32: { uint32_t v; std::memcpy(&v, p, 4); *u = v; return; }
    case GgufType::INT32: { int32_t v; std::memcpy(&v, p, 4); *i = v; return; }
    case GgufType::UINT64: std::memcpy(u, p, 8); return;
    case GgufType::INT64: std::memcpy(i, p, 8); return;
    case GgufType::FLOAT32: { float v; std::memcpy(&v, p, 4); *f = v; return; }
    case GgufType::FLOAT64: std::memcpy(f, p, 8); return;
    case GgufType::STRING: case GgufType::ARRAY: return;
  }
}

uint64_t round_up(uint64_t n, uint64_t align, bool* overflow) {
  const uint64_t rem = n % align;
  if (rem == 0) return n;
  uint64_t out;
  *overflow = __builtin_add_overflow(n, align - rem, &out);
  return out;
}

// A cursor over the prefix [0, size) of a file of file_size bytes. Running past `size` but not
// past file_size is need_more_data (the host can fetch more); past file_size is malformed.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, uint64_t file_size)
      : data_(data), size_(size), file_size_(file_size) {}

  uint64_t pos() const { return pos_; }
  uint64_t needed() const { return needed_; }
  uint64_t remaining_in_file() const { return file_size_ - pos_; }

  // Makes sure n more bytes are in the prefix.
  Status require(uint64_t n, const std::string& what) {
    if (n <= size_ - pos_) return Status();
    if (n > file_size_ - pos_) {
      return Status(Code::malformed, what + " at byte " + std::to_string(pos_) + " needs " +
                                         std::to_string(n) + " bytes but the file has only " +
                                         std::to_string(file_size_ - pos_) + " left (file size " +
                                         std::to_string(file_size_) + ")");
    }
    // Ask for at least the end of this structure, and at least double the prefix so a header
    // made of many small records (a 262144-token vocabulary) is fetched in a few rounds.
    const uint64_t end = pos_ + n;
    const uint64_t doubled = size_ > file_size_ / 2 ? file_size_ : 2 * size_;
    needed_ = end > doubled ? end : doubled;
    return Status(Code::need_more_data, "need the first " + std::to_string(needed_) +
                                            " bytes of the file (have " + std::to_string(size_) +
                                            ") to read " + what + " at byte " + std::to_string(pos_));
  }

  // Refuses a count whose elements of at least min_bytes each cannot fit in the file, then
  // makes sure their minimum size is in the prefix, which bounds what the caller allocates.
  Status require_count(uint64_t count, uint64_t min_bytes, const std::string& what) {
    if (count > remaining_in_file() / min_bytes) {
      return Status(Code::malformed, what + " claims " + std::to_string(count) + " elements but only " +
                                         std::to_string(remaining_in_file()) + " bytes remain (at byte " +
                                         std::to_string(pos_) + ")");
    }
    return require(count * min_bytes, what);
  }

  const uint8_t* take(uint64_t n) {  // only after require(n)
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  Status read(T* out, const std::string& what) {
    LF_RETURN_IF_ERROR(require(sizeof(T), what));
    std::memcpy(out, take(sizeof(T)), sizeof(T));
    return Status();
  }

  Status read_string(std::string* out, const std::string& what) {
    uint64_t len = 0;
    LF_RETURN_IF_ERROR(read(&len, what + " length"));
    if (len > remaining_in_file()) {
      return Status(Code::malformed, what + " claims " + std::to_string(len) + " bytes but only " +
                                         std::to_string(remaining_in_file()) + " bytes remain (at byte " +
                                         std::to_string(pos_) + ")");
    }
    LF_RETURN_IF_ERROR(require(len, what));
    out->assign(reinterpret_cast<const char*>(take(len)), len);
    return Status();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t file_size_;
  uint64_t pos_ = 0;
  uint64_t needed_ = 0;
};

Status read_value(Cursor& c, GgufType type, int depth, const std::string& what, GgufValue* out);

Status read_array(Cursor& c, int depth, const std::string& what, GgufValue* out) {
  if (depth >= kMaxArrayDepth) {
    return Status(Code::malformed, what + " nests arrays deeper than " + std::to_string(kMaxArrayDepth) +
                                       " levels (at byte " + std::to_string(c.pos()) + ")");
  }
  const uint64_t type_pos = c.pos();
  uint32_t elem = 0;
  LF_RETURN_IF_ERROR(c.read(&elem, what + " element type"));
  if (!known_value_type(elem)) {
    return Status(Code::malformed, what + " has unknown element type " + std::to_string(elem) +
                                       " at byte " + std::to_string(type_pos));
  }
  const GgufType et = static_cast<GgufType>(elem);
  out->elem_type = et;
  LF_RETURN_IF_ERROR(c.read(&out->count, what + " count"));
  const uint64_t fixed = scalar_bytes(et);
  const uint64_t min_bytes = fixed ? fixed : et == GgufType::STRING ? 8 : kMinNestedArrayBytes;
  LF_RETURN_IF_ERROR(c.require_count(out->count, min_bytes, "array " + what));
  const size_t n = static_cast<size_t>(out->count);  // fits: count * min_bytes bytes are in memory

  if (fixed) {
    const uint8_t* p = c.take(out->count * fixed);
    if (is_float(et)) {
      out->floats.resize(n);
      for (size_t k = 0; k < n; ++k) {
        uint64_t u = 0; int64_t i = 0;
        decode_scalar(et, p + k * fixed, &u, &i, &out->floats[k]);
      }
    } else {
      out->ints.resize(n);
      for (size_t k = 0; k < n; ++k) {
        uint64_t u = 0; int64_t i = 0; double f = 0;
        decode_scalar(et, p + k * fixed, &u, &i, &f);
        out->ints[k] = is_signed(et) ? i : static_cast<int64_t>(u);  // UINT64 keeps its bits
      }
    }
    return Status();
  }
  if (et == GgufType::STRING) {
    out->strings.resize(n);
    for (size_t k = 0; k < n; ++k) {
      LF_RETURN_IF_ERROR(c.read_string(&out->strings[k], what + "[" + std::to_string(k) + "]"));
    }
    return Status();
  }
  out->arrays.resize(n);
  for (size_t k = 0; k < n; ++k) {
    LF_RETURN_IF_ERROR(read_value(c, GgufType::ARRAY, depth + 1, what + "[" + std::to_string(k) + "]",
                                  &out->arrays[k]));
  }
  return Status();
}

Status read_value(Cursor& c, GgufType type, int depth, const std::string& what, GgufValue* out) {
  out->type = type;
  if (type == GgufType::STRING) return c.read_string(&out->str, what);
  if (type == GgufType::ARRAY) return read_array(c, depth, what, out);
  const uint64_t n = scalar_bytes(type);
  LF_RETURN_IF_ERROR(c.require(n, what));
  decode_scalar(type, c.take(n), &out->u64, &out->i64, &out->f64);
  return Status();
}

Status read_header(Cursor& c, GgufFile* out, int64_t* n_tensors, int64_t* n_kv) {
  char magic[4];
  LF_RETURN_IF_ERROR(c.require(4, "magic"));
  std::memcpy(magic, c.take(4), 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return Status(Code::malformed, "bad magic: the file does not start with \"GGUF\"");
  }
  uint32_t v = 0;
  LF_RETURN_IF_ERROR(c.read(&v, "version"));
  if (v == 0) return Status(Code::malformed, "invalid GGUF version 0 at byte 4");
  if ((v & 0xFFFF) == 0) {
    return Status(Code::unsupported, "GGUF version field " + std::to_string(v) +
                                         " has its low 16 bits zero: endianness mismatch (big-endian file?)");
  }
  if (v == 1) return Status(Code::unsupported, "GGUF version 1 is not supported (32-bit counts); need 2 or 3");
  if (v > 3) return Status(Code::unsupported, "GGUF version " + std::to_string(v) + " is newer than 3");
  out->version = v;

  LF_RETURN_IF_ERROR(c.read(n_tensors, "n_tensors"));
  LF_RETURN_IF_ERROR(c.read(n_kv, "n_kv"));
  if (*n_tensors < 0) return Status(Code::malformed, "n_tensors is negative (" + std::to_string(*n_tensors) + ")");
  if (*n_kv < 0) return Status(Code::malformed, "n_kv is negative (" + std::to_string(*n_kv) + ")");
  const uint64_t room = c.remaining_in_file();
  if (static_cast<uint64_t>(*n_kv) > room / kMinKvBytes) {
    return Status(Code::malformed, "n_kv claims " + std::to_string(*n_kv) + " key-value pairs but only " +
                                       std::to_string(room) + " bytes remain");
  }
  if (static_cast<uint64_t>(*n_tensors) > room / kMinTensorInfoBytes) {
    return Status(Code::malformed, "n_tensors claims " + std::to_string(*n_tensors) + " tensors but only " +
                                       std::to_string(room) + " bytes remain");
  }
  return Status();
}

Status read_kvs(Cursor& c, int64_t n_kv, GgufFile* out) {
  std::unordered_set<std::string> seen;
  for (int64_t i = 0; i < n_kv; ++i) {
    const uint64_t key_pos = c.pos();
    std::string key;
    LF_RETURN_IF_ERROR(c.read_string(&key, "key #" + std::to_string(i)));
    if (key.empty()) {
      return Status(Code::malformed, "empty key in key-value pair #" + std::to_string(i) + " at byte " +
                                         std::to_string(key_pos));
    }
    if (!seen.insert(key).second) {
      return Status(Code::malformed, "duplicate key '" + key + "' at byte " + std::to_string(key_pos));
    }
    const uint64_t type_pos = c.pos();
    uint32_t type = 0;
    LF_RETURN_IF_ERROR(c.read(&type, "value type of key '" + key + "'"));
    if (!known_value_type(type)) {
      return Status(Code::malformed, "key '" + key + "' has unknown value type " + std::to_string(type) +
                                         " at byte " + std::to_string(type_pos));
    }
    GgufValue value;
    LF_RETURN_IF_ERROR(read_value(c, static_cast<GgufType>(type), 0, "'" + key + "'", &value));
    out->kv.emplace_back(std::move(key), std::move(value));
  }
  return Status();
}

Status read_alignment(GgufFile* out) {
  const GgufValue* a = out->find("general.alignment");
  if (!a) return Status();
  if (a->type != GgufType::UINT32) {
    return Status(Code::malformed, std::string("general.alignment must be UINT32, not ") + gguf_type_name(a->type));
  }
  if (a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0) {
    return Status(Code::malformed, "general.alignment " + std::to_string(a->u64) + " is not a power of two");
  }
  out->alignment = static_cast<uint32_t>(a->u64);
  return Status();
}

// Shape, type and byte size of one tensor (the name is already read).
Status check_tensor_shape(const std::string& name, uint32_t type_id, GgufTensorInfo* t) {
  for (uint32_t d = 0; d < t->n_dims; ++d) {
    if (t->ne[d] < 0) {
      return Status(Code::malformed, "tensor '" + name + "' has ne[" + std::to_string(d) + "] = " +
                                         std::to_string(t->ne[d]) + " (negative)");
    }
  }
  TypeTraits tt;
  if (!type_traits(type_id, &tt)) {
    const char* refused = refused_type_name(type_id);
    return Status(Code::unsupported, "tensor '" + name + "' has unknown or unsupported ggml type " +
                                         std::to_string(type_id) + (refused ? std::string(" (") + refused + ")" : ""));
  }
  t->type = static_cast<GgmlType>(type_id);
  if (t->ne[0] % tt.block_elems != 0) {
    return Status(Code::malformed, "tensor '" + name + "' of type " + tt.name + " has ne[0] = " +
                                       std::to_string(t->ne[0]) + ", not a multiple of the block size " +
                                       std::to_string(tt.block_elems));
  }
  int64_t elems = 1;
  uint64_t bytes = row_bytes(tt, static_cast<uint64_t>(t->ne[0]));
  bool overflow = false;
  for (int d = 0; d < 4; ++d) overflow |= __builtin_mul_overflow(elems, t->ne[d], &elems);
  for (int d = 1; d < 4; ++d) overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(t->ne[d]), &bytes);
  if (overflow) {
    return Status(Code::malformed, "tensor '" + name + "' is too large: its element or byte count overflows 64 bits");
  }
  t->n_bytes = bytes;
  return Status();
}

Status read_tensor_infos(Cursor& c, int64_t n_tensors, GgufFile* out) {
  std::unordered_set<std::string> seen;
  for (int64_t i = 0; i < n_tensors; ++i) {
    const uint64_t name_pos = c.pos();
    GgufTensorInfo t;
    LF_RETURN_IF_ERROR(c.read_string(&t.name, "name of tensor #" + std::to_string(i)));
    const std::string& name = t.name;
    if (name.size() >= kGgufMaxTensorName) {
      return Status(Code::malformed, "tensor name '" + name + "' at byte " + std::to_string(name_pos) + " is " +
                                         std::to_string(name.size()) + " bytes long; the limit is " +
                                         std::to_string(kGgufMaxTensorName - 1));
    }
    if (!seen.insert(name).second) {
      return Status(Code::malformed, "duplicate tensor name '" + name + "' at byte " + std::to_string(name_pos));
    }
    LF_RETURN_IF_ERROR(c.read(&t.n_dims, "n_dims of tensor '" + name + "'"));
    if (t.n_dims > kMaxDims) {
      return Status(Code::malformed, "tensor '" + name + "' has n_dims " + std::to_string(t.n_dims) +
                                         " (at most 4)");
    }
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      LF_RETURN_IF_ERROR(c.read(&t.ne[d], "ne[" + std::to_string(d) + "] of tensor '" + name + "'"));
    }
    uint32_t type_id = 0;
    LF_RETURN_IF_ERROR(c.read(&type_id, "type of tensor '" + name + "'"));
    LF_RETURN_IF_ERROR(c.read(&t.offset, "offset of tensor '" + name + "'"));
    LF_RETURN_IF_ERROR(check_tensor_shape(name, type_id, &t));
    out->tensors.push_back(std::move(t));
  }
  return Status();
}

// llama.cpp requires tensors back to back in info order, each padded to the alignment.
Status check_tensor_placement(GgufFile* out) {
  uint64_t expected = 0;
  for (const GgufTensorInfo& t : out->tensors) {
    if (t.offset != expected) {
      return Status(Code::malformed, "tensor '" + t.name + "' has offset " + std::to_string(t.offset) +
                                         ", expected " + std::to_string(expected));
    }
    // offset == expected, which is below 2^64; the sum can still wrap.
    uint64_t end = 0;
    const bool wraps = __builtin_add_overflow(out->data_offset, t.offset, &end) ||
                       __builtin_add_overflow(end, t.n_bytes, &end);
    if (wraps || end > out->file_size) {
      return Status(Code::malformed, "tensor '" + t.name + "' data ends at byte " +
                                         (wraps ? std::string("2^64 or beyond") : std::to_string(end)) +
                                         " but the file has " + std::to_string(out->file_size) + " bytes");
    }
    bool overflow = false;
    expected = round_up(t.offset + t.n_bytes, out->alignment, &overflow);
    if (overflow) return Status(Code::malformed, "tensor '" + t.name + "' ends beyond 2^64 bytes");
  }
  return Status();
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::UINT8: return "UINT8";
    case GgufType::INT8: return "INT8";
    case GgufType::UINT16: return "UINT16";
    case GgufType::INT16: return "INT16";
    case GgufType::UINT32: return "UINT32";
    case GgufType::INT32: return "INT32";
    case GgufType::FLOAT32: return "FLOAT32";
    case GgufType::BOOL: return "BOOL";
    case GgufType::STRING: return "STRING";
    case GgufType::ARRAY: return "ARRAY";
    case GgufType::UINT64: return "UINT64";
    case GgufType::INT64: return "INT64";
    case GgufType::FLOAT64: return "FLOAT64";
  }
  return "unknown";
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : kv) {
    if (k == key) return &v;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool GgufFile::get_u32(std::string_view key, uint32_t* out) const {
  const GgufValue* v = find(key);
  if (!v || v->type == GgufType::BOOL || scalar_bytes(v->type) == 0 || is_float(v->type)) return false;
  if (is_signed(v->type) ? (v->i64 < 0 || v->i64 > UINT32_MAX) : v->u64 > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(is_signed(v->type) ? static_cast<uint64_t>(v->i64) : v->u64);
  return true;
}

bool GgufFile::get_f32(std::string_view key, float* out) const {
  const GgufValue* v = find(key);
  if (!v || !is_float(v->type)) return false;
  *out = static_cast<float>(v->f64);
  return true;
}

bool GgufFile::get_bool(std::string_view key, bool* out) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::BOOL) return false;
  *out = v->u64 != 0;
  return true;
}

bool GgufFile::get_string(std::string_view key, std::string* out) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::STRING) return false;
  *out = v->str;
  return true;
}

Status gguf_parse(const uint8_t* data, uint64_t size, uint64_t file_size, GgufFile* out,
                  uint64_t* needed_bytes) {
  if (size > file_size) {
    return Status(Code::invalid_argument, "prefix of " + std::to_string(size) +
                                              " bytes is longer than the file size " + std::to_string(file_size));
  }
  *out = GgufFile();
  out->file_size = file_size;
  Cursor c(data, size, file_size);
  int64_t n_tensors = 0, n_kv = 0;
  Status s = read_header(c, out, &n_tensors, &n_kv);
  if (s.ok()) s = read_kvs(c, n_kv, out);
  if (s.ok()) s = read_alignment(out);
  if (s.ok()) s = read_tensor_infos(c, n_tensors, out);
  if (s.ok()) {
    bool overflow = false;
    out->data_offset = round_up(c.pos(), out->alignment, &overflow);
    s = overflow ? Status(Code::malformed, "data offset overflows 64 bits") : check_tensor_placement(out);
  }
  if (s.code() == Code::need_more_data && needed_bytes) *needed_bytes = c.needed();
  return s;
}

}  // namespace lf
