#include "parallel/expert_placement.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/json_file.h"

namespace rinfer {

double balancedness(const std::vector<double>& rank_load) {
  if (rank_load.empty()) return 1.0;
  const double mx = *std::max_element(rank_load.begin(), rank_load.end());
  const double mean = std::accumulate(rank_load.begin(), rank_load.end(), 0.0) / double(rank_load.size());
  return mx > 0 ? mean / mx : 1.0;
}

double LayerPlacement::balancedness() const { return rinfer::balancedness(rank_load); }

std::vector<double> rank_loads(const LayerPlacement& p, const std::vector<double>& loads) {
  RINFER_CHECK(loads.size() == p.replicas.size(), "expert loads for ", loads.size(), " experts, a placement of ",
               p.replicas.size());
  std::vector<double> out(p.rank_experts.size(), 0.0);
  for (size_t r = 0; r < p.rank_experts.size(); ++r)
    for (int32_t e : p.rank_experts[r]) out[r] += loads[size_t(e)] / double(p.replicas[size_t(e)]);
  return out;
}

namespace {

// Replicas and packing of `experts` (logical ids, with their loads) onto
// `ranks` (rank ids) with `redundant` extra slots; adds to p.
void place(const std::vector<double>& loads, const std::vector<int32_t>& experts, const std::vector<int>& ranks,
           int redundant, LayerPlacement& p) {
  const int64_t E = int64_t(experts.size()), R = int64_t(ranks.size());
  const int64_t slots = (E + redundant) / R;
  std::vector<int32_t> reps(size_t(E), 1);
  // At most one replica per rank: a second copy on the same rank would take
  // a slot without spreading the expert's load.
  for (int k = 0; k < redundant; ++k) {
    int64_t best = -1;
    for (int64_t i = 0; i < E; ++i)
      if (reps[size_t(i)] < R && (best < 0 || loads[size_t(experts[size_t(i)])] / reps[size_t(i)] >
                                                  loads[size_t(experts[size_t(best)])] / reps[size_t(best)]))
        best = i;
    RINFER_CHECK(best >= 0, redundant, " redundant experts are more than ", E, " experts can have on ", R,
                 " ranks (one replica per rank)");
    ++reps[size_t(best)];
  }
  struct Item {
    double load;
    int32_t expert;
  };
  std::vector<Item> items;
  for (int64_t i = 0; i < E; ++i) {
    p.replicas[size_t(experts[size_t(i)])] = reps[size_t(i)];
    for (int32_t r = 0; r < reps[size_t(i)]; ++r)
      items.push_back({loads[size_t(experts[size_t(i)])] / reps[size_t(i)], experts[size_t(i)]});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.load > b.load || (a.load == b.load && a.expert < b.expert);
  });
  for (const Item& it : items) {
    // The least-loaded rank with a free slot, preferring one without this
    // expert (a second replica on the same rank would not spread its load).
    int pick = -1;
    for (int pass = 0; pass < 2 && pick < 0; ++pass)
      for (int r : ranks) {
        auto& held = p.rank_experts[size_t(r)];
        if (int64_t(held.size()) >= slots) continue;
        if (pass == 0 && std::find(held.begin(), held.end(), it.expert) != held.end()) continue;
        if (pick < 0 || p.rank_load[size_t(r)] < p.rank_load[size_t(pick)]) pick = r;
      }
    p.rank_experts[size_t(pick)].push_back(it.expert);
    p.rank_load[size_t(pick)] += it.load;
  }
}

}  // namespace

