#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace rinfer::server {

namespace {
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}
void scalar(std::string& out, const std::string& name, const char* type, const std::string& help, double v) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + num(v) + "\n";
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++n_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(n_) + "\n";
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(n_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120}) {}

void Metrics::observe_finished(const std::string& finish_reason, const GenerationEvent& last) {
  std::lock_guard<std::mutex> lk(mu_);
  ++finished_[finish_reason];
  if (last.n_generated > 0) ttft_.observe(last.ttft_s);
  if (last.n_generated > 1) tpot_.observe((last.e2e_s - last.ttft_s) / double(last.n_generated - 1));
  // A choice given up on before its engine's last event came has no times.
  if (last.e2e_s > 0) e2e_.observe(last.e2e_s);
}

void Metrics::count_rejected(int http_status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++rejected_[http_status];
}

std::string Metrics::render(const EngineStats& s) const {
  std::string out;
  scalar(out, "rinfer_requests_running", "gauge", "Sequences running in the engine.", double(s.n_running));
  scalar(out, "rinfer_requests_waiting", "gauge", "Sequences waiting to be scheduled.", double(s.n_waiting));
  scalar(out, "rinfer_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.", double(s.kv_blocks_total));
  scalar(out, "rinfer_kv_cache_blocks_used", "gauge", "KV cache blocks referenced by sequences.",
         double(s.kv_blocks_used));
  scalar(out, "rinfer_kv_cache_blocks_cached", "gauge",
         "KV cache blocks holding a cached prefix that no sequence uses (evictable).", double(s.kv_blocks_cached));
  scalar(out, "rinfer_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use (0 to 1).",
         s.kv_blocks_total > 0 ? double(s.kv_blocks_used) / double(s.kv_blocks_total) : 0.0);
  scalar(out, "rinfer_kv_cache_block_size", "gauge", "Tokens per KV cache block.", double(s.block_size));
  scalar(out, "rinfer_prompt_tokens_total", "counter", "Prompt tokens run through the model (recomputation included).",
         double(s.prompt_tokens_total));
  scalar(out, "rinfer_generation_tokens_total", "counter", "Tokens generated.", double(s.generation_tokens_total));
  scalar(out, "rinfer_engine_steps_total", "counter", "Engine steps (batched forward passes).", double(s.steps_total));
  scalar(out, "rinfer_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
         double(s.preemptions_total));
  scalar(out, "rinfer_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         double(s.prefix_queried_tokens));
  scalar(out, "rinfer_prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
         double(s.prefix_hit_tokens));
  scalar(out, "rinfer_spec_decode_draft_tokens_total", "counter",
         "Speculative decoding: drafted tokens verified by the model.", double(s.spec_draft_tokens_total));
  scalar(out, "rinfer_spec_decode_accepted_tokens_total", "counter",
         "Speculative decoding: drafted tokens accepted (each saved a forward pass).",
         double(s.spec_accepted_tokens_total));
  std::lock_guard<std::mutex> lk(mu_);
  if (s.pipeline_stages > 1) {
    scalar(out, "rinfer_pipeline_stages", "gauge", "Pipeline stages (--pp).", double(s.pipeline_stages));
    scalar(out, "rinfer_pipeline_micro_batches", "gauge", "Micro-batches per step (--micro-batches).",
           double(s.micro_batches));
    scalar(out, "rinfer_pipeline_forward_seconds_total", "counter", "Seconds of forward passes through all stages.",
           s.pipeline_wall_s);
    scalar(out, "rinfer_pipeline_busy_seconds_total", "counter", "Compute seconds of the stages, summed.",
           s.pipeline_busy_s);
    scalar(out, "rinfer_pipeline_bubble_fraction", "gauge",
           "Share of the stages' forward time spent waiting (1 - busy / (stages x forward)).",
           s.pipeline_bubble_fraction);
  }
  if (!s.expert_rank_tokens.empty()) {
    out += "# HELP rinfer_expert_rank_tokens_total (Token, expert) pairs each expert-parallel rank computed, by MoE layer.\n";
    out += "# TYPE rinfer_expert_rank_tokens_total counter\n";
    for (size_t l = 0; l < s.expert_rank_tokens.size(); ++l)
      for (size_t r = 0; r < s.expert_rank_tokens[l].size(); ++r)
        out += "rinfer_expert_rank_tokens_total{layer=\"" + std::to_string(l) + "\",rank=\"" + std::to_string(r) +
               "\"} " + std::to_string(s.expert_rank_tokens[l][r]) + "\n";
    out += "# HELP rinfer_expert_balancedness Mean over max of the ranks' expert tokens so far, by MoE layer (1: even).\n";
    out += "# TYPE rinfer_expert_balancedness gauge\n";
    for (size_t l = 0; l < s.expert_rank_tokens.size(); ++l) {
      const auto& t = s.expert_rank_tokens[l];
      if (t.empty()) continue;
      uint64_t sum = 0, mx = 0;
      for (uint64_t v : t) {
        sum += v;
        mx = std::max(mx, v);
      }
      const double b = mx > 0 ? double(sum) / double(t.size()) / double(mx) : 1.0;
      out += "rinfer_expert_balancedness{layer=\"" + std::to_string(l) + "\"} " + num(b) + "\n";
    }
  }
  if (s.rebalancing) {
    scalar(out, "rinfer_expert_rebalances_total", "counter",
           "Looks of the online rebalancer (--rebalance-every) that moved experts.", double(s.expert_rebalances));
    scalar(out, "rinfer_expert_moves_total", "counter", "Physical experts the online rebalancer moved to another rank.",
           double(s.experts_moved));
    out += "# HELP rinfer_expert_window_balancedness Mean over max of the ranks' expert tokens in the last "
           "rebalancing window, by MoE layer (1: even).\n";
    out += "# TYPE rinfer_expert_window_balancedness gauge\n";
    for (const auto& [l, b] : s.expert_window_balancedness)
      out += "rinfer_expert_window_balancedness{layer=\"" + std::to_string(l) + "\"} " + num(b) + "\n";
  }
  out += "# HELP rinfer_requests_finished_total Requests finished, by reason.\n";
  out += "# TYPE rinfer_requests_finished_total counter\n";
  for (const char* r : {"stop", "length", "cancelled", "error"}) {
    auto it = finished_.find(r);
    out += std::string("rinfer_requests_finished_total{finish_reason=\"") + r + "\"} " +
           std::to_string(it == finished_.end() ? 0 : it->second) + "\n";
  }
  out += "# HELP rinfer_requests_rejected_total Requests refused before reaching the engine, by HTTP status.\n";
  out += "# TYPE rinfer_requests_rejected_total counter\n";
  for (const auto& [status, n] : rejected_)
    out += "rinfer_requests_rejected_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  ttft_.render(out, "rinfer_time_to_first_token_seconds", "Time from arrival to the first token.");
  tpot_.render(out, "rinfer_time_per_output_token_seconds", "Mean time between output tokens of a request.");
  e2e_.render(out, "rinfer_e2e_request_latency_seconds", "Time from arrival to the last token.");
  return out;
}

}  // namespace rinfer::server
