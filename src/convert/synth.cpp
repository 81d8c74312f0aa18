#include "convert/synth.h"


#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "convert/hf_checkpoint.h"
#include "core/buffer.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/architecture.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace rinfer {

namespace {

json llama_config(int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads, int64_t vocab,
                  int64_t max_pos, double eps, double theta, bool tied) {
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", hidden},
              {"intermediate_size", inter},
              {"num_hidden_layers", layers},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv_heads},
              {"vocab_size", vocab},
              {"max_position_embeddings", max_pos},
              {"rms_norm_eps", eps},
              {"rope_theta", theta},
              {"rope_scaling", nullptr},
              {"hidden_act", "silu"},
              {"attention_bias", false},
              {"mlp_bias", false},
              {"tie_word_embeddings", tied},
              {"bos_token_id", 1},
              {"eos_token_id", 2},
              {"torch_dtype", "bfloat16"}};
}

}  // namespace

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> presets = [] {
    std::vector<SynthPreset> p;
    p.push_back({"tiny", "llama", "4-layer LLaMA, hidden 128, vocab 1024: for tests",
                 llama_config(128, 344, 4, 4, 2, 1024, 1024, 1e-5, 10000.0, false)});
    p.push_back({"tinyllama-1.1b", "llama", "TinyLlama-1.1B shapes: 22 layers, hidden 2048, GQA 32/4, vocab 32000",
                 llama_config(2048, 5632, 22, 32, 4, 32000, 2048, 1e-5, 10000.0, false)});
    p.push_back({"llama-7b", "llama", "LLaMA-2-7B shapes: 32 layers, hidden 4096, MHA 32 heads, vocab 32000",
                 llama_config(4096, 11008, 32, 32, 32, 32000, 4096, 1e-5, 10000.0, false)});
    json q = llama_config(896, 4864, 24, 14, 2, 151936, 32768, 1e-6, 1000000.0, true);
    q["architectures"] = {"Qwen2ForCausalLM"};
    q["model_type"] = "qwen2";
    q["use_sliding_window"] = false;
    p.push_back({"qwen2.5-0.5b", "qwen2",
                 "Qwen2.5-0.5B shapes: 24 layers, hidden 896, GQA 14/2, q/k/v biases, tied, vocab 151936", q});
    json q7 = llama_config(3584, 18944, 28, 28, 4, 152064, 32768, 1e-6, 1000000.0, false);
    q7["architectures"] = {"Qwen2ForCausalLM"};
    q7["model_type"] = "qwen2";
    q7["use_sliding_window"] = false;
    p.push_back({"qwen2.5-7b", "qwen2", "Qwen2.5-7B shapes: 28 layers, hidden 3584, GQA 28/4, vocab 152064", q7});
    json q3 = llama_config(4096, 12288, 36, 32, 8, 151936, 40960, 1e-6, 1000000.0, false);
    q3["architectures"] = {"Qwen3ForCausalLM"};
    q3["model_type"] = "qwen3";
    q3["head_dim"] = 128;
    p.push_back({"qwen3-8b", "qwen3", "Qwen3-8B shapes: 36 layers, hidden 4096, GQA 32/8, head_dim 128, q/k norms", q3});
    json q06 = llama_config(1024, 3072, 28, 16, 8, 151936, 40960, 1e-6, 1000000.0, true);
    q06["architectures"] = {"Qwen3ForCausalLM"};
    q06["model_type"] = "qwen3";
    q06["head_dim"] = 128;
    p.push_back({"qwen3-0.6b", "qwen3",
                 "Qwen3-0.6B shapes: 28 layers, hidden 1024, GQA 16/8, head_dim 128 (q width 2048), tied", q06});
    json qm = llama_config(3584, 18944, 28, 28, 4, 151936, 32768, 1e-6, 1000000.0, false);
    qm["architectures"] = {"Qwen2MoeForCausalLM"};
    qm["model_type"] = "qwen2_moe";
    qm["num_experts"] = 64;
    qm["num_experts_per_tok"] = 8;
    qm["moe_intermediate_size"] = 2560;
    qm["shared_expert_intermediate_size"] = 20480;
    qm["norm_topk_prob"] = false;
    qm["decoder_sparse_step"] = 1;
    p.push_back({"qwen2-57b-a14b", "qwen2_moe",
                 "Qwen2-57B-A14B shapes: 28 layers, 64 experts top-8 (2560) + shared expert (20480)", qm});
    json q3m = llama_config(2048, 6144, 48, 32, 4, 151936, 40960, 1e-6, 1000000.0, false);
    q3m["architectures"] = {"Qwen3MoeForCausalLM"};
    q3m["model_type"] = "qwen3_moe";
    q3m.update({{"head_dim", 128}, {"num_experts", 128}, {"num_experts_per_tok", 8}, {"moe_intermediate_size", 768},
                {"norm_topk_prob", true}, {"decoder_sparse_step", 1}, {"mlp_only_layers", json::array()}});
    p.push_back({"qwen3-30b-a3b", "qwen3_moe",
                 "Qwen3-30B-A3B shapes: 48 layers, hidden 2048, GQA 32/4, 128 experts top-8 (768)", q3m});
    json mx = llama_config(4096, 14336, 32, 32, 8, 32000, 32768, 1e-5, 1000000.0, false);
    mx["architectures"] = {"MixtralForCausalLM"};
    mx["model_type"] = "mixtral";
    mx["num_local_experts"] = 8;
    mx["num_experts_per_tok"] = 2;
    p.push_back({"mixtral-8x7b", "mixtral", "Mixtral-8x7B shapes: 32 layers, 8 experts top-2 (14336), GQA 32/8", mx});
    json b7 = llama_config(4096, 11008, 32, 32, 32, 125696, 4096, 1e-6, 10000.0, false);
    b7["architectures"] = {"BaichuanForCausalLM"};
    b7["model_type"] = "baichuan";
    b7.erase("num_key_value_heads");
    p.push_back({"baichuan2-7b", "baichuan", "Baichuan2-7B shapes: 32 layers, hidden 4096, W_pack, RoPE, NormHead", b7});
    json b13 = llama_config(5120, 13696, 40, 40, 40, 125696, 4096, 1e-6, 10000.0, false);
    b13["architectures"] = {"BaichuanForCausalLM"};
    b13["model_type"] = "baichuan";
    b13.erase("num_key_value_heads");
    b13.erase("max_position_embeddings");
    b13["model_max_length"] = 4096;
    p.push_back({"baichuan2-13b", "baichuan", "Baichuan2-13B shapes: 40 layers, hidden 5120, W_pack, ALiBi, NormHead", b13});
    json glm = {{"architectures", {"ChatGLMModel"}}, {"model_type", "chatglm"}, {"hidden_size", 4096},
                {"ffn_hidden_size", 13696}, {"num_layers", 40}, {"num_attention_heads", 32},
                {"multi_query_attention", true}, {"multi_query_group_num", 2}, {"kv_channels", 128},
                {"padded_vocab_size", 151552}, {"seq_length", 131072}, {"rope_ratio", 500},
                {"layernorm_epsilon", 1.5625e-07}, {"add_qkv_bias", true}, {"add_bias_linear", false},
                {"rmsnorm", true}, {"post_layer_norm", true}, {"eos_token_id", {151329, 151336, 151338}}};
    p.push_back({"glm-4-9b", "chatglm", "GLM-4-9B shapes: 40 layers, hidden 4096, MQA groups 2, half rotary", glm});
    // GLM-4-0414 (THUDM/GLM-4-9B-0414 config.json): transformers-native names,
    // fused gate_up_proj, post-attention / post-MLP norms, half rotary.
    json g4 = llama_config(4096, 13696, 40, 32, 2, 151552, 32768, 1e-5, 10000.0, false);
    g4["architectures"] = {"Glm4ForCausalLM"};
    g4["model_type"] = "glm4";
    g4.update({{"head_dim", 128}, {"partial_rotary_factor", 0.5}, {"attention_bias", true},
               {"eos_token_id", {151329, 151336, 151338}}, {"pad_token_id", 151329}});
    g4.erase("bos_token_id");
    g4.erase("mlp_bias");
    p.push_back({"glm-4-9b-0414", "glm4",
                 "GLM-4-9B-0414 shapes: 40 layers, hidden 4096, GQA 32/2, half rotary, post-attn/post-MLP norms", g4});
    json yarn = {{"type", "yarn"}, {"factor", 40}, {"beta_fast", 32}, {"beta_slow", 1}, {"mscale", 0.707},
                 {"mscale_all_dim", 0.707}, {"original_max_position_embeddings", 4096}};
    json dl = llama_config(2048, 10944, 27, 16, 16, 102400, 163840, 1e-6, 10000.0, false);
    dl["architectures"] = {"DeepseekV2ForCausalLM"};
    dl["model_type"] = "deepseek_v2";
    dl.update({{"q_lora_rank", nullptr}, {"kv_lora_rank", 512}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64},
               {"v_head_dim", 128}, {"n_routed_experts", 64}, {"num_experts_per_tok", 6}, {"n_shared_experts", 2},
               {"moe_intermediate_size", 1408}, {"first_k_dense_replace", 1}, {"moe_layer_freq", 1},
               {"scoring_func", "softmax"}, {"topk_method", "greedy"}, {"norm_topk_prob", false},
               {"routed_scaling_factor", 1.0}, {"rope_scaling", yarn}});
    p.push_back({"deepseek-v2-lite", "deepseek_v2",
                 "DeepSeek-V2-Lite shapes: 27 layers, MLA (kv_lora 512), 64 experts top-6 + 2 shared", dl});
    json d3 = llama_config(256, 512, 4, 4, 4, 1024, 4096, 1e-6, 10000.0, false);
    d3["architectures"] = {"DeepseekV3ForCausalLM"};
    d3["model_type"] = "deepseek_v3";
    json yarn3 = yarn;
    yarn3["mscale"] = 1.0;
    yarn3["mscale_all_dim"] = 1.0;
    d3.update({{"q_lora_rank", 128}, {"kv_lora_rank", 64}, {"qk_nope_head_dim", 32}, {"qk_rope_head_dim", 16},
               {"v_head_dim", 32}, {"n_routed_experts", 16}, {"num_experts_per_tok", 4}, {"n_shared_experts", 1},
               {"moe_intermediate_size", 128}, {"first_k_dense_replace", 1}, {"moe_layer_freq", 1},
               {"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"}, {"n_group", 4}, {"topk_group", 2},
               {"norm_topk_prob", true}, {"routed_scaling_factor", 2.5}, {"rope_scaling", yarn3}});
    p.push_back({"deepseek-v3-mini", "deepseek_v3",
                 "DeepSeek-V3 structure at small size (MLA, sigmoid group-limited routing): for FP8 and tests", d3});
    // Tiny members of the families without golden logits, for the independent
    // reference check (tests/model/test_reference_families.cpp).
    json q3t = llama_config(64, 128, 2, 4, 2, 320, 512, 1e-6, 1000000.0, false);
    q3t["architectures"] = {"Qwen3ForCausalLM"};
    q3t["model_type"] = "qwen3";
    q3t["head_dim"] = 32;  // explicit, not hidden / heads
    p.push_back({"qwen3-tiny", "qwen3", "2-layer Qwen3, hidden 64, head_dim 32, vocab 320: for tests", q3t});
    json qmt = llama_config(64, 96, 3, 4, 2, 320, 512, 1e-6, 1000000.0, false);
    qmt["architectures"] = {"Qwen3MoeForCausalLM"};
    qmt["model_type"] = "qwen3_moe";
    qmt.update({{"head_dim", 16}, {"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                {"norm_topk_prob", true}, {"decoder_sparse_step", 1}, {"mlp_only_layers", {1}}});
    p.push_back({"qwen3-moe-tiny", "qwen3_moe",
                 "3-layer Qwen3-MoE, hidden 64, 4 experts top-2, layer 1 dense, vocab 320: for tests", qmt});
    json g4t = llama_config(64, 128, 2, 4, 2, 320, 512, 1e-5, 10000.0, false);
    g4t["architectures"] = {"Glm4ForCausalLM"};
    g4t["model_type"] = "glm4";
    g4t.update({{"head_dim", 16}, {"partial_rotary_factor", 0.5}, {"attention_bias", true}});
    g4t.erase("mlp_bias");
    p.push_back({"glm4-tiny", "glm4", "2-layer GLM-4-0414, hidden 64, half rotary, vocab 320: for tests", g4t});
    return p;
  }();
  return presets;
}

const SynthPreset& find_synth_preset(const std::string& name) {
  std::string list;
  for (const auto& p : synth_presets()) {
    if (p.name == name) return p;
    list += (list.empty() ? "" : ", ") + p.name;
  }
  fail("unknown preset \"", name, "\"; available: ", list);
}

namespace {

// --- protobuf writing, just enough for sentencepiece's ModelProto ---
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void put_tag(std::string& out, int field, int wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void put_bytes(std::string& out, int field, const std::string& s) {
  put_tag(out, field, 2);
  put_varint(out, s.size());
  out += s;
}
void put_int(std::string& out, int field, int64_t v) {
  put_tag(out, field, 0);
  put_varint(out, uint64_t(v));
}
void put_float(std::string& out, int field, float f) {
  put_tag(out, field, 5);
  char b[4];
  std::memcpy(b, &f, 4);
  out.append(b, 4);
}

}  // namespace

std::string synth_sentencepiece_model(int64_t vocab_size) {
  RINFER_CHECK(vocab_size >= 300, "synthetic tokenizer needs a vocabulary of at least 300");
  enum { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };
  std::vector<std::pair<std::string, int>> pieces = {{"<unk>", kUnknown}, {"<s>", kControl}, {"</s>", kControl}};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back({buf, kByte});
  }
  const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's space
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  std::vector<std::string> level = {space};
  for (char c : std::string(letters + "ETAOINSHRDLCUMWFGYPBVKJXQZ0123456789.,!?'\"-:;()"))
    level.push_back(std::string(1, c));
  // Grow words breadth-first so every piece is the merge of two shorter ones.
  std::vector<std::string> frontier = {""};
  for (const auto& s : level) pieces.push_back({s, kNormal});
  while (int64_t(pieces.size()) < vocab_size) {
    std::vector<std::string> next;
    for (const auto& f : frontier)
      for (char c : letters) {
        std::string w = f + c;
        next.push_back(w);
      }
    for (const auto& w : next) {
      if (w.size() >= 2 && int64_t(pieces.size()) < vocab_size) pieces.push_back({w, kNormal});
      if (int64_t(pieces.size()) < vocab_size) pieces.push_back({space + w, kNormal});
    }
    frontier = std::move(next);
  }
  std::string model;
  int64_t rank = 0;
  for (const auto& [text, type] : pieces) {
    std::string sp;
    put_bytes(sp, 1, text);
    put_float(sp, 2, type == kNormal ? -float(rank++) : 0.0f);
    put_int(sp, 3, type);
    put_bytes(model, 1, sp);
  }
  std::string trainer;
  put_int(trainer, 3, 2);  // model_type BPE
  put_int(trainer, 4, vocab_size);
  put_int(trainer, 35, 1);  // byte_fallback
  put_bytes(model, 2, trainer);
  std::string normalizer;
  put_bytes(normalizer, 1, "identity");
  put_int(normalizer, 3, 1);  // add_dummy_prefix
  put_int(normalizer, 4, 0);  // remove_extra_whitespaces
  put_int(normalizer, 5, 1);  // escape_whitespaces
  put_bytes(model, 3, normalizer);
  return model;
}

namespace {

void write_file(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary);
  out.write(data.data(), std::streamsize(data.size()));
  out.close();
  RINFER_CHECK(out, "cannot write ", p.string());
}

// splitmix64 stream -> uniform floats with the given standard deviation.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

void fill_random(const TensorSpec& spec, DType dtype, uint64_t seed, void* dst, int64_t hidden) {
  const int64_t n = numel(spec.shape);
  const size_t esz = dtype_size(dtype);
  if (spec.role == TensorRole::Vector) {
    // Norm weights near 1, biases near 0: keeps activations in a sane range.
    bool is_norm = spec.name.find("norm") != std::string::npos;
    Rng r{seed};
    std::vector<float> tmp(static_cast<size_t>(n));
    for (auto& v : tmp) v = (is_norm ? 1.0f : 0.0f) + 0.02f * (float(r.next() >> 40) / 16777216.0f - 0.5f);
    convert_from_f32(dtype, tmp.data(), dst, size_t(n));
    return;
  }
  // Uniform with std 1/sqrt(fan_in) for projections, 0.02 for embeddings.
  const int64_t fan_in = spec.shape.size() == 2 ? spec.shape[1] : hidden;
  const float std_dev = spec.role == TensorRole::Embedding ? 0.02f : float(1.0 / std::sqrt(double(fan_in)));
  const float a = std_dev * std::sqrt(3.0f);
  Rng r{seed};
  constexpr int64_t kChunk = 4096;
  float tmp[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    int64_t m = std::min(kChunk, n - i);
    for (int64_t j = 0; j < m; ++j) tmp[j] = a * (float(r.next() >> 40) / 8388608.0f - 1.0f);
    convert_from_f32(dtype, tmp, static_cast<uint8_t*>(dst) + size_t(i) * esz, size_t(m));
  }
}

constexpr int64_t kFp8Block = 128;

void fp8_quantize_random(const TensorSpec& spec, uint64_t seed, int64_t hidden, Buffer& q, Buffer& scales,
                         Shape& scale_shape) {
  const int64_t rows = spec.shape[0], cols = spec.shape[1];
  std::vector<float> wf(static_cast<size_t>(rows * cols));
  fill_random(spec, DType::F32, seed, wf.data(), hidden);
  scale_shape = {(rows + kFp8Block - 1) / kFp8Block, (cols + kFp8Block - 1) / kFp8Block};
  scales = Buffer(size_t(numel(scale_shape)) * sizeof(float));
  q = Buffer(size_t(rows * cols));
  for (int64_t br = 0; br < scale_shape[0]; ++br)
    for (int64_t bc = 0; bc < scale_shape[1]; ++bc) {
      float amax = 0;
      for (int64_t r = br * kFp8Block; r < std::min(rows, (br + 1) * kFp8Block); ++r)
        for (int64_t c = bc * kFp8Block; c < std::min(cols, (bc + 1) * kFp8Block); ++c)
          amax = std::max(amax, std::fabs(wf[size_t(r * cols + c)]));
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      scales.as<float>()[br * scale_shape[1] + bc] = scale;
      for (int64_t r = br * kFp8Block; r < std::min(rows, (br + 1) * kFp8Block); ++r)
        for (int64_t c = bc * kFp8Block; c < std::min(cols, (bc + 1) * kFp8Block); ++c)
          q.as<uint8_t>()[r * cols + c] = f32_to_f8e4m3(wf[size_t(r * cols + c)] / scale);
    }
}

}  // namespace