LayerPlacement plan_layer(const std::vector<double>& loads, const PlacementOptions& o, int64_t layer) {
  const int64_t E = int64_t(loads.size());
  RINFER_CHECK(E > 0, "layer ", layer, ": no expert loads");
  RINFER_CHECK(o.ranks >= 1, "--ranks must be >= 1, got ", o.ranks);
  RINFER_CHECK(o.redundant >= 0, "--redundant must be >= 0, got ", o.redundant);
  for (double w : loads) RINFER_CHECK(w >= 0, "layer ", layer, ": a negative expert load ", w);
  RINFER_CHECK((E + o.redundant) % o.ranks == 0, E, " experts + ", o.redundant, " redundant do not fill ", o.ranks,
               " ranks evenly (make experts + redundant a multiple of the ranks)");
  RINFER_CHECK((E + o.redundant) / o.ranks >= 1, "fewer physical experts than ranks");
  LayerPlacement p;
  p.layer = layer;
  p.rank_experts.resize(size_t(o.ranks));
  p.rank_load.assign(size_t(o.ranks), 0.0);
  p.replicas.assign(size_t(E), 0);
  if (!(o.group_limited && o.n_group > 1)) {
    std::vector<int32_t> experts(static_cast<size_t>(E));
    std::iota(experts.begin(), experts.end(), 0);
    std::vector<int> ranks(static_cast<size_t>(o.ranks));
    std::iota(ranks.begin(), ranks.end(), 0);
    place(loads, experts, ranks, o.redundant, p);
    return p;
  }
  // Groups onto sets of ranks (heaviest group first, to the lightest set
  // with room), then each set on its own.
  const int G = o.n_group, S = std::min(o.n_group, o.ranks);
  RINFER_CHECK(E % G == 0, E, " experts do not form ", G, " equal groups");
  RINFER_CHECK(o.ranks % S == 0 && G % S == 0 && o.redundant % S == 0, "--group-limited: ", G, " groups, ", o.ranks,
               " ranks and ", o.redundant, " redundant experts do not split into ", S, " equal sets");
  const int64_t per_group = E / G;
  std::vector<double> group_load(size_t(G), 0.0);
  for (int64_t e = 0; e < E; ++e) group_load[size_t(e / per_group)] += loads[size_t(e)];
  std::vector<int> order(static_cast<size_t>(G));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return group_load[size_t(a)] > group_load[size_t(b)]; });
  std::vector<std::vector<int32_t>> set_experts(static_cast<size_t>(S));
  std::vector<double> set_load(size_t(S), 0.0);
  std::vector<int> set_groups(size_t(S), 0);
  for (int g : order) {
    int pick = -1;
    for (int s = 0; s < S; ++s)
      if (set_groups[size_t(s)] < G / S && (pick < 0 || set_load[size_t(s)] < set_load[size_t(pick)])) pick = s;
    ++set_groups[size_t(pick)];
    set_load[size_t(pick)] += group_load[size_t(g)];
    for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) set_experts[size_t(pick)].push_back(int32_t(e));
  }
  const int per_set = o.ranks / S;
  for (int s = 0; s < S; ++s) {
    std::sort(set_experts[size_t(s)].begin(), set_experts[size_t(s)].end());
    std::vector<int> ranks(static_cast<size_t>(per_set));
    std::iota(ranks.begin(), ranks.end(), s * per_set);
    place(loads, set_experts[size_t(s)], ranks, o.redundant / S, p);
  }
  return p;
}

LayerPlacement contiguous_layer(const std::vector<double>& loads, int ranks, int64_t layer) {
  const int64_t E = int64_t(loads.size());
  RINFER_CHECK(ranks >= 1 && E % ranks == 0, E, " experts do not split evenly over ", ranks, " ranks");
  LayerPlacement p;
  p.layer = layer;
  p.rank_experts.resize(size_t(ranks));
  p.rank_load.assign(size_t(ranks), 0.0);
  p.replicas.assign(size_t(E), 1);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r = e / (E / ranks);
    p.rank_experts[size_t(r)].push_back(int32_t(e));
    p.rank_load[size_t(r)] += loads[size_t(e)];
  }
  return p;
}

