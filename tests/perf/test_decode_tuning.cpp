// Which decode prefetch profile (decode_tuning.h) a CPU gets, and how
// RINFER_DECODE_PREFETCH overrides it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "perf/decode_tuning.h"

namespace rinfer::perf {
namespace {

using kernels::cpu::decode_prefetch;

CpuFeatures cpu(const char* vendor, int family, int model = 0) {
  CpuFeatures c;
  c.vendor = vendor;
  c.family = family;
  c.model = model;
  return c;
}

TEST(DecodePrefetch, ChosenByCpuGeneration) {
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1A), nullptr).name, "zen5");
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1B), nullptr).name, "zen5");
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x19), nullptr).name, "default");  // Zen 3/4
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 6), nullptr).name, "default");
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 0x1A), nullptr).name, "default");  // family numbers are per vendor
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1A), "").name, "zen5");        // empty: unset
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 6, 0x6A), nullptr).name, "icelake");  // Ice Lake-SP
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 6, 0x6C), nullptr).name, "icelake");  // Ice Lake-D
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 6, 0x8F), nullptr).name, "default");  // Sapphire Rapids
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 6, 0x6A), nullptr).name, "default");  // models are per vendor
}

// The cpuid model of the machine running the tests is read with the
// extended bits folded in (an Ice Lake-SP reads 0x6A, not 0xA).
TEST(DecodePrefetch, CpuModelFoldsTheExtendedField) {
  const CpuFeatures& c = cpu_features();
  if (c.family == 6 || c.family == 0xf) {
    EXPECT_GT(c.model, 0xF) << "family " << c.family << ": every such CPU with AVX2 has an extended model";
  }
  EXPECT_GE(c.model, 0);
}

TEST(DecodePrefetch, ProfilesDifferWhereMeasured) {
  const DecodePrefetch& d = decode_prefetch_for(cpu("AuthenticAMD", 0x19), nullptr);
  const DecodePrefetch& z = decode_prefetch_for(cpu("AuthenticAMD", 0x1A), nullptr);
  EXPECT_GT(d.bf16_t2, 0);
  EXPECT_EQ(z.bf16_t2, 0);
  EXPECT_EQ(d.bf16_nta, 0);
  EXPECT_GT(z.bf16_nta, 0);
  EXPECT_GT(d.q8_t2, 0);
  EXPECT_EQ(z.q8_t2, 0);  // none since the interleaved layout
  EXPECT_GT(d.q8_l2, 0);
  EXPECT_EQ(z.q8_l2, 0);
  EXPECT_EQ(d.q8_nta, 0);
  EXPECT_GT(z.q8_nta, 0);
  EXPECT_FALSE(d.q8_one_thread);
  EXPECT_TRUE(z.q8_one_thread);
  EXPECT_GT(d.q4_l2, 0);
  EXPECT_EQ(z.q4_l2, 0);
  EXPECT_LT(z.q4_nta, d.q4_nta);  // zen5 1.5 KB ahead (four streams), default 4 KB
  EXPECT_EQ(d.bf16_streams, 1);
  EXPECT_EQ(d.q8_streams, 1);
  EXPECT_EQ(d.q4_streams, 1);
  EXPECT_EQ(z.bf16_streams, 3);  // three blocks' accumulators fit in registers, four spill
  EXPECT_EQ(z.q8_streams, 4);
  EXPECT_EQ(z.q4_streams, 4);
  // Ice Lake: a prefetcht0 on every line and no other prefetch, four
  // streams everywhere; the other profiles prefetch lines non-temporally.
  const DecodePrefetch& i = decode_prefetch_for(cpu("GenuineIntel", 6, 0x6A), nullptr);
  EXPECT_TRUE(i.line_t0);
  EXPECT_FALSE(d.line_t0);
  EXPECT_FALSE(z.line_t0);
  EXPECT_EQ(i.bf16_t2 + i.q8_t2 + i.q8_l2 + i.q4_l2, 0);
  EXPECT_GT(i.bf16_nta, 0);
  EXPECT_GT(i.q8_nta, 0);
  EXPECT_GT(i.q4_nta, 0);
  EXPECT_TRUE(i.q8_one_thread);
  EXPECT_EQ(i.bf16_streams, 4);
  EXPECT_EQ(i.q8_streams, 4);
  EXPECT_EQ(i.q4_streams, 4);
}

TEST(DecodePrefetch, EnvironmentOverridesAndRejectsUnknownNames) {
  EXPECT_STREQ(decode_prefetch_for(cpu("GenuineIntel", 6), "zen5").name, "zen5");
  EXPECT_STREQ(decode_prefetch_for(cpu("AuthenticAMD", 0x1A), "default").name, "default");
  try {
    decode_prefetch_for(cpu("AuthenticAMD", 0x1A), "zen6");
    FAIL() << "no error for an unknown profile";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "RINFER_DECODE_PREFETCH=\"zen6\": expected default, zen5 or icelake, optionally with "
              ":field=value,... (fields bf16_t2, bf16_nta, q8_t2, q8_l2, q8_nta, q8_one_thread, q4_nta, q4_l2, bf16_streams, "
              "q8_streams, q4_streams, line_t0)");
  }
  EXPECT_THROW(force_decode_prefetch("fast"), Error);
  force_decode_prefetch("zen5");
  EXPECT_STREQ(decode_prefetch().name, "zen5");
  force_decode_prefetch("default");
  EXPECT_STREQ(decode_prefetch().name, "default");
  force_decode_prefetch(nullptr);
}

