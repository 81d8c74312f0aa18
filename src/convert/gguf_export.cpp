#include "convert/gguf_export.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "convert/hf_checkpoint.h"
#include "core/error.h"
#include "tokenizer/hf_config.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace rinfer {

namespace fs = std::filesystem;
using io::GgmlType;

std::optional<GgmlType> gguf_type_from_name(const std::string& name) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0})
    if (name == io::gguf_type_name(t)) return t;
  return std::nullopt;
}

namespace {

struct Family {
  const char* hf;    // config.json architectures[0]
  const char* gguf;  // general.architecture
  bool permute_qk;   // HF's half-split rotary rows -> llama.cpp's interleaved pairs
  bool qkv_bias;
};
constexpr Family kFamilies[] = {
    {"LlamaForCausalLM", "llama", true, false},
    {"MistralForCausalLM", "llama", true, false},
    {"Qwen2ForCausalLM", "qwen2", false, true},
};

// tokenizer.ggml.token_type values (llama.cpp's LLAMA_TOKEN_TYPE_*) this
// file sets itself; SentencePiece pieces keep theirs.
constexpr int32_t kTokenControl = 3, kTokenUserDefined = 4, kTokenUnused = 5;

// general.file_type: llama.cpp's LLAMA_FTYPE_* for a file mostly of type t.
uint32_t file_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
  }
  return 0;
}

// HF rows of one projection, head by head [h][2][D/2] (rotate_half halves),
// in llama.cpp's order [h][D/2][2]: out row h D + 2 i + j = in row h D + j D/2 + i.
std::vector<float> interleave_rotary_rows(const std::vector<float>& w, int64_t heads, int64_t head_dim, int64_t cols) {
  std::vector<float> out(w.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::copy_n(&w[size_t((h * head_dim + j * half + i) * cols)], cols,
                    &out[size_t((h * head_dim + 2 * i + j) * cols)]);
  return out;
}

}  // namespace

GgufVocab gguf_llama_vocab(const SentencePieceVocab& sp, const HfTokenizerConfig& cfg, int64_t vocab_size) {
  GgufVocab v{sp.pieces, sp.scores, sp.types};
  const size_t n = size_t(vocab_size);
  v.pieces.resize(n);
  v.scores.resize(n, -1000.0f);
  v.types.resize(n, 0);
  for (const auto& [id, spec] : cfg.added_tokens) {
    if (id < int64_t(sp.pieces.size())) continue;  // a piece already (e.g. <s> as a special token)
    RINFER_CHECK(id < vocab_size, "export-gguf: added token ", id, " (", spec.content, ") is outside vocab_size ",
                 vocab_size);
    v.pieces[size_t(id)] = spec.content;
    v.types[size_t(id)] = spec.special ? kTokenControl : kTokenUserDefined;
  }
  for (size_t id = sp.pieces.size(); id < n; ++id)
    if (v.types[id] == 0) {  // 0: neither a piece nor an added token
      v.pieces[id] = "[PAD" + std::to_string(id) + "]";
      v.types[id] = kTokenUnused;
    }
  return v;
}

