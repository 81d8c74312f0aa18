// `rinfer ... --tp T --pp P` under mpirun: every golden family validates
// tensor-parallel on two ranks, in two pipeline stages, and in two stages of
// two tensor-parallel ranks (from the HF folder and from a converted model
// directory), greedy output matches the single process, and worlds that do
// not fit the model or the options, or ranks that see different models, end
// every rank with a one-line error instead of a hang.
// Open MPI runs as root only with --allow-run-as-root, and more ranks than
// cores only with --oversubscribe.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

// `mpirun -np N rinfer ARGS`, bounded by `timeout` so that a hang fails the
// test (exit 124) instead of stalling the suite.
CmdResult run_mpi(int ranks, const std::string& args, int seconds = 120) {
  return run_shell("timeout " + std::to_string(seconds) + " mpirun --allow-run-as-root --oversubscribe -np " +
                   std::to_string(ranks) + " " + RINFER_BIN + " " + args);
}

const char* const kFamilies[] = {"llama",         "llama3_rope_scaling", "qwen2",       "mixtral",
                                 "qwen2_moe",     "baichuan_7b_rope",    "baichuan_13b_alibi",
                                 "deepseek_v2",   "deepseek_v2_lite",    "deepseek_v3", "deepseek_v3_grouped",
                                 "deepseek_moe",  "chatglm_glm4"};

TEST(CliParallel, GoldenFamiliesValidateOnTwoRanks) {
  for (const char* family : kFamilies) {
    SCOPED_TRACE(family);
    const CmdResult r = run_mpi(2, "validate --golden " + golden_dir(family) + " --tp 2");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  }
}

TEST(CliParallel, GoldenFamiliesValidateInPipelineStages) {
  for (const char* family : kFamilies) {
    SCOPED_TRACE(family);
    CmdResult r = run_mpi(2, "validate --golden " + golden_dir(family) + " --pp 2");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
    r = run_mpi(4, "validate --golden " + golden_dir(family) + " --tp 2 --pp 2");
    EXPECT_EQ(r.code, 0) << "--tp 2 --pp 2\n" << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  }
}

TEST(CliParallel, ConvertedModelValidatesOnTwoAndFourRanks) {
  TempDir tmp;
  for (const char* family : {"llama", "qwen2"}) {
    SCOPED_TRACE(family);
    const std::string m = tmp / family;
    const CmdResult c = run_rinfer("convert --hf " + golden_dir(family) + "/hf --out " + m + " --dtype f32");
    ASSERT_EQ(c.code, 0) << c.err;
    for (const auto& [ranks, layout] : {std::pair{2, "--tp 2"}, {4, "--tp 4"}, {2, "--pp 2"}, {4, "--tp 2 --pp 2"}}) {
      const CmdResult r =
          run_mpi(ranks, "validate --golden " + golden_dir(family) + " --model " + m + " " + layout);
      EXPECT_EQ(r.code, 0) << layout << "\n" << r.out << r.err;
      EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
    }
  }
}

TEST(CliParallel, GreedyRunMatchesOneProcess) {
  const std::string args = "run --model " + stories_hf() + " --prompt-ids 1,403,407,261 --max-new-tokens 24 " +
                           "--temperature 0 --ignore-eos --json";
  const json one = run_json(args);
  for (const auto& [ranks, layout] :
       {std::pair{2, "--tp 2"}, {4, "--tp 4"}, {2, "--pp 2"}, {4, "--pp 4"}, {4, "--tp 2 --pp 2"}}) {
    const CmdResult r = run_mpi(ranks, args + " " + layout);
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.err;
    const json j = json::parse(r.out);  // rank 0 alone prints
    EXPECT_EQ(ids_of(j, "output_ids"), ids_of(one, "output_ids")) << layout;
  }
}

