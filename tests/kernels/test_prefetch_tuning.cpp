// Which decode prefetch profile (prefetch_tuning.h) a CPU gets, and how
// RINFER_DECODE_PREFETCH overrides it.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "kernels/cpu/prefetch_tuning.h"

namespace rinfer::kernels::cpu {
namespace {

CpuFeatures cpu(const char* vendor, int family) {
  CpuFeatures c;
  c.vendor = vendor;
  c.family = family;
  return c;
}

TEST(DecodePrefetch, ChosenByCpuGeneration) {
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1A), nullptr).name, "zen5");
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1B), nullptr).name, "zen5");
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x19), nullptr).name, "default");  // Zen 3/4
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 6), nullptr).name, "default");
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 0x1A), nullptr).name, "default");  // family numbers are per vendor
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1A), "").name, "zen5");        // empty: unset
}

TEST(DecodePrefetch, ProfilesDifferWhereMeasured) {
  const DecodePrefetch& d = decode_prefetch_for(cpu("AuthenticAMD", 0x19), nullptr);
  const DecodePrefetch& z = decode_prefetch_for(cpu("AuthenticAMD", 0x1A), nullptr);
  EXPECT_GT(d.bf16_t2, 0);
  EXPECT_EQ(z.bf16_t2, 0);
  EXPECT_GT(d.q8_l2, 0);
  EXPECT_EQ(z.q8_l2, 0);
  EXPECT_FALSE(d.q8_one_thread);
  EXPECT_TRUE(z.q8_one_thread);
  EXPECT_GT(d.q4_l2, 0);
  EXPECT_EQ(z.q4_l2, 0);
  EXPECT_GT(z.q4_nta, d.q4_nta);
}

TEST(DecodePrefetch, EnvironmentOverridesAndRejectsUnknownNames) {
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 6), "zen5").name, "zen5");
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1A), "default").name, "default");
  try {
    decode_prefetch_for(cpu("AuthenticAMD", 0x1A), "zen6");
    FAIL() << "no error for an unknown profile";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "RINFER_DECODE_PREFETCH=\"zen6\": expected default or zen5");
  }
  EXPECT_THROW(force_decode_prefetch("fast"), Error);
  force_decode_prefetch("zen5");
  EXPECT_STREQ(decode_prefetch().name, "zen5");
  force_decode_prefetch("default");
  EXPECT_STREQ(decode_prefetch().name, "default");
  force_decode_prefetch(nullptr);
}

TEST(DecodePrefetch, ThisCpuHasAFamily) {
  // cpuid leaf 1 exists on every x86-64; family 0 would mean it was not read.
  EXPECT_GT(cpu_features().family, 0);
}

}  // namespace
}  // namespace rinfer::kernels::cpu