// A spec changes the named fields of its base profile and keeps the rest;
// the same spec gives the same interned profile.
TEST(DecodePrefetch, SpecChangesFieldsOfItsBase) {
  const DecodePrefetch& z = parse_decode_prefetch("zen5");
  const DecodePrefetch& s = parse_decode_prefetch("zen5:q4_streams=1,q4_nta=4096,q8_one_thread=0");
  EXPECT_STREQ(s.name, "zen5:q4_streams=1,q4_nta=4096,q8_one_thread=0");
  EXPECT_EQ(s.q4_streams, 1);
  EXPECT_EQ(s.q4_nta, 4096);
  EXPECT_FALSE(s.q8_one_thread);
  EXPECT_EQ(s.bf16_t2, z.bf16_t2);
  EXPECT_EQ(s.bf16_nta, z.bf16_nta);
  EXPECT_EQ(s.q8_t2, z.q8_t2);
  EXPECT_EQ(s.q8_l2, z.q8_l2);
  EXPECT_EQ(s.q8_nta, z.q8_nta);
  EXPECT_EQ(s.q4_l2, z.q4_l2);
  EXPECT_EQ(s.bf16_streams, z.bf16_streams);
  EXPECT_EQ(s.q8_streams, z.q8_streams);
  EXPECT_EQ(&parse_decode_prefetch("zen5:q4_streams=1,q4_nta=4096,q8_one_thread=0"), &s);
  const DecodePrefetch& d = parse_decode_prefetch("default:bf16_streams=2,bf16_t2=0,bf16_nta=2048");
  EXPECT_EQ(d.bf16_streams, 2);
  EXPECT_EQ(d.bf16_t2, 0);
  EXPECT_EQ(d.bf16_nta, 2048);
  EXPECT_EQ(d.q4_nta, parse_decode_prefetch("default").q4_nta);
  force_decode_prefetch("zen5:q8_streams=2");
  EXPECT_EQ(decode_prefetch().q8_streams, 2);
  force_decode_prefetch(nullptr);
}

TEST(DecodePrefetch, BadSpecsNameTheProblem) {
  auto message = [](const char* spec) {
    try {
      parse_decode_prefetch(spec);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("zen5:").find("nothing after ':'"), std::string::npos);
  EXPECT_NE(message("zen5:q4_nta").find("\"q4_nta\" is not field=value"), std::string::npos);
  EXPECT_NE(message("zen5:q4_nta=-1").find("\"q4_nta=-1\" is not field=value"), std::string::npos);
  EXPECT_NE(message("zen5:q4_nta=8k").find("\"q4_nta=8k\" is not field=value"), std::string::npos);
  EXPECT_NE(message("zen5:q4_nta=1,").find("\"\" is not field=value"), std::string::npos);
  EXPECT_NE(message("zen5:prefetch=1").find("\"prefetch=1\": unknown field; expected default, zen5 or icelake"),
            std::string::npos);
  EXPECT_EQ(message("zen5:q4_streams=3"),
            "decode prefetch profile \"zen5:q4_streams=3\": \"q4_streams=3\": q4_streams is 1, 2 or 4");
  EXPECT_EQ(message("zen5:q8_streams=3"),
            "decode prefetch profile \"zen5:q8_streams=3\": \"q8_streams=3\": q8_streams is 1, 2 or 4");
  // Three streams are a BF16 GEMV's (its kernel reads three blocks side by side).
  EXPECT_EQ(message("zen5:bf16_streams=3"), "no error");
  EXPECT_EQ(message("zen5:bf16_streams=5"),
            "decode prefetch profile \"zen5:bf16_streams=5\": \"bf16_streams=5\": bf16_streams is 1, 2, 3 or 4");
  EXPECT_NE(message("zen5:q8_one_thread=2").find("q8_one_thread is 0 or 1"), std::string::npos);
  EXPECT_NE(message("zen5:line_t0=2").find("line_t0 is 0 or 1"), std::string::npos);
  EXPECT_TRUE(parse_decode_prefetch("zen5:line_t0=1").line_t0);
  EXPECT_FALSE(parse_decode_prefetch("icelake:line_t0=0").line_t0);
  EXPECT_NE(message(":q4_nta=1").find("expected default, zen5 or icelake"), std::string::npos);
  EXPECT_EQ(message(""), "decode prefetch profile \"\": " + message("x").substr(message("x").find("expected")));
}

// The kernels read the default profile until one is installed;
// apply_decode_tuning installs the one decode_prefetch_for picks for this
// CPU (zen5 on a Zen 5), and force_decode_prefetch(nullptr) returns to it.
TEST(DecodePrefetch, ApplyInstallsThisCpusProfile) {
  kernels::cpu::set_decode_prefetch(nullptr);
  EXPECT_STREQ(decode_prefetch().name, "default");
  const char* env = std::getenv("RINFER_DECODE_PREFETCH");
  const DecodePrefetch& mine = decode_prefetch_for(cpu_features(), env);
  EXPECT_EQ(&apply_decode_tuning(), &mine);
  EXPECT_EQ(&decode_prefetch(), &mine);
  if (!env && cpu_features().is_amd() && cpu_features().family >= 0x1A) {
    EXPECT_STREQ(decode_prefetch().name, "zen5");
  }
  force_decode_prefetch("icelake");
  EXPECT_STREQ(decode_prefetch().name, "icelake");
  force_decode_prefetch(nullptr);
  EXPECT_EQ(&decode_prefetch(), &mine);
}

TEST(DecodePrefetch, ThisCpuHasAFamily) {
  // cpuid leaf 1 exists on every x86-64; family 0 would mean it was not read.
  EXPECT_GT(cpu_features().family, 0);
}

}  // namespace
}  // namespace rinfer::perf
