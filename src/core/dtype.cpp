#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace rinfer {

namespace {
struct DTypeInfo {
  DType t;
  const char* name;
  const char* user;
  size_t size;
};
constexpr DTypeInfo kInfos[] = {
    {DType::F32, "F32", "f32", 4},          {DType::F16, "F16", "f16", 2},
    {DType::BF16, "BF16", "bf16", 2},       {DType::F64, "F64", "f64", 8},
    {DType::I8, "I8", "i8", 1},             {DType::U8, "U8", "u8", 1},
    {DType::I16, "I16", "i16", 2},          {DType::I32, "I32", "i32", 4},
    {DType::I64, "I64", "i64", 8},          {DType::BOOL, "BOOL", "bool", 1},
    {DType::F8_E4M3, "F8_E4M3", "f8_e4m3", 1}, {DType::F8_E5M2, "F8_E5M2", "f8_e5m2", 1},
};
const DTypeInfo& info(DType t) {
  for (const auto& i : kInfos)
    if (i.t == t) return i;
  fail("internal error: unknown dtype ", int(t));
}
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
std::string_view dtype_user_name(DType t) { return info(t).user; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfos)
    if (name == i.name) return i.t;
  return std::nullopt;
}

std::optional<DType> dtype_from_user_name(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return DType::F32;
  if (name == "f16" || name == "float16" || name == "fp16") return DType::F16;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  return std::nullopt;
}

float f8e4m3_to_f32(uint8_t v) {
  const bool neg = v & 0x80;
  const int exp = (v >> 3) & 0xf, man = v & 7;
  float r;
  if (exp == 15 && man == 7)
    r = std::numeric_limits<float>::quiet_NaN();
  else if (exp == 0)
    r = std::ldexp(float(man) / 8.0f, -6);
  else
    r = std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return neg ? -r : r;
}

uint8_t f32_to_f8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (e4m3fn has no infinity)
  // Find the nearest representable value by construction: the spacing is
  // 2^(e-3) in binade e (e >= -6), 2^-9 below.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int binade = std::max(e - 1, -6);
  const float step = std::ldexp(1.0f, binade - 3);
  float q = std::nearbyint(a / step) * step;  // ties to even (default rounding mode)
  // Encode q.
  if (q == 0.0f) return sign;
  int qe;
  const float qm = std::frexp(q, &qe);  // q = qm * 2^qe
  int exp = qe - 1 + 7;
  if (exp <= 0) return uint8_t(sign | uint8_t(std::lround(q / std::ldexp(1.0f, -9))));  // subnormal
  const int man = int(std::lround((qm * 2.0f - 1.0f) * 8.0f));
  return uint8_t(sign | (exp << 3) | man);
}

float f8e5m2_to_f32(uint8_t v) { return f16_to_f32(uint16_t(v) << 8); }

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // subnormal: value = man * 2^-24
    float v = float(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (absu >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf
  if (absu < 0x38800000u) {                                   // subnormal or zero in f16
    // value / 2^-24 rounded to nearest even
    float a = f32_from_bits(absu);
    float scaled = a * 16777216.0f;  // 2^24
    uint32_t m = uint32_t(scaled);
    float rem = scaled - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t e = ((absu >> 23) - 112) << 10;
  uint32_t m = (absu >> 13) & 0x3ffu;
  uint32_t h = e | m;
  uint32_t rest = absu & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

void convert_to_f32(DType from, const void* src, float* dst, size_t n) {
  switch (from) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F64: {
      auto* s = static_cast<const double*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::F8_E4M3: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f8e4m3_to_f32(s[i]);
      return;
    }
    case DType::F8_E5M2: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f8e5m2_to_f32(s[i]);
      return;
    }
    default: fail("cannot convert ", dtype_name(from), " tensors to F32");
  }
}

void convert_from_f32(DType to, const float* src, void* dst, size_t n) {
  switch (to) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    default: fail("cannot convert F32 tensors to ", dtype_name(to));
  }
}

}  // namespace rinfer
