#pragma once
// ExpertRebalancer: online expert placement under expert parallelism. Every
// `every` forward steps it takes each MoE layer's expert loads over a moving
// window (the last kWindowLooks periods), plans that layer again with the
// same number of physical experts (plan_layer), and moves the layer to the
// new plan when the plan would have carried the window clearly more evenly
// than the placement in force (balancedness higher by kMinGain): a plan
// fitted to a short window's noise would move experts back and forth, and
// a move costs reading the gained experts. Every rank runs one after each
// step and counts the
// same tokens (routing is replicated), so every rank decides and moves alike
// without a message; an expert a rank gains is read from its own copy of the
// weights, one it loses is dropped. Without replicas outputs do not change
// (moe.h sums in one process's order); with replicas a move can change
// which rows an expert's batch holds, and so the last bits.
#include <cstdint>
#include <map>
#include <vector>

#include "parallel/expert_placement.h"

namespace rinfer {

class Model;

class ExpertRebalancer {
 public:
  static constexpr int kWindowLooks = 4;
  static constexpr double kMinGain = 0.02;
  // initial: the placement the model was loaded with; its layers' slot
  // counts are kept.
  ExpertRebalancer(const Model& model, const ExpertPlan& initial, int64_t every);
  // After every forward step, on every rank alike; true when experts moved.
  bool after_step(Model& model);

  int64_t every() const { return every_; }
  int64_t rebalances() const { return rebalances_; }  // looks that moved at least one layer
  int64_t experts_moved() const { return moved_; }    // physical experts that changed rank, all layers
  // Per MoE layer (decoder layer index): the measured balancedness (mean /
  // max (token, expert) pairs per rank) over the last period, under the
  // placement then in force; empty before the first look.
  const std::map<int64_t, double>& window_balancedness() const { return window_balance_; }
  const LayerPlacement& placement(int64_t layer) const { return current_.at(layer); }

 private:
  int64_t every_;
  int64_t steps_ = 0;
  int64_t rebalances_ = 0;
  int64_t moved_ = 0;
  int ranks_;
  std::map<int64_t, LayerPlacement> current_;
  std::vector<std::vector<std::vector<uint64_t>>> looks_;  // expert counts at the last kWindowLooks + 1 looks
  std::vector<std::vector<uint64_t>> last_rank_tokens_;
  std::map<int64_t, double> window_balance_;
};

}  // namespace rinfer
