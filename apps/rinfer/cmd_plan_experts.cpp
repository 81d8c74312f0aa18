// rinfer plan-experts: an expert placement for expert parallelism from
// measured expert loads (rinfer run --expert-stats), per layer: replicas for
// the hottest experts and a balanced packing onto ranks
// (parallel/expert_placement.h), written as JSON with the predicted load of
// every rank.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "parallel/expert_placement.h"

namespace rinfer::cli {

namespace {
template <typename... Args>
std::string str_printf(const char* fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}
}  // namespace

Runner add_plan_experts(CLI::App& app) {
  struct Opts {
    std::string stats, out;
    int ranks = 0, redundant = 0, groups = 1;
    bool group_limited = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("plan-experts",
                                 "Plan which rank holds which MoE experts (and replicas of the hottest) from measured "
                                 "expert loads");
  cmd->add_option("--stats", o->stats, "Expert loads: the JSON of rinfer run --expert-stats")->required();
  cmd->add_option("--ranks", o->ranks, "Expert-parallel ranks")->required()->check(integer_in(1, 4096));
  cmd->add_option("--redundant", o->redundant,
                  "Extra physical experts per layer over all ranks, replicas of the heaviest (default 0)")
      ->check(integer_in(0, 1 << 20));
  cmd->add_option("--groups", o->groups, "Expert groups (DeepSeek-V3's n_group), for --group-limited")
      ->check(integer_in(1, 4096));
  cmd->add_flag("--group-limited", o->group_limited,
                "Keep each group's experts and replicas on one set of ranks (node-limited routing)");
  cmd->add_option("--out", o->out, "Write the placement JSON here")->required();
  return [o]() -> int {
    const nlohmann::json stats = read_json_file(o->stats);
    PlacementOptions po;
    po.ranks = o->ranks;
    po.redundant = o->redundant;
    po.n_group = o->groups;
    po.group_limited = o->group_limited;
    RINFER_CHECK(!o->group_limited || o->groups > 1, "--group-limited needs --groups > 1");
    nlohmann::json layers = nlohmann::json::array();
    int64_t n_experts = -1;
    double worst_before = 1, worst_after = 1;
    std::string table;  // printed once the plan is written: nothing on stdout on an error
    try {
      RINFER_CHECK(stats.is_object() && stats.contains("layers") && stats.at("layers").is_array() &&
                       !stats.at("layers").empty(),
                   o->stats, ": not expert statistics (rinfer run --expert-stats writes them)");
      table += str_printf("%-6s %8s %16s %16s\n", "layer", "experts", "contiguous", "planned");
      for (const auto& l : stats.at("layers")) {
        const int64_t layer = l.at("layer").get<int64_t>();
        const std::vector<double> loads = l.at("counts").get<std::vector<double>>();
        RINFER_CHECK(n_experts < 0 || int64_t(loads.size()) == n_experts, o->stats, ": layer ", layer, " has ",
                     loads.size(), " experts, layer ", layers.back().at("layer"), " ", n_experts);
        n_experts = int64_t(loads.size());
        const LayerPlacement p = plan_layer(loads, po, layer);
        const double before = int64_t(loads.size()) % o->ranks == 0
                                  ? contiguous_layer(loads, o->ranks, layer).balancedness()
                                  : -1;
        worst_before = std::min(worst_before, before < 0 ? worst_before : before);
        worst_after = std::min(worst_after, p.balancedness());
        char b[32] = "-";
        if (before >= 0) std::snprintf(b, sizeof b, "%.3f", before);
        table += str_printf("%-6lld %8lld %16s %16.3f\n", (long long)layer, (long long)loads.size(), b,
                            p.balancedness());
        nlohmann::json jl = {{"layer", layer},
                             {"physical_to_logical", p.rank_experts},
                             {"replicas", p.replicas},
                             {"predicted_load", p.rank_load},
                             {"balancedness", p.balancedness()}};
        if (before >= 0) jl["contiguous_balancedness"] = before;
        layers.push_back(jl);
      }
    } catch (const nlohmann::json::exception& e) {
      fail(o->stats, ": not expert statistics: ", e.what());
    }
    const nlohmann::json out = {{"format", "rinfer-expert-placement"},
                                {"format_version", 1},
                                {"model", stats.value("model", "")},
                                {"architecture", stats.value("architecture", "")},
                                {"ranks", o->ranks},
                                {"redundant", o->redundant},
                                {"n_experts", n_experts},
                                {"groups", o->groups},
                                {"group_limited", o->group_limited},
                                {"layers", layers}};
    write_file_atomic(o->out, out.dump(1) + "\n");
    std::fputs(table.c_str(), stdout);
    std::printf("balancedness (mean / max tokens per rank), worst layer: contiguous %.3f, planned %.3f -> %s\n",
                worst_before, worst_after, o->out.c_str());
    return 0;
  };
}

}  // namespace rinfer::cli
