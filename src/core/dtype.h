#pragma once
// Element types of tensors on disk and in memory, with the scalar
// conversions every other layer shares (SIMD variants live in kernels/).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace rinfer {

enum class DType : uint8_t { F32, F16, BF16, F64, I8, U8, I16, I32, I64, BOOL, F8_E4M3, F8_E5M2 };

size_t dtype_size(DType t);
// Name as written in safetensors headers ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// User-facing names for --dtype options: "f32", "f16", "bf16".
std::optional<DType> dtype_from_user_name(std::string_view name);
std::string_view dtype_user_name(DType t);

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
// Round to nearest even, NaN stays NaN (as torch does).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// FP8 as in DeepSeek-V3 checkpoints (OCP e4m3fn: bias 7, no infinities,
// 0x7f/0xff NaN, max 448) and e5m2 (IEEE-style, bias 15).
float f8e4m3_to_f32(uint8_t v);
uint8_t f32_to_f8e4m3(float f);  // round to nearest even, saturating to +-448
float f8e5m2_to_f32(uint8_t v);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even, overflow -> inf

// Convert n elements of type `from` into float32.
void convert_to_f32(DType from, const void* src, float* dst, size_t n);
// Convert n float32 elements to `to` (F32, F16 or BF16).
void convert_from_f32(DType to, const float* src, void* dst, size_t n);

}  // namespace rinfer
