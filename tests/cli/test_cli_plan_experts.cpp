// rinfer plan-experts: from the expert loads rinfer run measures on a real
// MoE model to a placement file, and bad input as one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

TEST(CliPlanExperts, PlansFromMeasuredLoads) {
  TempDir tmp;
  const std::string stats = tmp / "stats.json", out = tmp / "placement.json";
  // Mixtral's tiny checkpoint: 4 experts per layer, top-2.
  CmdResult r = run_rinfer("run --model " + golden_dir("mixtral") + "/hf --prompt-ids 1,5,6,7,8,9,10,11 " +
                           "--max-new-tokens 16 --temperature 0 --ignore-eos --expert-stats " + stats);
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_rinfer("plan-experts --stats " + stats + " --ranks 2 --redundant 2 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("balancedness"), std::string::npos) << r.out;
  const json s = read_json(stats), p = read_json(out);
  EXPECT_EQ(p["format"], "rinfer-expert-placement");
  EXPECT_EQ(p["ranks"], 2);
  EXPECT_EQ(p["n_experts"], 4);
  ASSERT_EQ(p["layers"].size(), s["layers"].size());
  for (size_t i = 0; i < p["layers"].size(); ++i) {
    const json& l = p["layers"][i];
    EXPECT_EQ(l["layer"], s["layers"][i]["layer"]);
    ASSERT_EQ(l["physical_to_logical"].size(), 2u);
    std::set<int> placed;
    for (const auto& rank : l["physical_to_logical"]) {
      EXPECT_EQ(rank.size(), 3u);  // (4 experts + 2 redundant) / 2 ranks
      for (int e : rank) placed.insert(e);
    }
    EXPECT_EQ(placed, (std::set<int>{0, 1, 2, 3}));
    // The predicted per-rank loads add up to the measured tokens.
    double measured = 0, predicted = 0;
    for (double c : s["layers"][i]["counts"]) measured += c;
    for (double c : l["predicted_load"]) predicted += c;
    EXPECT_NEAR(predicted, measured, 1e-6);
    // Heaviest-first packing: no rank above the mean by more than the
    // heaviest physical expert (a load over its replicas).
    double heaviest = 0, most = 0;
    for (size_t e = 0; e < 4; ++e)
      heaviest = std::max(heaviest, s["layers"][i]["counts"][e].get<double>() / l["replicas"][e].get<double>());
    for (double c : l["predicted_load"]) most = std::max(most, c);
    EXPECT_LE(most, measured / 2 + heaviest + 1e-9);
  }
}

TEST(CliPlanExperts, BadInputIsAOneLineError) {
  TempDir tmp;
  const std::string out = tmp / "p.json";
  {
    std::ofstream(tmp / "bad.json") << "{not json";
    std::ofstream(tmp / "other.json") << R"({"layers": 3})";
    std::ofstream(tmp / "five.json") << R"({"layers": [{"layer": 0, "counts": [1, 2, 3, 4, 5]}]})";
  }
  expect_error(run_rinfer("plan-experts --stats " + tmp / "bad.json" + " --ranks 2 --out " + out), "bad.json",
               "stats that do not parse");
  expect_error(run_rinfer("plan-experts --stats " + tmp / "other.json" + " --ranks 2 --out " + out),
               "not expert statistics", "stats of another shape");
  expect_error(run_rinfer("plan-experts --stats " + tmp / "five.json" + " --ranks 2 --out " + out),
               "5 experts + 0 redundant do not fill 2 ranks evenly", "experts that do not fill the ranks");
  expect_error(run_rinfer("plan-experts --stats " + tmp / "missing.json" + " --ranks 2 --out " + out), "missing.json",
               "a missing stats file");
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace rinfer::test::cli
