#include "model/moe_layout.h"

#include <algorithm>

#include "core/error.h"
#include "model/llama_layout.h"

namespace rinfer {

std::vector<TensorSpec> moe_specs(const std::string& p, const MoeRouting& r, const MoeShape& s, const MoeNames& n) {
  std::vector<TensorSpec> out;
  // Routers stay in f32: a rounded score can flip which expert is chosen.
  out.push_back({p + n.router + ".weight", {r.n_experts, s.hidden}, TensorRole::Vector});
  if (!n.correction_bias.empty()) out.push_back({p + n.correction_bias, {r.n_experts}, TensorRole::Vector});
  for (int64_t e = 0; e < r.n_experts; ++e) {
    auto m = gated_mlp_specs(p + "experts." + std::to_string(e) + ".", s.hidden, s.expert_inter, false, n.gate, n.up,
                             n.down);
    out.insert(out.end(), m.begin(), m.end());
  }
  if (!n.shared.empty()) {
    auto m = gated_mlp_specs(p + n.shared + ".", s.hidden, s.shared_inter);
    out.insert(out.end(), m.begin(), m.end());
  }
  if (!n.shared_gate.empty()) out.push_back({p + n.shared_gate + ".weight", {1, s.hidden}, TensorRole::Vector});
  return out;
}

std::unique_ptr<FeedForwardBlock> make_moe(const WeightStore& w, const std::string& p, const MoeRouting& r,
                                           const MoeShape& s, const MoeNames& n, const Shard& shard, int64_t layer) {
  Linear router = Linear::load(w, p + n.router, s.hidden, r.n_experts, false);
  const float* bias = n.correction_bias.empty() ? nullptr : w.get_f32(p + n.correction_bias, {r.n_experts});
  std::vector<GatedMLP> experts;
  std::unique_ptr<ExpertParallel> ep;
  if (shard.ep_world > 1) {
    RINFER_CHECK(shard.experts, "expert parallelism without an expert placement");
    ep = std::make_unique<ExpertParallel>(shard.ep_rank, shard.experts->layer(layer, r.n_experts));
  }
  for (int64_t e = 0; e < r.n_experts; ++e) {
    if (ep && !ep->holds(int32_t(e))) {
      experts.emplace_back();  // another rank's
      continue;
    }
    experts.push_back(GatedMLP::load(w, p + "experts." + std::to_string(e) + ".", s.hidden, s.expert_inter, n.gate,
                                     n.up, n.down, false, shard));
  }
  std::unique_ptr<GatedMLP> shared;
  if (!n.shared.empty())
    shared = std::make_unique<GatedMLP>(GatedMLP::load(w, p + n.shared + ".", s.hidden, s.shared_inter, "gate_proj",
                                                       "up_proj", "down_proj", false, shard));
  Linear shared_gate;
  if (!n.shared_gate.empty()) shared_gate = Linear::load(w, p + n.shared_gate, s.hidden, 1, false);
  const bool expert_parallel = ep != nullptr;
  auto moe = std::make_unique<MoeFeedForward>(r, router, bias, std::move(experts), std::move(shared), shared_gate,
                                              std::move(ep));
  if (expert_parallel) {
    // Rebalancing reads an expert a rank gains from the same weights (they
    // outlive the model: whoever loaded it owns both).
    const std::string experts_prefix = p + "experts.";
    moe->set_expert_source(
        [&w, experts_prefix, s, n, shard](int32_t e) {
          return GatedMLP::load(w, experts_prefix + std::to_string(e) + ".", s.hidden, s.expert_inter, n.gate, n.up,
                                n.down, false, shard);
        },
        [&w, experts_prefix, n](int32_t e) {
          for (const char* proj : {n.gate, n.up, n.down})
            w.release_pages(experts_prefix + std::to_string(e) + "." + proj + ".weight");
        });
  }
  return moe;
}

nlohmann::json moe_to_json(const MoeRouting& r, const MoeShape& s) {
  // Every family's MoE config passes here: the expert count is a loop count
  // over tensor specs (and experts' weights), so it is bounded like layers.
  RINFER_CHECK(r.n_experts >= 0 && r.n_experts <= kMaxExperts, "config.json: the number of experts (", r.n_experts,
               ") is out of range (at most ", kMaxExperts, ")");
  return {{"n_experts", r.n_experts},
          {"top_k", r.top_k},
          {"sigmoid", r.sigmoid},
          {"norm_topk_prob", r.norm_topk_prob},
          {"routed_scaling", r.routed_scaling},
          {"scale_only_unnormalized", r.scale_only_unnormalized},
          {"n_group", r.n_group},
          {"topk_group", r.topk_group},
          {"group_score_top2_sum", r.group_score_top2_sum},
          {"expert_intermediate", s.expert_inter},
          {"shared_intermediate", s.shared_inter}};
}

MoeConfig moe_config(const ModelConfig& c) {
  const nlohmann::json& j = c.family.at("moe");
  MoeConfig m;
  MoeRouting& r = m.routing;
  MoeShape& s = m.shape;
  s.hidden = c.hidden_size;
  r.n_experts = j.at("n_experts").get<int64_t>();
  r.top_k = j.at("top_k").get<int64_t>();
  r.sigmoid = j.at("sigmoid").get<bool>();
  r.norm_topk_prob = j.at("norm_topk_prob").get<bool>();
  r.routed_scaling = j.at("routed_scaling").get<float>();
  r.scale_only_unnormalized = j.at("scale_only_unnormalized").get<bool>();
  r.n_group = j.at("n_group").get<int64_t>();
  r.topk_group = j.at("topk_group").get<int64_t>();
  r.group_score_top2_sum = j.at("group_score_top2_sum").get<bool>();
  s.expert_inter = j.at("expert_intermediate").get<int64_t>();
  s.shared_inter = j.at("shared_intermediate").get<int64_t>();
  return m;
}

std::vector<TensorSpec> llama_moe_layer_specs(const ModelConfig& c, int64_t layer, const std::string& ffn,
                                              const MoeNames& names) {
  const MoeConfig moe = moe_config(c);
  auto specs = llama_attention_specs(c, layer);
  auto m = moe_specs(layer_prefix(layer) + ffn + ".", moe.routing, moe.shape, names);
  specs.insert(specs.end(), m.begin(), m.end());
  return specs;
}

void parse_sparse_layers(const nlohmann::json& j, ModelConfig& c) {
  c.family["decoder_sparse_step"] = hf::get_int(j, "decoder_sparse_step", 1);
  RINFER_CHECK(c.family["decoder_sparse_step"].get<int64_t>() >= 1, "config.json: decoder_sparse_step must be >= 1");
  std::vector<int64_t> dense;
  auto only = j.find("mlp_only_layers");
  if (only != j.end() && !only->is_null()) {
    RINFER_CHECK(only->is_array(), "config.json: \"mlp_only_layers\" must be a list of layer indices, got ",
                 only->dump());
    for (const auto& v : *only) {
      // (An unsigned value above INT64_MAX reads back negative.)
      RINFER_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxLayers,
                   "config.json: \"mlp_only_layers\" must hold layer indices (0 to ", kMaxLayers - 1, "), got ",
                   v.dump());
      dense.push_back(v.get<int64_t>());
    }
  }
  c.family["mlp_only_layers"] = dense;
}

bool is_sparse_layer(const ModelConfig& c, int64_t layer) {
  const auto only = c.family.at("mlp_only_layers").get<std::vector<int64_t>>();
  if (std::find(only.begin(), only.end(), layer) != only.end()) return false;
  return (layer + 1) % c.family.at("decoder_sparse_step").get<int64_t>() == 0;
}

}  // namespace rinfer