void synth_checkpoint(const SynthOptions& o) {
  const SynthPreset& preset = find_synth_preset(o.preset);
  std::string family = o.family;
  std::replace(family.begin(), family.end(), '-', '_');
  RINFER_CHECK(family.empty() || family == preset.family, "preset ", preset.name, " is a ", preset.family,
               " model, not --arch ", o.family);
  RINFER_CHECK(o.layers >= 0, "--layers must be >= 0");
  RINFER_CHECK(!o.out.empty(), "--out is required");
  RINFER_CHECK(o.dtype == DType::F32 || o.dtype == DType::F16 || o.dtype == DType::BF16,
               "--dtype must be f32, f16 or bf16");
  fs::path out = fs::path(o.out).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "dir/" names dir, not a child of it
  RINFER_CHECK(!fs::exists(out), "output directory ", o.out, " already exists; remove it or choose another --out");
  fs::create_directories(out.has_parent_path() ? out.parent_path() : fs::path("."));
  StagingDir staging(out);
  const fs::path& tmp = staging.path();
  json cfg = preset.config;
  cfg["torch_dtype"] = o.dtype == DType::F32 ? "float32" : o.dtype == DType::F16 ? "float16" : "bfloat16";
  if (o.layers > 0) {
    // Same per-layer shapes, fewer layers: for quick runs and memory tests.
    if (cfg.contains("num_layers")) cfg["num_layers"] = o.layers;
    cfg["num_hidden_layers"] = o.layers;
  }
  if (o.fp8)
    cfg["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                  {"weight_block_size", {kFp8Block, kFp8Block}}};
  const Architecture& arch = find_architecture(cfg["architectures"][0].get<std::string>());
  const ModelConfig mc = arch.parse_hf_config(cfg);
  write_file(tmp / "config.json", cfg.dump(2) + "\n");

  // Tensors in HF order, split into shards of at most max_shard_bytes.
  std::vector<TensorSpec> specs;
  for (int64_t g = kGlobalGroup; g < mc.n_layers; ++g) {
    auto gs = arch.hf_tensor_specs(mc, g);
    specs.insert(specs.end(), gs.begin(), gs.end());
  }
  std::vector<std::vector<size_t>> shards(1);
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const DType dt = specs[i].role == TensorRole::Vector ? DType::F32 : o.dtype;
    uint64_t b = uint64_t(numel(specs[i].shape)) * dtype_size(dt);
    if (shard_bytes > 0 && shard_bytes + b > o.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += b;
  }
  json weight_map = json::object();
  uint64_t total = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    if (shards.size() == 1)
      std::snprintf(name, sizeof name, "model.safetensors");
    else
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    std::vector<Buffer> data;
    io::SafetensorsWriter w;
    w.set_metadata("format", "pt");
    for (size_t i : shards[s]) {
      const auto& spec = specs[i];
      const uint64_t seed = o.seed * 1000003ull + i;
      if (o.fp8 && spec.role == TensorRole::Matrix && spec.shape.size() == 2 && spec.name != "lm_head.weight") {
        // DeepSeek-V3 layout: e4m3 values and one f32 scale per 128x128
        // block, w = q * weight_scale_inv. The same seed gives the same
        // underlying weights as a non-FP8 synth, to compare against.
        Buffer q, sc;
        Shape sc_shape;
        fp8_quantize_random(spec, seed, mc.hidden_size, q, sc, sc_shape);
        w.add(spec.name, DType::F8_E4M3, spec.shape, q.data());
        w.add(spec.name + "_scale_inv", DType::F32, sc_shape, sc.data());
        weight_map[spec.name] = name;
        weight_map[spec.name + "_scale_inv"] = name;
        data.push_back(std::move(q));
        data.push_back(std::move(sc));
        continue;
      }
      // HF keeps norms in the checkpoint dtype; only rinfer upcasts them.
      const DType dt = o.dtype;
      Buffer b(size_t(numel(spec.shape)) * dtype_size(dt));
      fill_random(spec, dt, seed, b.data(), mc.hidden_size);
      w.add(spec.name, dt, spec.shape, b.data());
      data.push_back(std::move(b));
      weight_map[spec.name] = name;
    }
    total += w.data_bytes();
    w.write((tmp / name).string());
  }
  if (shards.size() > 1)
    write_file(tmp / "model.safetensors.index.json",
               json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");

  write_file(tmp / "tokenizer.model", synth_sentencepiece_model(mc.vocab_size));
  json tok_cfg = {{"add_bos_token", true},  {"add_eos_token", false}, {"bos_token", "<s>"},
                  {"eos_token", "</s>"},    {"unk_token", "<unk>"},   {"legacy", true},
                  {"tokenizer_class", "LlamaTokenizer"}, {"model_max_length", mc.max_position_embeddings}};
  write_file(tmp / "tokenizer_config.json", tok_cfg.dump(2) + "\n");
  write_file(tmp / "special_tokens_map.json",
             json{{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}}.dump(2) + "\n");
  write_file(tmp / "generation_config.json", json{{"bos_token_id", 1}, {"eos_token_id", 2}}.dump(2) + "\n");
  write_file(tmp / "README.md", "Synthetic " + preset.name + " checkpoint made by `rinfer synth` (seed " +
                                    std::to_string(o.seed) +
                                    "): random weights with real shapes. It produces nonsense text.\n");
  staging.commit();
}

}  // namespace rinfer