// The families without golden logits (their tiny synthesized checkpoints,
// checked against tests/reference/hf_forward.py in test_model): greedy
// tokens split over ranks and stages are the single process's.
TEST(CliParallel, SynthesizedFamiliesGreedyMatchesOneProcess) {
  TempDir tmp;
  for (const char* preset : {"qwen3-tiny", "qwen3-moe-tiny", "glm4-tiny"}) {
    SCOPED_TRACE(preset);
    const std::string m = tmp / preset;
    const CmdResult c = run_rinfer(std::string("synth --preset ") + preset + " --out " + m + " --dtype f32 --seed 7");
    ASSERT_EQ(c.code, 0) << c.err;
    const std::string args =
        "run --model " + m + " --prompt-ids 1,17,250,3,99,140 --max-new-tokens 12 --temperature 0 --ignore-eos --json";
    const json one = run_json(args);
    for (const auto& [ranks, layout] : {std::pair{2, "--tp 2"}, {2, "--pp 2"}, {4, "--tp 2 --pp 2"}}) {
      const CmdResult r = run_mpi(ranks, args + " " + layout);
      ASSERT_EQ(r.code, 0) << layout << "\n" << r.err;
      EXPECT_EQ(ids_of(json::parse(r.out), "output_ids"), ids_of(one, "output_ids")) << layout;
    }
    if (std::string(preset) != "qwen3-moe-tiny") continue;
    // Qwen3-MoE (no golden folder) under expert parallelism too.
    for (const char* layout : {"--ep 2", "--ep 2 --redundant-experts 2 --rebalance-every 2"}) {
      const CmdResult r = run_mpi(2, args + " " + layout);
      ASSERT_EQ(r.code, 0) << layout << "\n" << r.err;
      EXPECT_EQ(ids_of(json::parse(r.out), "output_ids"), ids_of(one, "output_ids")) << layout;
    }
  }
}

// bench --profile counts the tensor-parallel collectives of a step: one
// all-reduce after attention and one after the MLP per layer, one for the
// vocab-parallel embedding and the gather of the logits; bench --pp reports
// the pipeline's bubble.
TEST(CliParallel, BenchReportsCommunicationAndBubble) {
  TempDir tmp;
  const std::string out = tmp / "b.json";
  const std::string args = "bench --model " + stories_hf() + " --prompt-len 16 --gen-len 4 --samples 1 --warmup 0 " +
                           "--no-roofline --profile --json " + out;
  CmdResult r = run_mpi(2, args + " --tp 2");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = read_json(out);
  const int64_t layers = j["n_layers"].get<int64_t>();
  EXPECT_EQ(j["tp"], 2);
  EXPECT_EQ(j["profile"]["decode"]["communication"]["collectives"].get<double>(), double(2 * layers + 2));
  EXPECT_GT(j["profile"]["decode"]["communication"]["share"].get<double>(), 0.0);
  EXPECT_LT(j["profile"]["decode"]["communication"]["share"].get<double>(), 1.0);
  EXPECT_FALSE(j.contains("pipeline_bubble_fraction"));
  r = run_mpi(2, args + " --pp 2");
  ASSERT_EQ(r.code, 0) << r.err;
  j = read_json(out);
  EXPECT_EQ(j["pp"], 2);
  EXPECT_FALSE(j["profile"]["decode"].contains("communication"));  // stages send point to point, not collectives
  // One sequence: a stage waits while the other works, half the time at best.
  EXPECT_GT(j["pipeline_bubble_fraction"].get<double>(), 0.3);
  EXPECT_LT(j["pipeline_bubble_fraction"].get<double>(), 1.0);
}

const char* const kMoeFamilies[] = {"mixtral",          "qwen2_moe",   "deepseek_moe",       "deepseek_v2",
                                    "deepseek_v2_lite", "deepseek_v3", "deepseek_v3_grouped"};

// Expert parallelism: every rank holds its experts of every MoE layer.
// validate's per-case results (logit errors to the golden's, top-1 and
// greedy agreement), without the lines that name the command.
json validate_cases(const std::string& path) { return read_json(path)["cases"]; }

// The experts' outputs are gathered and summed in one process's order, so
// without replicas every placement and rank count gives one process's
// logits to the bit: validate's errors are equal, not just within bounds.
TEST(CliParallel, MoeFamiliesValidateExpertParallel) {
  TempDir tmp;
  for (const char* family : kMoeFamilies) {
    SCOPED_TRACE(family);
    const std::string one = tmp / "one.json", ep = tmp / "ep.json";
    ASSERT_EQ(run_rinfer("validate --golden " + golden_dir(family) + " --json " + one).code, 0);
    for (int ranks : {2, 4}) {
      const CmdResult r = run_mpi(ranks, "validate --golden " + golden_dir(family) + " --ep " +
                                             std::to_string(ranks) + " --json " + ep);
      EXPECT_EQ(r.code, 0) << ranks << " ranks\n" << r.out << r.err;
      EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
      EXPECT_EQ(validate_cases(ep), validate_cases(one)) << ranks << " ranks";
    }
  }
}

