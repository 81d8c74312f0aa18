#include "io/gguf_writer.h"

#include <cmath>
#include <cstring>

#include "core/atomic_file.h"
#include "core/dtype.h"
#include "core/error.h"

namespace rinfer::io {

namespace {
constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;      // general.alignment's default
constexpr int64_t kBlock = 32;           // Q4_0 / Q8_0 values per block

// GGUF metadata value types.
enum : uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };

template <typename T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}
void put_str(std::string& s, const std::string& v) {
  put<uint64_t>(s, v.size());
  s += v;
}
}  // namespace

int64_t gguf_row_multiple(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q8_0 ? kBlock : 1; }

uint64_t gguf_bytes(GgmlType t, int64_t n) {
  RINFER_CHECK(n >= 0 && n % gguf_row_multiple(t) == 0, "GGUF: ", n, " values do not fill whole ",
               gguf_type_name(t), " blocks of ", gguf_row_multiple(t));
  switch (t) {
    case GgmlType::F32: return uint64_t(n) * 4;
    case GgmlType::F16: return uint64_t(n) * 2;
    case GgmlType::Q8_0: return uint64_t(n / kBlock) * (2 + kBlock);
    case GgmlType::Q4_0: return uint64_t(n / kBlock) * (2 + kBlock / 2);
  }
  fail("GGUF: unknown tensor type ", uint32_t(t));
}

const char* gguf_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "f32";
    case GgmlType::F16: return "f16";
    case GgmlType::Q8_0: return "q8_0";
    case GgmlType::Q4_0: return "q4_0";
  }
  return "?";
}

void encode_q8_0(const float* x, int64_t n, uint8_t* dst) {
  for (int64_t b = 0; b < n; b += kBlock, x += kBlock, dst += 2 + kBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(dst, &h, 2);
    for (int j = 0; j < kBlock; ++j) dst[2 + j] = uint8_t(int8_t(std::lround(x[j] * id)));
  }
}

void encode_q4_0(const float* x, int64_t n, uint8_t* dst) {
  for (int64_t b = 0; b < n; b += kBlock, x += kBlock, dst += 2 + kBlock / 2) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < kBlock; ++j)
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        m = x[j];
      }
    const float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(dst, &h, 2);
    auto q = [&](float v) { return uint8_t(std::min(15, int(int8_t(v * id + 8.5f)))); };
    for (int j = 0; j < kBlock / 2; ++j) dst[2 + j] = uint8_t(q(x[j]) | q(x[j + kBlock / 2]) << 4);
  }
}

void gguf_encode(GgmlType t, const float* x, int64_t n, uint8_t* dst) {
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, x, size_t(n) * 4); return;
    case GgmlType::F16: convert_from_f32(DType::F16, x, dst, size_t(n)); return;
    case GgmlType::Q8_0: encode_q8_0(x, n, dst); return;
    case GgmlType::Q4_0: encode_q4_0(x, n, dst); return;
  }
}

void GgufWriter::key(const std::string& k, uint32_t type) {
  RINFER_CHECK(keys_.insert(k).second, "GGUF writer: metadata key ", k, " set twice");
  put_str(kv_, k);
  put<uint32_t>(kv_, type);
  ++n_kv_;
}
void GgufWriter::set_u32(const std::string& k, uint32_t v) { key(k, kU32), put(kv_, v); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { key(k, kI32), put(kv_, v); }
void GgufWriter::set_f32(const std::string& k, float v) { key(k, kF32), put(kv_, v); }
void GgufWriter::set_bool(const std::string& k, bool v) { key(k, kBool), put<uint8_t>(kv_, v ? 1 : 0); }
void GgufWriter::set_str(const std::string& k, const std::string& v) { key(k, kString), put_str(kv_, v); }
void GgufWriter::set_str_array(const std::string& k, const std::vector<std::string>& v) {
  key(k, kArray);
  put<uint32_t>(kv_, kString);
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_str(kv_, s);
}
void GgufWriter::set_f32_array(const std::string& k, const std::vector<float>& v) {
  key(k, kArray);
  put<uint32_t>(kv_, kF32);
  put<uint64_t>(kv_, v.size());
  for (float f : v) put(kv_, f);
}
void GgufWriter::set_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  key(k, kArray);
  put<uint32_t>(kv_, kI32);
  put<uint64_t>(kv_, v.size());
  for (int32_t i : v) put(kv_, i);
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne, Fill fill) {
  RINFER_CHECK(names_.insert(name).second, "GGUF writer: tensor ", name, " added twice");
  RINFER_CHECK(!ne.empty() && ne.size() <= 4, "GGUF writer: tensor ", name, " has ", ne.size(), " dimensions");
  int64_t n = 1;
  for (int64_t d : ne) {
    RINFER_CHECK(d > 0, "GGUF writer: tensor ", name, " has an empty dimension");
    n *= d;
  }
  RINFER_CHECK(ne[0] % gguf_row_multiple(type) == 0, "GGUF writer: tensor ", name, " has rows of ", ne[0],
               " values, not a multiple of the ", gguf_type_name(type), " block (", gguf_row_multiple(type), ")");
  tensors_.push_back({name, type, ne, gguf_bytes(type, n), std::move(fill)});
}

uint64_t GgufWriter::data_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += t.bytes;
  return n;
}

void GgufWriter::write(const std::string& path) const {
  auto pad = [](uint64_t n) { return (kAlignment - n % kAlignment) % kAlignment; };
  std::string head;
  put(head, kMagic);
  put(head, kVersion);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, n_kv_);
  head += kv_;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_str(head, t.name);
    put<uint32_t>(head, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, uint64_t(d));
    put<uint32_t>(head, uint32_t(t.type));
    put<uint64_t>(head, offset);
    offset += t.bytes + pad(t.bytes);
  }
  head.append(pad(head.size()), '\0');
  AtomicFileWriter out(path);
  out.write(head.data(), head.size());
  const char zeros[kAlignment] = {};
  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    buf.assign(t.bytes, 0);
    t.fill(buf.data());
    out.write(buf.data(), buf.size());
    out.write(zeros, pad(t.bytes));
  }
  out.commit();
}

}  // namespace rinfer::io
