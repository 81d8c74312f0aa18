#pragma once
// The Hugging Face LLaMA tensor layout and the builders for it. Most
// families reuse it: Mistral and Qwen2 as is, MoE families for attention,
// Baichuan and GLM after splitting their fused tensors into these names.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/attention.h"
#include "model/decoder.h"
#include "model/feed_forward.h"

namespace rinfer {

std::string layer_prefix(int64_t layer);  // "model.layers.N."

// embed_tokens, norm, lm_head (unless tied)
std::vector<TensorSpec> llama_global_specs(const ModelConfig& c);
// input_layernorm, q/k/v/o (+ biases per config), post_attention_layernorm
std::vector<TensorSpec> llama_attention_specs(const ModelConfig& c, int64_t layer);
// prefix + {gate,up,down}_proj.weight for a SwiGLU MLP of width `inter`
std::vector<TensorSpec> gated_mlp_specs(const std::string& prefix, int64_t hidden, int64_t inter, bool bias = false,
                                        const char* gate = "gate_proj", const char* up = "up_proj",
                                        const char* down = "down_proj");
// The whole dense LLaMA layout.
std::vector<TensorSpec> llama_tensor_specs(const ModelConfig& c, int64_t group);

std::unique_ptr<AttentionBlock> make_llama_attention(const ModelConfig& c, const WeightStore& w, const Shard& shard,
                                                     int64_t layer,
                                                     std::shared_ptr<const RotaryEmbedding> rope,
                                                     std::vector<float> alibi = {});

using FfnFactory = std::function<std::unique_ptr<FeedForwardBlock>(int64_t layer)>;
using AttentionFactory = std::function<std::unique_ptr<AttentionBlock>(int64_t layer)>;

// A Decoder with LLaMA globals and norms; attention and feed-forward per
// layer from the factories (defaults: LLaMA GQA with rotate_half RoPE over
// the full head, and the dense SwiGLU MLP).
// With a shard of a larger world: attention heads, the dense MLP's width and
// the vocabulary are split (blocks from other factories are replicated
// unless they split themselves).
// With a pipeline stage of several: the stage's layers only, the embedding
// on the first stage, the final norm and output layer on the last.
std::unique_ptr<Model> make_llama_decoder(const ModelConfig& c, const WeightStore& w, const Shard& shard,
                                          FfnFactory ffn = {}, AttentionFactory attn = {},
                                          KVCacheShape kv_shape = {});

// Whether a pipeline stage (shard) needs the stored tensor `name` (rinfer's
// names: model.layers.N.*, model.embed_tokens, model.norm, lm_head), so that
// a stage reads only its layers' files.
bool stage_wants_tensor(const ModelConfig& c, const Shard& shard, const std::string& name);

}  // namespace rinfer