// Expert parallelism combined: with tensor parallelism (2 x 2 ranks, each
// holding half the experts, each of those split over its width), in two
// pipeline stages (each stage's ranks holding their experts of its
// layers), and all three (8 ranks).
TEST(CliParallel, MoeFamiliesValidateExpertParallelCombined) {
  for (const char* family : {"mixtral", "qwen2_moe", "deepseek_v2_lite", "deepseek_v3_grouped"}) {
    SCOPED_TRACE(family);
    for (const auto& [ranks, layout] : {std::pair{4, "--tp 2 --ep 2"}, {4, "--pp 2 --ep 2"}}) {
      const CmdResult r = run_mpi(ranks, "validate --golden " + golden_dir(family) + " " + layout);
      EXPECT_EQ(r.code, 0) << layout << "\n" << r.out << r.err;
      EXPECT_NE(r.out.find("PASS"), std::string::npos) << layout << "\n" << r.out;
    }
  }
  for (const char* family : {"qwen2_moe", "deepseek_v2_lite"}) {
    const CmdResult r = run_mpi(8, "validate --golden " + golden_dir(family) + " --tp 2 --pp 2 --ep 2", 240);
    EXPECT_EQ(r.code, 0) << family << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << family << "\n" << r.out;
  }
}

// Online rebalancing moves experts between ranks every few steps: without
// replicas the logits stay those of one process to the bit, with replicas
// (a token's output then computed among other rows) the greedy tokens stay.
TEST(CliParallel, OnlineRebalancingChangesNoOutput) {
  TempDir tmp;
  for (const char* family : {"mixtral", "qwen2_moe", "deepseek_v2_lite", "deepseek_v3_grouped"}) {
    SCOPED_TRACE(family);
    const std::string one = tmp / "one.json", ep = tmp / "ep.json";
    ASSERT_EQ(run_rinfer("validate --golden " + golden_dir(family) + " --json " + one).code, 0);
    CmdResult r = run_mpi(2, "validate --golden " + golden_dir(family) + " --ep 2 --rebalance-every 1 --json " + ep);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(validate_cases(ep), validate_cases(one));
    const std::string run = "run --model " + golden_dir(family) + "/hf --prompt-ids 1,5,6,7,8,9 --max-new-tokens 24 " +
                            "--temperature 0 --ignore-eos --json";
    const CmdResult single = run_rinfer(run);
    ASSERT_EQ(single.code, 0) << single.err;
    for (const std::string& layout : {std::string("--ep 2 --rebalance-every 2"),
                                      std::string("--ep 2 --redundant-experts 2 --rebalance-every 2"),
                                      std::string("--tp 2 --ep 2 --redundant-experts 2 --rebalance-every 3"),
                                      std::string("--pp 2 --ep 2 --redundant-experts 2 --rebalance-every 2")}) {
      r = run_mpi(layout.find("--tp") != std::string::npos || layout.find("--pp") != std::string::npos ? 4 : 2,
                  run + " " + layout);
      ASSERT_EQ(r.code, 0) << layout << "\n" << r.err;
      const json j = json::parse(r.out);
      EXPECT_EQ(ids_of(j, "output_ids"), ids_of(json::parse(single.out), "output_ids")) << layout;
      // The experts did move (the rebalancer looked 11+ times at uneven loads).
      EXPECT_GT(j["expert_rebalancing"]["rebalances"].get<int>(), 0) << layout;
      EXPECT_GT(j["expert_rebalancing"]["experts_moved"].get<int>(), 0) << layout;
    }
  }
}

// A placement planned from measured loads, with replicas of the hottest
// experts (a token goes to the least-loaded replica), on 2 and 4 ranks:
// validate passes and the greedy tokens are the single process's.
TEST(CliParallel, PlannedPlacementWithReplicasKeepsTheTokens) {
  TempDir tmp;
  for (const char* family : kMoeFamilies) {
    SCOPED_TRACE(family);
    const std::string stats = tmp / (std::string(family) + ".stats");
    const std::string run = "run --model " + golden_dir(family) + "/hf --prompt-ids 1,5,6,7,8,9 --max-new-tokens 12 " +
                            "--temperature 0 --ignore-eos --json";
    const CmdResult one = run_rinfer(run + " --expert-stats " + stats);
    ASSERT_EQ(one.code, 0) << one.err;
    for (int ranks : {2, 4}) {
      const std::string plan = tmp / (std::string(family) + std::to_string(ranks) + ".plan");
      ASSERT_EQ(run_rinfer("plan-experts --stats " + stats + " --ranks " + std::to_string(ranks) + " --redundant " +
                           std::to_string(ranks) + " --out " + plan)
                    .code,
                0);
      const json p = read_json(plan);
      int replicated = 0;
      for (const auto& l : p["layers"])
        for (int n : l["replicas"]) replicated += n > 1;
      EXPECT_GT(replicated, 0) << "no expert has a replica";
      const std::string ep = " --ep " + std::to_string(ranks) + " --expert-placement " + plan;
      CmdResult r = run_mpi(ranks, "validate --golden " + golden_dir(family) + ep);
      EXPECT_EQ(r.code, 0) << ranks << " ranks\n" << r.out << r.err;
      EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
      r = run_mpi(ranks, run + ep);
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(ids_of(json::parse(r.out), "output_ids"), ids_of(json::parse(one.out), "output_ids")) << ranks;
    }
  }
}

