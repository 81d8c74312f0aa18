// RINFER_ISA pins the kernel level for the whole CLI: how the AVX2 (and
// scalar) paths of a machine without AVX-512 are run end to end here.
#include <algorithm>
#include <cstdlib>

#include "cli_util.h"
#include "core/cpu_features.h"
#include "kernels/cpu/ops.h"

namespace rinfer::test::cli {
namespace {

struct EnvScope {
  explicit EnvScope(const char* value) { setenv("RINFER_ISA", value, 1); }
  ~EnvScope() { unsetenv("RINFER_ISA"); }
};

// avxvnni (AVX2 with AVX-VNNI's int8 prefill GEMM) where the CPU has it.
TEST(CliIsa, ForcedLevelsValidateAndReportThemselves) {
  std::vector<std::string> levels = {"avx2", "scalar"};
  if (cpu_features().avx_vnni) levels.push_back("avxvnni");
  for (const std::string& level : levels) {
    const char* isa = level.c_str();
    SCOPED_TRACE(isa);
    const bool supported = level == "scalar" || kernels::cpu::best_isa() >= kernels::cpu::Isa::Avx2;
    ASSERT_TRUE(supported) << "this CPU has no AVX2";
    EnvScope env(isa);
    CmdResult r = run_rinfer("validate --golden " + quote(golden_dir("llama")) + " --threads 2");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    TempDir tmp;
    const fs::path out = tmp.path / "bench.json";
    r = run_rinfer("bench --model " + quote(stories_hf()) +
                   " --prompt-len 8 --gen-len 4 --samples 1 --warmup 0 --threads 1 --json " + quote(out.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = read_json(out);
    EXPECT_EQ(j.at("kernel_isa"), isa);
    // The roofline probes run at the forced level too (scalar: no peak probe).
    EXPECT_GT(j.at("mem_bw_gb_s").get<double>(), 0);
    EXPECT_EQ(j.contains("peak_gops"), level != "scalar");
  }
}

TEST(CliIsa, UnknownLevelIsAOneLineError) {
  EnvScope env("avx1024");
  CmdResult r = run_rinfer("run --model " + quote(stories_hf()) + " --prompt-ids 1,2 -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("RINFER_ISA=\"avx1024\": expected scalar, avx2, avxvnni or avx512"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// RINFER_DECODE_PREFETCH pins the decode GEMVs' prefetch profile, or a
// profile with fields changed (perf/decode_tuning.h); bench reports the one in
// use.
TEST(CliIsa, DecodePrefetchProfileIsPinnedAndReported) {
  for (const char* profile : {"default", "zen5", "zen5:q4_streams=1,bf16_streams=1", "zen5:q4_streams=2,q8_streams=1"}) {
    setenv("RINFER_DECODE_PREFETCH", profile, 1);
    TempDir tmp;
    const fs::path out = tmp.path / "bench.json";
    CmdResult r = run_rinfer("bench --model " + quote(stories_hf()) +
                             " --prompt-len 8 --gen-len 4 --samples 1 --warmup 0 --threads 1 --json " + quote(out.string()));
    unsetenv("RINFER_DECODE_PREFETCH");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_json(out).at("decode_prefetch"), profile);
    EXPECT_NE(r.out.find(std::string("decode prefetch ") + profile), std::string::npos) << r.out;
  }
  setenv("RINFER_DECODE_PREFETCH", "fastest", 1);
  CmdResult r = run_rinfer("run --model " + quote(stories_hf()) + " --prompt-ids 1,2 -n 1");
  unsetenv("RINFER_DECODE_PREFETCH");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("RINFER_DECODE_PREFETCH=\"fastest\": expected default, zen5 or icelake"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  setenv("RINFER_DECODE_PREFETCH", "zen5:q4_streams=3", 1);
  r = run_rinfer("run --model " + quote(stories_hf()) + " --prompt-ids 1,2 -n 1");
  unsetenv("RINFER_DECODE_PREFETCH");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("RINFER_DECODE_PREFETCH=\"zen5:q4_streams=3\": \"q4_streams=3\""), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// bench --ab-decode-prefetch: the decode steps of each sample take the
// profiles in turn, so each gets half the steps (gen-len 7: 6 steps per
// sample, 3 each), every one timed; one spec, or a bad one, is a one-line
// error.
TEST(CliIsa, BenchAbDecodePrefetchTakesTheProfilesInTurn) {
  TempDir tmp;
  const fs::path out = tmp.path / "bench.json";
  CmdResult r = run_rinfer("bench --model " + quote(stories_hf()) +
                           " --prompt-len 8 --gen-len 7 --samples 2 --warmup 0 --threads 1 --no-roofline --json " +
                           quote(out.string()) + " --ab-decode-prefetch default zen5:q4_streams=1");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = read_json(out);
  EXPECT_EQ(j.at("decode_prefetch"), "ab");
  const auto& rows = j.at("decode_prefetch_ab");
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  EXPECT_EQ(rows[0].at("spec"), "default");
  EXPECT_EQ(rows[1].at("spec"), "zen5:q4_streams=1");
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("steps"), 6) << row.dump();
    EXPECT_GT(row.at("step_ms_median").get<double>(), 0.0) << row.dump();
    EXPECT_NEAR(row.at("tokens_per_s").get<double>() * row.at("step_ms_median").get<double>(), 1e3, 1e-6);
  }
  EXPECT_DOUBLE_EQ(rows[0].at("speed_vs_first").get<double>(), 1.0);
  EXPECT_NE(r.out.find("decode prefetch A/B"), std::string::npos) << r.out;
  const std::string base = "bench --model " + quote(stories_hf()) + " --prompt-len 8 --gen-len 2 --samples 1 --warmup 0";
  for (const auto& [args, want] :
       {std::pair<std::string, std::string>{" --ab-decode-prefetch zen5", "--ab-decode-prefetch needs two or more"},
        {" --ab-decode-prefetch zen5 turbo", "decode prefetch profile \"turbo\": expected default, zen5 or icelake"}}) {
    CmdResult e = run_rinfer(base + args);
    EXPECT_NE(e.code, 0) << args;
    EXPECT_NE(e.err.find(want), std::string::npos) << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
  }
}

}  // namespace
}  // namespace rinfer::test::cli
