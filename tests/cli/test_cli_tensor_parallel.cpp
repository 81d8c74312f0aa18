// `rinfer ... --tp T` under mpirun: every golden family validates on two
// ranks (from the HF folder and from a converted model directory), greedy
// output matches the single process, and worlds that do not fit the model
// or the options end every rank with a one-line error instead of a hang.
// Open MPI runs as root only with --allow-run-as-root, and more ranks than
// cores only with --oversubscribe.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <sstream>

#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

// `mpirun -np N rinfer ARGS`, bounded by `timeout` so that a hang fails the
// test (exit 124) instead of stalling the suite.
CmdResult run_mpi(int ranks, const std::string& args, int seconds = 120) {
  static int counter = 0;
  const auto err_path = fs::temp_directory_path() /
                        ("rinfer_mpi_err_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  const std::string cmd = "timeout " + std::to_string(seconds) +
                          " mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) + " " +
                          RINFER_BIN + " " + args + " 2>" + err_path.string();
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  fs::remove(err_path);
  return r;
}

const char* const kFamilies[] = {"llama",         "llama3_rope_scaling", "qwen2",       "mixtral",
                                 "qwen2_moe",     "baichuan_7b_rope",    "baichuan_13b_alibi",
                                 "deepseek_v2",   "deepseek_v2_lite",    "deepseek_v3", "deepseek_v3_grouped",
                                 "deepseek_moe",  "chatglm_glm4"};

TEST(CliTensorParallel, GoldenFamiliesValidateOnTwoRanks) {
  for (const char* family : kFamilies) {
    SCOPED_TRACE(family);
    const CmdResult r = run_mpi(2, "validate --golden " + golden_dir(family) + " --tp 2");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  }
}

TEST(CliTensorParallel, ConvertedModelValidatesOnTwoAndFourRanks) {
  TempDir tmp;
  for (const char* family : {"llama", "qwen2"}) {
    SCOPED_TRACE(family);
    const std::string m = tmp / family;
    const CmdResult c = run_rinfer("convert --hf " + golden_dir(family) + "/hf --out " + m + " --dtype f32");
    ASSERT_EQ(c.code, 0) << c.err;
    for (int ranks : {2, 4}) {
      const CmdResult r = run_mpi(ranks, "validate --golden " + golden_dir(family) + " --model " + m + " --tp " +
                                             std::to_string(ranks));
      EXPECT_EQ(r.code, 0) << ranks << " ranks\n" << r.out << r.err;
      EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
    }
  }
}

TEST(CliTensorParallel, GreedyRunMatchesOneProcess) {
  const std::string args = "run --model " + stories_hf() + " --prompt-ids 1,403,407,261 --max-new-tokens 24 " +
                           "--temperature 0 --ignore-eos --json";
  const json one = run_json(args);
  for (int ranks : {2, 4}) {
    const CmdResult r = run_mpi(ranks, args + " --tp " + std::to_string(ranks));
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);  // rank 0 alone prints
    EXPECT_EQ(ids_of(j, "output_ids"), ids_of(one, "output_ids")) << ranks << " ranks";
  }
}

TEST(CliTensorParallel, WorldsThatDoNotFitAreOneLineErrors) {
  const std::string golden = " --golden " + golden_dir("llama");
  // More or fewer ranks than --tp.
  CmdResult r = run_mpi(2, "validate" + golden + " --tp 3", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("rinfer: error: --tp 3 but mpirun started 2 ranks"), std::string::npos) << r.err;
  // Heads that the ranks do not split (llama: 4 heads, 2 K/V heads).
  r = run_mpi(3, "validate" + golden + " --tp 3", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("4 attention heads do not split over 3 ranks"), std::string::npos) << r.err;
  // --tp without mpirun.
  r = run_rinfer("validate" + golden + " --tp 2");
  expect_error(r, "--tp 2 needs mpirun -np 2", "--tp without mpirun");
  // A rank that fails alone (a prompt only rank 0 checks) still ends them all.
  r = run_mpi(2, "run --model " + stories_hf() + " --prompt-ids 1,999999 --tp 2", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("outside the vocabulary"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rinfer::test::cli