ExpertPlan ExpertPlan::load(const std::string& path, int ranks) {
  ExpertPlan plan;
  plan.source = path;
  plan.ranks = ranks;
  const nlohmann::json j = read_json_file(path);
  try {
    RINFER_CHECK(j.is_object() && j.value("format", "") == "rinfer-expert-placement", path,
                 ": not an expert placement (rinfer plan-experts writes them)");
    RINFER_CHECK(j.at("ranks").get<int>() == ranks, path, ": a placement for ", j.at("ranks").get<int>(),
                 " ranks, not ", ranks);
    for (const auto& l : j.at("layers")) {
      LayerPlacement p;
      p.layer = l.at("layer").get<int64_t>();
      p.rank_experts = l.at("physical_to_logical").get<std::vector<std::vector<int32_t>>>();
      RINFER_CHECK(int(p.rank_experts.size()) == ranks, path, ": layer ", p.layer, " places experts on ",
                   p.rank_experts.size(), " ranks, not ", ranks);
      for (const auto& r : p.rank_experts)
        RINFER_CHECK(r.size() == p.rank_experts[0].size(), path, ": layer ", p.layer,
                     " gives the ranks different numbers of experts (", p.rank_experts[0].size(), " and ", r.size(),
                     ")");
      const int64_t E = j.at("n_experts").get<int64_t>();
      p.replicas.assign(size_t(std::max<int64_t>(E, 0)), 0);
      for (const auto& r : p.rank_experts)
        for (int32_t e : r) {
          RINFER_CHECK(e >= 0 && e < E, path, ": layer ", p.layer, " places expert ", e, " of ", E);
          ++p.replicas[size_t(e)];
        }
      p.rank_load.assign(size_t(ranks), 0.0);
      plan.layers[p.layer] = std::move(p);
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not an expert placement: ", e.what());
  }
  return plan;
}

LayerPlacement ExpertPlan::layer(int64_t layer, int64_t n_experts) const {
  if (source.empty()) {
    const std::vector<double> even(size_t(n_experts), 1.0);
    if (redundant == 0) return contiguous_layer(even, ranks, layer);
    PlacementOptions o;
    o.ranks = ranks;
    o.redundant = redundant;
    return plan_layer(even, o, layer);
  }
  const auto it = layers.find(layer);
  RINFER_CHECK(it != layers.end(), source, ": no placement for MoE layer ", layer, " (a placement for another model?)");
  RINFER_CHECK(int64_t(it->second.replicas.size()) == n_experts, source, ": layer ", layer, " has ",
               it->second.replicas.size(), " experts, the model ", n_experts);
  for (int64_t e = 0; e < n_experts; ++e)
    RINFER_CHECK(it->second.replicas[size_t(e)] > 0, source, ": layer ", layer, ": expert ", e, " is on no rank");
  return it->second;
}

ReplicaRouter::ReplicaRouter(const LayerPlacement& p)
    : holders_(p.replicas.size()), tokens_(p.rank_experts.size(), 0) {
  for (size_t r = 0; r < p.rank_experts.size(); ++r)
    for (int32_t e : p.rank_experts[r]) {
      RINFER_CHECK(e >= 0 && size_t(e) < holders_.size(), "placement: expert ", e, " is not in the layer");
      auto& h = holders_[size_t(e)];
      if (h.empty() || h.back() != int(r)) h.push_back(int(r));
    }
  for (size_t e = 0; e < holders_.size(); ++e)
    RINFER_CHECK(!holders_[e].empty(), "placement of layer ", p.layer, ": expert ", e, " is on no rank");
}

void ReplicaRouter::begin_step() { std::fill(tokens_.begin(), tokens_.end(), 0); }

int ReplicaRouter::route(int32_t expert) {
  const auto& h = holders_[size_t(expert)];
  int best = h[0];
  for (int r : h)
    if (tokens_[size_t(r)] < tokens_[size_t(best)]) best = r;
  ++tokens_[size_t(best)];
  return best;
}

}  // namespace rinfer
