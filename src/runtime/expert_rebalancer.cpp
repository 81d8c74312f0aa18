#include "runtime/expert_rebalancer.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"

namespace rinfer {

ExpertRebalancer::ExpertRebalancer(const Model& model, const ExpertPlan& initial, int64_t every)
    : every_(every), ranks_(initial.ranks) {
  RINFER_CHECK(every > 0, "--rebalance-every must be at least 1 step");
  looks_.push_back(model.expert_counts());
  last_rank_tokens_ = model.expert_rank_tokens();
  const auto& counts = looks_.back();
  for (size_t l = 0; l < counts.size(); ++l)
    if (!counts[l].empty()) current_[int64_t(l)] = initial.layer(int64_t(l), int64_t(counts[l].size()));
  RINFER_CHECK(!current_.empty(), "--rebalance-every: the model has no mixture-of-experts layers");
}

namespace {

// Physical experts (rank, slot) whose logical expert differs between a and b.
int64_t changed_slots(const LayerPlacement& a, const LayerPlacement& b) {
  int64_t n = 0;
  for (size_t r = 0; r < a.rank_experts.size(); ++r) {
    std::vector<int32_t> x = a.rank_experts[r], y = b.rank_experts[r];
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    std::vector<int32_t> gained;
    std::set_difference(y.begin(), y.end(), x.begin(), x.end(), std::back_inserter(gained));
    n += int64_t(gained.size());
  }
  return n;
}

}  // namespace

bool ExpertRebalancer::after_step(Model& model) {
  if (++steps_ % every_ != 0) return false;
  looks_.push_back(model.expert_counts());
  if (int(looks_.size()) > kWindowLooks + 1) looks_.erase(looks_.begin());
  const auto& counts = looks_.back();
  const auto& oldest = looks_.front();
  const auto rank_tokens = model.expert_rank_tokens();
  ExpertPlan next;
  next.source = "rebalance";
  next.ranks = ranks_;
  for (auto& [layer, placed] : current_) {
    const size_t l = size_t(layer);
    std::vector<double> window(counts[l].size());
    double total = 0;
    for (size_t e = 0; e < window.size(); ++e) total += window[e] = double(counts[l][e] - oldest[l][e]);
    std::vector<double> served(rank_tokens[l].size());
    for (size_t r = 0; r < served.size(); ++r) served[r] = double(rank_tokens[l][r] - last_rank_tokens_[l][r]);
    window_balance_[layer] = balancedness(served);
    if (total == 0) continue;
    PlacementOptions o;
    o.ranks = ranks_;
    o.redundant = int(placed.rank_experts[0].size()) * ranks_ - int(window.size());
    LayerPlacement plan = plan_layer(window, o, layer);
    if (balancedness(plan.rank_load) < balancedness(rank_loads(placed, window)) + kMinGain) continue;
    moved_ += changed_slots(placed, plan);
    next.layers[layer] = plan;
  }
  last_rank_tokens_ = rank_tokens;
  if (next.layers.empty()) return false;
  model.place_experts(next);
  for (auto& [layer, plan] : next.layers) current_[layer] = std::move(plan);
  ++rebalances_;
  return true;
}

}  // namespace rinfer