GgufExportStats export_gguf(const std::string& hf_dir, const std::string& out_path, const GgufExportOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  HfCheckpoint ck = HfCheckpoint::open(hf_dir);
  const ModelConfig& c = ck.config;
  const Family* fam = nullptr;
  for (const Family& f : kFamilies)
    if (c.architecture == f.hf) fam = &f;
  RINFER_CHECK(fam, "export-gguf: ", c.architecture,
               " is not supported (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  RINFER_CHECK(c.rope_scaling.type == "none", "export-gguf: rope_scaling \"", c.rope_scaling.type,
               "\" is not exported (only unscaled RoPE)");
  RINFER_CHECK(!c.o_bias && !c.mlp_bias && c.qkv_bias == fam->qkv_bias, "export-gguf: ", c.architecture,
               " with these bias settings is not the layout llama.cpp's ", fam->gguf, " expects");
  const fs::path sp_model = fs::path(hf_dir) / "tokenizer.model";
  RINFER_CHECK(fs::exists(sp_model), "export-gguf: ", hf_dir,
               " has no tokenizer.model (only SentencePiece vocabularies are exported)");
  RINFER_CHECK(!ck.hf_config.contains("quantization_config") || ck.hf_config["quantization_config"].is_null(),
               "export-gguf: quantized checkpoints (quantization_config) are not exported; convert from the "
               "floating-point checkpoint");
  RINFER_CHECK(!fs::exists(out_path), "export-gguf: ", out_path, " exists (not overwritten)");
  const SentencePieceVocab vocab = read_sentencepiece_vocab(sp_model);
  RINFER_CHECK(int64_t(vocab.pieces.size()) <= c.vocab_size && c.vocab_size < (int64_t(1) << 24),
               "export-gguf: tokenizer.model has ", vocab.pieces.size(), " pieces; vocab_size ", c.vocab_size,
               " cannot hold them");

  io::GgufWriter w;
  const std::string a = fam->gguf;
  w.set_str("general.architecture", a);
  w.set_str("general.name", fs::weakly_canonical(fs::path(hf_dir)).filename().string());
  w.set_u32("general.file_type", file_type(opt.type));
  w.set_u32(a + ".context_length", uint32_t(c.max_position_embeddings));
  w.set_u32(a + ".embedding_length", uint32_t(c.hidden_size));
  w.set_u32(a + ".block_count", uint32_t(c.n_layers));
  w.set_u32(a + ".feed_forward_length", uint32_t(c.intermediate_size));
  w.set_u32(a + ".attention.head_count", uint32_t(c.n_heads));
  w.set_u32(a + ".attention.head_count_kv", uint32_t(c.n_kv_heads));
  w.set_u32(a + ".attention.key_length", uint32_t(c.head_dim));
  w.set_u32(a + ".attention.value_length", uint32_t(c.head_dim));
  w.set_u32(a + ".rope.dimension_count", uint32_t(c.head_dim));
  w.set_f32(a + ".rope.freq_base", float(c.rope_theta));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
  w.set_u32(a + ".vocab_size", uint32_t(c.vocab_size));

  const GgufVocab gv = gguf_llama_vocab(vocab, read_hf_tokenizer_config(hf_dir), c.vocab_size);
  const std::vector<int32_t>& types = gv.types;
  w.set_str("tokenizer.ggml.model", "llama");
  w.set_str_array("tokenizer.ggml.tokens", gv.pieces);
  w.set_f32_array("tokenizer.ggml.scores", gv.scores);
  w.set_i32_array("tokenizer.ggml.token_type", gv.types);
  const int32_t bos = c.bos_token_id >= 0 ? c.bos_token_id : vocab.bos_id;
  const int32_t eos = !c.eos_token_ids.empty() ? c.eos_token_ids.front() : vocab.eos_id;
  for (int32_t id : {bos, eos})
    RINFER_CHECK(id < 0 || (id < c.vocab_size && types[size_t(id)] != kTokenUnused), "export-gguf: special token ",
                 id, " is neither a piece of tokenizer.model nor an added token");
  if (bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", uint32_t(bos));
  if (eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(eos));
  if (vocab.unk_id >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", uint32_t(vocab.unk_id));
  w.set_bool("tokenizer.ggml.add_bos_token", bos >= 0);
  w.set_bool("tokenizer.ggml.add_eos_token", false);

  GgufExportStats st;
  const io::SafetensorsCheckpoint& src = *ck.tensors;
  // One HF tensor as f32 rows (optionally with rotary rows interleaved).
  auto load = [&src](const std::string& name, int64_t rows, int64_t cols, int64_t rot_heads, int64_t head_dim) {
    const TensorView v = src.get(name);
    RINFER_CHECK(v.numel() == rows * cols, "export-gguf: ", name, " has shape ", shape_str(v.shape), ", expected [",
                 rows, ", ", cols, "]");
    std::vector<float> f(size_t(rows * cols));
    convert_to_f32(v.dtype, v.data, f.data(), f.size());
    src.release(name);
    return rot_heads ? interleave_rotary_rows(f, rot_heads, head_dim, cols) : f;
  };
  // A [rows, cols] matrix (1-D when rows == 0) as tensor `gguf`.
  // Returns the type written (f16 when the rows do not fill whole blocks).
  auto add = [&](const std::string& gguf, const std::string& hf, int64_t rows, int64_t cols, GgmlType type,
                 bool per_token, int64_t rot_heads = 0) {
    RINFER_CHECK(src.has(hf), "export-gguf: missing tensor ", hf, " in ", hf_dir);
    if (rows == 0) type = GgmlType::F32;
    if (cols % io::gguf_row_multiple(type) != 0) {
      type = GgmlType::F16;
      ++st.f16_fallbacks;
    }
    const std::vector<int64_t> ne = rows ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{cols};
    const int64_t n = (rows ? rows : 1) * cols;
    if (per_token) st.bytes_per_token += io::gguf_bytes(type, n);
    const int64_t hd = c.head_dim;
    w.add_tensor(gguf, type, ne, [=, &load](uint8_t* dst) {
      const std::vector<float> f = load(hf, rows ? rows : 1, cols, rot_heads, hd);
      io::gguf_encode(type, f.data(), n, dst);
    });
    return type;
  };

  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const GgmlType out_type = opt.output_type.value_or(opt.type);
  const GgmlType embd_type = add("token_embd.weight", "model.embed_tokens.weight", V, H, opt.type, false);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", p = "model.layers." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", p + "input_layernorm.weight", 0, H, GgmlType::F32, true);
    add(b + "attn_q.weight", p + "self_attn.q_proj.weight", c.n_heads * D, H, opt.type, true,
        fam->permute_qk ? c.n_heads : 0);
    add(b + "attn_k.weight", p + "self_attn.k_proj.weight", c.n_kv_heads * D, H, opt.type, true,
        fam->permute_qk ? c.n_kv_heads : 0);
    add(b + "attn_v.weight", p + "self_attn.v_proj.weight", c.n_kv_heads * D, H, opt.type, true);
    if (fam->qkv_bias) {
      add(b + "attn_q.bias", p + "self_attn.q_proj.bias", 0, c.n_heads * D, GgmlType::F32, true);
      add(b + "attn_k.bias", p + "self_attn.k_proj.bias", 0, c.n_kv_heads * D, GgmlType::F32, true);
      add(b + "attn_v.bias", p + "self_attn.v_proj.bias", 0, c.n_kv_heads * D, GgmlType::F32, true);
    }
    add(b + "attn_output.weight", p + "self_attn.o_proj.weight", H, c.n_heads * D, opt.type, true);
    add(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", 0, H, GgmlType::F32, true);
    add(b + "ffn_gate.weight", p + "mlp.gate_proj.weight", F, H, opt.type, true);
    add(b + "ffn_up.weight", p + "mlp.up_proj.weight", F, H, opt.type, true);
    add(b + "ffn_down.weight", p + "mlp.down_proj.weight", H, F, opt.type, true);
  }
  add("output_norm.weight", "model.norm.weight", 0, H, GgmlType::F32, true);
  if (!c.tie_word_embeddings) {
    add("output.weight", "lm_head.weight", V, H, out_type, true);
  } else if (out_type != opt.type) {
    // Tied: llama.cpp reads token_embd for the output unless output.weight
    // exists; a copy is written only to give the output layer its own type.
    add("output.weight", "model.embed_tokens.weight", V, H, out_type, true);
  } else {
    st.bytes_per_token += io::gguf_bytes(embd_type, V * H);  // the output reads the whole table
  }

  if (opt.progress) std::fprintf(stderr, "export-gguf: writing %s\n", out_path.c_str());
  w.write(out_path);
  st.bytes_out = fs::file_size(out_path);
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace rinfer