// Each rank reads only its experts' weights.
TEST(CliParallel, ExpertParallelRanksHoldTheirExpertsOnly) {
  TempDir tmp;
  const std::string m = tmp / "mixtral", out = tmp / "b.json";
  ASSERT_EQ(run_rinfer("convert --hf " + golden_dir("mixtral") + "/hf --out " + m + " --dtype f32").code, 0);
  const std::string args = "bench --model " + m + " --prompt-len 8 --gen-len 2 --samples 1 --warmup 0 " +
                           "--no-roofline --json " + out;
  ASSERT_EQ(run_rinfer(args).code, 0);
  const double whole = read_json(out)["weight_bytes_total"].get<double>();
  const CmdResult r = run_mpi(2, args + " --ep 2");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = read_json(out);
  const double rank0 = j["weight_bytes_total"].get<double>();
  // Mixtral's experts are most of its weights: half of them go.
  EXPECT_LT(rank0, 0.8 * whole);
  EXPECT_GT(rank0, 0.3 * whole);
  // The (token, expert) pairs each rank computed, per MoE layer: top-2 of
  // every token run, split over the two ranks.
  EXPECT_EQ(j["ep"], 2);
  ASSERT_EQ(j["expert_parallel"]["layers"].size(), 2u);
  for (const auto& l : j["expert_parallel"]["layers"]) {
    ASSERT_EQ(l["rank_tokens"].size(), 2u);
    const double a = l["rank_tokens"][0].get<double>(), b = l["rank_tokens"][1].get<double>();
    EXPECT_GT(a + b, 0);
    EXPECT_EQ(int64_t(a + b) % 2, 0);  // top-2
    EXPECT_NEAR(l["balancedness"].get<double>(), (a + b) / 2 / std::max(a, b), 1e-9);
  }
}

TEST(CliParallel, ExpertPlacementsThatDoNotFitAreOneLineErrors) {
  TempDir tmp;
  const std::string mixtral = " --model " + golden_dir("mixtral") + "/hf --prompt-ids 1,5 --max-new-tokens 2";
  // Another model's placement (8 experts for a model of 4).
  const std::string stats = tmp / "s.json", plan8 = tmp / "p8.json", plan_missing = tmp / "missing.json";
  ASSERT_EQ(run_rinfer("run --model " + golden_dir("qwen2_moe") + "/hf --prompt-ids 1,5 --max-new-tokens 2 " +
                       "--expert-stats " + stats)
                .code,
            0);
  ASSERT_EQ(run_rinfer("plan-experts --stats " + stats + " --ranks 2 --out " + plan8).code, 0);
  CmdResult r = run_mpi(2, "run" + mixtral + " --ep 2 --expert-placement " + plan8, 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("layer 0 has 8 experts, the model 4"), std::string::npos) << r.err;
  // For another number of ranks.
  r = run_mpi(4, "run" + mixtral + " --ep 4 --expert-placement " + plan8, 60);
  EXPECT_NE(r.err.find("a placement for 2 ranks, not 4"), std::string::npos) << r.err;
  // An expert on no rank.
  json p = read_json(plan8);
  p["n_experts"] = 4;
  for (auto& l : p["layers"]) l["physical_to_logical"] = json::array({json::array({0, 1}), json::array({1, 2})});
  std::ofstream(plan_missing) << p.dump();
  r = run_mpi(2, "run" + mixtral + " --ep 2 --expert-placement " + plan_missing, 60);
  EXPECT_NE(r.err.find("expert 3 is on no rank"), std::string::npos) << r.err;
  // Ranks with different numbers of experts.
  for (auto& l : p["layers"]) l["physical_to_logical"] = json::array({json::array({0, 1, 2}), json::array({3})});
  std::ofstream(plan_missing) << p.dump();
  r = run_mpi(2, "run" + mixtral + " --ep 2 --expert-placement " + plan_missing, 60);
  EXPECT_NE(r.err.find("gives the ranks different numbers of experts (3 and 1)"), std::string::npos) << r.err;
  // Loads from rank 0 under --pp would miss the other stages' layers.
  r = run_mpi(2, "run" + mixtral + " --pp 2 --expert-stats " + (tmp / "pp.json"), 60);
  EXPECT_NE(r.err.find("--expert-stats with --pp"), std::string::npos) << r.err;
  // A dense model, and --ep with --tp.
  r = run_mpi(2, "run --model " + stories_hf() + " --prompt-ids 1,5 --max-new-tokens 2 --ep 2", 60);
  EXPECT_NE(r.err.find("--ep: LlamaForCausalLM has no mixture-of-experts layers"), std::string::npos) << r.err;
  r = run_mpi(2, "run" + mixtral + " --ep 2 --pp 2", 60);
  EXPECT_NE(r.err.find("--pp 2 --ep 2 (4 ranks) but mpirun started 2 ranks"), std::string::npos) << r.err;
  expect_error(run_rinfer("run" + mixtral + " --expert-placement " + plan8), "--expert-placement needs --ep",
               "a placement without --ep");
  expect_error(run_rinfer("run" + mixtral + " --redundant-experts 2"), "--redundant-experts needs --ep",
               "replicas without --ep");
  expect_error(run_rinfer("run" + mixtral + " --rebalance-every 5"), "--rebalance-every needs --ep",
               "rebalancing without --ep");
  r = run_mpi(2, "run" + mixtral + " --ep 2 --redundant-experts 2 --expert-placement " + plan8, 60);
  EXPECT_NE(r.err.find("the placement file already says how many replicas"), std::string::npos) << r.err;
  // Replicas that do not fill the ranks' slots evenly (4 + 1 over 2).
  r = run_mpi(2, "run" + mixtral + " --ep 2 --redundant-experts 1", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("4 experts + 1 redundant do not fill 2 ranks evenly"), std::string::npos) << r.err;
}

