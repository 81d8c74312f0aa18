// GlmForCausalLM (transformers' native GLM-4 classes, e.g. glm-4-9b-chat-hf):
// the GLM-4 model in LLaMA-style names — q/k/v with biases, fused
// mlp.gate_up_proj [gate; up], explicit head_dim, and RoPE on the first
// partial_rotary_factor of each head with adjacent pairs. The converter
// splits gate_up_proj; at run time it is the GLM decoder.
//
// Glm4ForCausalLM (GLM-4-0414: GLM-4-9B/32B-0414, GLM-Z1) is the same model
// with two more RMSNorms per layer (transformers' modeling_glm4.py,
// Glm4DecoderLayer.forward):
//   x = x + post_self_attn_layernorm(attn(input_layernorm(x)))
//   x = x + post_mlp_layernorm(mlp(post_attention_layernorm(x)))
// i.e. each sub-layer's output is normalized before the residual add. They
// are kept under their HF names and applied by wrapping the blocks.
#include "core/error.h"
#include "io/safetensors.h"
#include "model/fused_source.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"

namespace rinfer {
namespace {

const char* const kPostAttnNorm = "post_self_attn_layernorm.weight";
const char* const kPostMlpNorm = "post_mlp_layernorm.weight";

// An attention block whose output goes through an RMSNorm (in place).
class PostNormAttention : public AttentionBlock {
 public:
  PostNormAttention(std::unique_ptr<AttentionBlock> inner, RMSNorm norm) : inner_(std::move(inner)), norm_(norm) {}
  void forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) override {
    inner_->forward(h, ctx, layer, out);
    norm_.forward(out, ctx.tokens.n_tokens, out);
  }
  uint64_t weight_bytes() const override { return inner_->weight_bytes() + uint64_t(norm_.dim) * sizeof(float); }
  int64_t cached_kv_heads() const override { return inner_->cached_kv_heads(); }

 private:
  std::unique_ptr<AttentionBlock> inner_;
  RMSNorm norm_;
};

// A feed-forward block whose output goes through an RMSNorm (in place).
class PostNormFeedForward : public FeedForwardBlock {
 public:
  PostNormFeedForward(std::unique_ptr<FeedForwardBlock> inner, RMSNorm norm) : inner_(std::move(inner)), norm_(norm) {}
  void forward(const float* h, int64_t n_tokens, float* out, const ForwardContext& ctx) override {
    inner_->forward(h, n_tokens, out, ctx);
    norm_.forward(out, n_tokens, out);
  }
  uint64_t weight_bytes_per_token() const override {
    return inner_->weight_bytes_per_token() + uint64_t(norm_.dim) * sizeof(float);
  }

 private:
  std::unique_ptr<FeedForwardBlock> inner_;
  RMSNorm norm_;
};

class GlmArchitecture : public Architecture {
 public:
  explicit GlmArchitecture(bool glm4) : glm4_(glm4) {}

  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = glm4_ ? "Glm4ForCausalLM" : "GlmForCausalLM";
    parse_llama_common(j, c);
    c.qkv_bias = hf::get_bool(j, "attention_bias", true);
    const double factor = hf::get_double(j, "partial_rotary_factor", 0.5);
    const int64_t rot = int64_t(double(c.head_dim) * factor);
    RINFER_CHECK(factor > 0 && factor <= 1 && rot % 2 == 0 && rot > 0,
                 "config.json: partial_rotary_factor must give an even rotary dimension");
    c.family["rotary_dim"] = rot;
    c.validate();
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    auto specs = llama_tensor_specs(c, group);
    if (glm4_ && group != kGlobalGroup) {
      const std::string p = layer_prefix(group);
      specs.push_back({p + kPostAttnNorm, {c.hidden_size}, TensorRole::Vector});
      specs.push_back({p + kPostMlpNorm, {c.hidden_size}, TensorRole::Vector});
    }
    return specs;
  }
  std::vector<TensorSpec> hf_tensor_specs(const ModelConfig& c, int64_t group) const override {
    std::vector<TensorSpec> out;
    for (auto spec : tensor_specs(c, group)) {
      const auto pos = spec.name.find("mlp.gate_proj.weight");
      if (pos != std::string::npos)
        out.push_back({spec.name.substr(0, pos) + "mlp.gate_up_proj.weight", {2 * c.intermediate_size, c.hidden_size},
                       TensorRole::Matrix});
      else if (spec.name.find("mlp.up_proj.weight") == std::string::npos)
        out.push_back(spec);
    }
    return out;
  }
  void read_hf_rows(const ModelConfig& c, const TensorSpec& spec, const io::SafetensorsCheckpoint& hf, int64_t row0,
                    int64_t row1, float* dst) const override {
    const int64_t I = c.intermediate_size, H = c.hidden_size;
    for (const char* part : {"mlp.gate_proj.weight", "mlp.up_proj.weight"}) {
      const auto pos = spec.name.find(part);
      if (pos == std::string::npos) continue;
      const bool up = std::string(part) == "mlp.up_proj.weight";
      read_rows_from(c, hf, spec, {spec.name.substr(0, pos) + "mlp.gate_up_proj.weight", {2 * I, H}, up ? I : 0}, row0,
                     row1, dst);
      return;
    }
    Architecture::read_hf_rows(c, spec, hf, row0, row1, dst);
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, const Shard& shard) const override {
    auto rope = std::make_shared<const RotaryEmbedding>(c, c.family.at("rotary_dim").get<int64_t>(),
                                                        RopeStyle::Interleaved);
    if (!glm4_)
      return make_llama_decoder(c, w, shard, {}, [&](int64_t l) { return make_llama_attention(c, w, shard, l, rope); });
    auto norm = [&](int64_t l, const char* name) {
      return RMSNorm::load(w, layer_prefix(l) + name, c.hidden_size, c.rms_norm_eps);
    };
    return make_llama_decoder(
        c, w, shard,
        [&](int64_t l) -> std::unique_ptr<FeedForwardBlock> {
          auto mlp = std::make_unique<GatedMLP>(
              GatedMLP::load(w, layer_prefix(l) + "mlp.", c.hidden_size, c.intermediate_size, "gate_proj", "up_proj",
                             "down_proj", false, shard));
          return std::make_unique<PostNormFeedForward>(std::move(mlp), norm(l, kPostMlpNorm));
        },
        [&](int64_t l) -> std::unique_ptr<AttentionBlock> {
          return std::make_unique<PostNormAttention>(make_llama_attention(c, w, shard, l, rope), norm(l, kPostAttnNorm));
        });
  }

 private:
  bool glm4_;
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(glm, "GlmForCausalLM", GlmArchitecture, false);
RINFER_REGISTER_ARCHITECTURE(glm4, "Glm4ForCausalLM", GlmArchitecture, true);

}  // namespace rinfer
