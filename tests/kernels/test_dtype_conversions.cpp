// core/dtype.h scalar conversions, which the kernels' SIMD conversions must
// reproduce: exhaustive f16 and bf16 round trips, round-to-nearest-even ties,
// overflow, subnormals, NaN, and f32 -> f16 against the F16C instruction.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "core/cpu_features.h"
#include "core/dtype.h"

namespace rinfer {
namespace {

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

TEST(DtypeF16, RoundTripAll65536Patterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_to_f32(uint16_t(h));
    uint16_t back = f32_to_f16(f);
    if (f16_is_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_TRUE(f16_is_nan(back)) << h;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << "NaN sign, pattern " << h;
    } else {
      ASSERT_EQ(back, h) << "pattern " << h << " -> " << f;
    }
  }
}

TEST(DtypeF16, KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_EQ(f32_bits(f16_to_f32(0x8000)), 0x80000000u);  // -0
}

TEST(DtypeF16, RoundToNearestEvenTiesOverflowSubnormals) {
  const float one = 1.0f, ulp = std::ldexp(1.0f, -10);
  EXPECT_EQ(f32_to_f16(one + ulp / 2), 0x3c00);          // tie -> even (down)
  EXPECT_EQ(f32_to_f16(one + 3 * ulp / 2), 0x3c02);      // tie -> even (up)
  EXPECT_EQ(f32_to_f16(std::nextafter(one + ulp / 2, 2.0f)), 0x3c01);  // just above the tie
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);   // tie with 2^16 -> rounds to inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  const float sub = std::ldexp(1.0f, -24);
  EXPECT_EQ(f32_to_f16(sub / 2), 0x0000);          // tie with 0 -> even (0)
  EXPECT_EQ(f32_to_f16(3 * sub / 2), 0x0002);      // tie -> even (2)
  EXPECT_EQ(f32_to_f16(std::nextafter(sub / 2, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_TRUE(f16_is_nan(f32_to_f16(NAN)));
}

__attribute__((target("f16c"))) uint16_t f16c_convert(float f) {
  return uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}

TEST(DtypeF16, MatchesF16cInstructionOnRandomAndBoundaryFloats) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C";
  std::mt19937 rng(11);
  auto check = [](uint32_t bits) {
    float f = f32_from_bits(bits);
    if (std::isnan(f)) return;
    ASSERT_EQ(f32_to_f16(f), f16c_convert(f)) << std::hex << "f32 bits 0x" << bits;
  };
  for (int i = 0; i < 2'000'000; ++i) check(uint32_t(rng()));
  // every f32 whose exponent is in or near the f16 range, mantissa sampled densely near the rounding points
  for (uint32_t e = 100; e < 145; ++e)
    for (uint32_t m = 0; m < (1u << 23); m += 997) {
      check((e << 23) | m);
      check((e << 23) | (m & ~0x1fffu) | 0x1000u);  // exact f16 ties in the normal range
      check(0x80000000u | (e << 23) | m);
    }
}

TEST(DtypeBf16, RoundTripAll65536Patterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_to_f32(uint16_t(h));
    uint16_t back = f32_to_bf16(f);
    if (bf16_is_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_TRUE(bf16_is_nan(back));
    } else {
      ASSERT_EQ(back, h) << "pattern " << h;
    }
  }
}

TEST(DtypeBf16, RoundToNearestEvenTies) {
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808001u)), 0x3f81);  // just above the tie
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f807fffu)), 0x3f80);  // just below the tie
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0xbf818000u)), 0xbf82);  // negative tie
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7f7f8000u)), 0x7f80);  // max finite tie rounds to inf
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00008000u)), 0x0000);  // subnormal tie -> even
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  // NaN stays NaN, even when truncating would give infinity
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(f32_from_bits(0x7f800001u))));
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(f32_from_bits(0xff800001u))));
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(NAN)));
}

TEST(DtypeBf16, RoundingMatchesExactArithmetic) {
  // compare against rounding done in double: pick the nearer of the two
  // neighbouring bf16 values, ties to the even mantissa
  std::mt19937 rng(12);
  for (int i = 0; i < 1'000'000; ++i) {
    uint32_t bits = uint32_t(rng());
    float f = f32_from_bits(bits);
    if (!std::isfinite(f)) continue;
    uint16_t lo = uint16_t(bits >> 16), hi = uint16_t(lo + 1);
    double dl = std::fabs(double(f) - double(bf16_to_f32(lo)));
    double dh = std::fabs(double(bf16_to_f32(hi)) - double(f));
    if ((hi & 0x7f80u) == 0x7f80u) dh = std::ldexp(1.0, 128) - std::fabs(double(f));  // rounding up overflows to inf
    uint16_t want = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    ASSERT_EQ(f32_to_bf16(f), want) << std::hex << bits;
  }
}

TEST(DtypeConvert, BulkConversionsAgreeWithScalar) {
  std::mt19937 rng(13);
  std::vector<float> src(1000);
  for (auto& v : src) v = std::uniform_real_distribution<float>(-1e5f, 1e5f)(rng);
  std::vector<uint16_t> h(src.size());
  std::vector<float> back(src.size());
  for (DType dt : {DType::F16, DType::BF16}) {
    convert_from_f32(dt, src.data(), h.data(), src.size());
    convert_to_f32(dt, h.data(), back.data(), src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      uint16_t want = dt == DType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
      ASSERT_EQ(h[i], want);
      ASSERT_EQ(back[i], dt == DType::F16 ? f16_to_f32(want) : bf16_to_f32(want));
    }
  }
}

}  // namespace
}  // namespace rinfer
