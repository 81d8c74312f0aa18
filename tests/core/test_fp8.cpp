// FP8 e4m3 (DeepSeek-V3 checkpoints): every bit pattern decodes to the value
// the format defines, and encoding rounds to the nearest value.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"

namespace rinfer {
namespace {

// The e4m3fn definition written out independently: sign, 4-bit exponent
// (bias 7), 3-bit mantissa; exponent 0 is subnormal; S.1111.111 is NaN.
double e4m3_expected(int bits) {
  const int s = bits >> 7, e = (bits >> 3) & 15, m = bits & 7;
  if (e == 15 && m == 7) return NAN;
  double v = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -v : v;
}

TEST(Fp8, DecodesAll256Patterns) {
  int nans = 0;
  for (int b = 0; b < 256; ++b) {
    const double want = e4m3_expected(b);
    const float got = f8e4m3_to_f32(uint8_t(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
      ++nans;
    } else {
      EXPECT_EQ(double(got), want) << "pattern 0x" << std::hex << b;
    }
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8, EncodeRoundTripsEveryValueAndRoundsToNearest) {
  for (int b = 0; b < 256; ++b) {
    const float v = f8e4m3_to_f32(uint8_t(b));
    if (std::isnan(v)) continue;
    const uint8_t back = f32_to_f8e4m3(v);
    EXPECT_EQ(f8e4m3_to_f32(back), v) << b;  // +-0 both fine
  }
  // Midpoints and arbitrary values go to the nearest representable value.
  for (float x = -500.0f; x <= 500.0f; x += 0.173f) {
    const float q = f8e4m3_to_f32(f32_to_f8e4m3(x));
    const float a = std::min(std::fabs(x), 448.0f);
    double best = INFINITY;
    for (int b = 0; b < 128; ++b) {
      const float v = f8e4m3_to_f32(uint8_t(b));
      if (!std::isnan(v)) best = std::min(best, double(std::fabs(v - a)));
    }
    EXPECT_NEAR(std::fabs(q), a, best + 1e-6) << x;
  }
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1000.0f)), 448.0f);  // saturates
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.0625f)), 1.0f);     // tie -> even mantissa
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.1875f)), 1.25f);    // tie -> even mantissa
}

}  // namespace
}  // namespace rinfer