TEST(CliParallel, WorldsThatDoNotFitAreOneLineErrors) {
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
  // Stages and ranks that do not multiply to the world.
  r = run_mpi(2, "validate" + golden + " --tp 2 --pp 2", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("rinfer: error: --tp 2 --pp 2 (4 ranks) but mpirun started 2 ranks"), std::string::npos)
      << r.err;
  // More stages than layers (the tiny qwen2 has 2).
  r = run_mpi(3, "validate --golden " + golden_dir("qwen2") + " --pp 3", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("--pp 3: the model has 2 layers, fewer than the stages"), std::string::npos) << r.err;
  // --tp / --pp without mpirun.
  r = run_rinfer("validate" + golden + " --tp 2");
  expect_error(r, "--tp 2 needs mpirun -np 2", "--tp without mpirun");
  r = run_rinfer("validate" + golden + " --pp 2");
  expect_error(r, "--pp 2 needs mpirun -np 2", "--pp without mpirun");
  // A rank that fails alone (a prompt only rank 0 checks) still ends them all.
  r = run_mpi(2, "run --model " + stories_hf() + " --prompt-ids 1,999999 --tp 2", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("outside the vocabulary"), std::string::npos) << r.err;
}

// mpirun's MPMD form gives each rank its own --model: the ranks must find
// the same model, or rank 0 says which rank does not.
TEST(CliParallel, RanksThatSeeAnotherModelAreOneLineErrors) {
  TempDir tmp;
  const std::string a = tmp / "a", b = tmp / "b";
  ASSERT_EQ(run_rinfer("convert --hf " + golden_dir("llama") + "/hf --out " + a + " --dtype f32").code, 0);
  fs::copy(a, b, fs::copy_options::recursive);
  {
    std::ofstream desc(fs::path(b) / "model_desc.json", std::ios::app);
    desc << "\n";  // the same model, as far as JSON goes, but another file
  }
  auto mpmd = [&](const std::string& model0, const std::string& model1) {
    const std::string args = " validate --golden " + golden_dir("llama") + " --pp 2 --model ";
    return run_mpi(1, args + model0 + " : -np 1 " + RINFER_BIN + args + model1, 60);
  };
  CmdResult r = mpmd(a, a);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  r = mpmd(a, b);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("rinfer: error: rank 1 sees another model at " + a), std::string::npos) << r.err;
  r = mpmd(a, tmp / "missing");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_NE(r.err.find("rinfer: error: rank 1 has no model at " + a), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rinfer::test::cli
