// rinfer export-gguf and the GGUF writer: the block encoders against ggml's
// definitions, a written file read back field by field, the exported
// stories260K / golden checkpoints (metadata, vocabulary, rotary row order,
// biases), and the one-line errors. (That llama.cpp itself reproduces
// stories260K's reference continuation from the exported file is checked by
// scripts/bench_llamacpp.sh, which needs llama.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "cli_util.h"
#include "convert/gguf_export.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace rinfer::test::cli {
namespace {

using io::GgmlType;

// One tensor of a safetensors checkpoint as f32 values.
std::vector<float> tensor_f32(const io::SafetensorsCheckpoint& ck, const std::string& name) {
  const TensorView v = ck.get(name);
  std::vector<float> o(size_t(v.numel()));
  convert_to_f32(v.dtype, v.data, o.data(), o.size());
  return o;
}

// Tensor infos and data of a GGUF file, parsed independently of the writer.
struct GgufFile {
  struct Tensor {
    uint32_t type;
    std::vector<int64_t> ne;
    uint64_t offset;
  };
  std::map<std::string, Tensor> tensors;
  std::string bytes;
  uint64_t data_start = 0;

  explicit GgufFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
    size_t p = 0;
    auto rd = [&](auto& v) {
      std::memcpy(&v, bytes.data() + p, sizeof(v));
      p += sizeof(v);
    };
    auto str = [&] {
      uint64_t n;
      rd(n);
      std::string s = bytes.substr(p, n);
      p += n;
      return s;
    };
    // Bytes of one metadata value (GGUF value types 0..12).
    std::function<void(uint32_t)> skip = [&](uint32_t t) {
      static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
      if (t == 8) {
        str();
      } else if (t == 9) {
        uint32_t et;
        uint64_t n;
        rd(et);
        rd(n);
        for (uint64_t i = 0; i < n; ++i) skip(et);
      } else {
        p += sizes[t];
      }
    };
    uint32_t magic, version;
    uint64_t n_tensors, n_kv;
    rd(magic), rd(version), rd(n_tensors), rd(n_kv);
    EXPECT_EQ(magic, 0x46554747u);
    EXPECT_EQ(version, 3u);
    for (uint64_t i = 0; i < n_kv; ++i) {
      str();
      uint32_t t;
      rd(t);
      skip(t);
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      std::string name = str();
      Tensor t;
      uint32_t nd;
      rd(nd);
      t.ne.resize(nd);
      for (auto& d : t.ne) rd(d);
      rd(t.type);
      rd(t.offset);
      EXPECT_EQ(t.offset % 32, 0u) << name;
      tensors[name] = t;
    }
    data_start = (p + 31) / 32 * 32;
  }
  const uint8_t* data(const std::string& name) const {
    return reinterpret_cast<const uint8_t*>(bytes.data()) + data_start + tensors.at(name).offset;
  }
  std::vector<float> f32(const std::string& name) const {
    const Tensor& t = tensors.at(name);
    EXPECT_EQ(t.type, 0u) << name;
    int64_t n = 1;
    for (auto d : t.ne) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    std::memcpy(v.data(), data(name), size_t(n) * 4);
    return v;
  }
};

// ggml's dequantization of one block.
float q8_0_value(const uint8_t* blk, int j) { return f16_to_f32(uint16_t(blk[0] | blk[1] << 8)) * float(int8_t(blk[2 + j])); }
float q4_0_value(const uint8_t* blk, int j) {
  const float d = f16_to_f32(uint16_t(blk[0] | blk[1] << 8));
  const int q = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
  return float(q - 8) * d;
}

TEST(GgufWriter, BlockEncodersFollowGgml) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(32 * 5);
  for (auto& v : x) v = nd(rng);
  std::fill_n(x.begin() + 32, 32, 0.0f);  // an all-zero block: d = 0, no NaN
  x[64 + 9] = -7.5f;                      // the largest magnitude, negative
  std::vector<uint8_t> q8(io::gguf_bytes(GgmlType::Q8_0, int64_t(x.size())));
  std::vector<uint8_t> q4(io::gguf_bytes(GgmlType::Q4_0, int64_t(x.size())));
  ASSERT_EQ(q8.size(), 5u * 34);
  ASSERT_EQ(q4.size(), 5u * 18);
  io::encode_q8_0(x.data(), int64_t(x.size()), q8.data());
  io::encode_q4_0(x.data(), int64_t(x.size()), q4.data());
  for (int b = 0; b < 5; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(b * 32 + j)]));
    for (int j = 0; j < 32; ++j) {
      const float v = x[size_t(b * 32 + j)];
      // Q8_0: within half a step of d = amax / 127 (plus the f16 rounding of d).
      EXPECT_NEAR(q8_0_value(&q8[size_t(b * 34)], j), v, amax / 127 * 0.5f + amax * 1e-3f) << b << " " << j;
      // Q4_0: within half a step of |d| = amax / 8, clipped at +7 d.
      EXPECT_NEAR(q4_0_value(&q4[size_t(b * 18)], j), v, amax / 8 * 0.5f + amax * 2e-3f) << b << " " << j;
    }
  }
  // The extreme value is exactly q = 0 -> -8 d = x_m (up to d's f16 rounding),
  // and the low nibbles hold values 0..15, the high ones 16..31.
  EXPECT_NEAR(q4_0_value(&q4[2 * 18], 9), -7.5f, 1e-3f);
  EXPECT_EQ(q4[2 * 18 + 2 + 9] & 15, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q4_0_value(&q4[18], j), 0.0f);
}

// Exact bytes of ggml's reference encoders on hand-made blocks: d exactly
// representable, halves rounded away from zero (roundf), Q4_0's
// (int8_t)(x / d + 8.5) truncation and nibble order.
TEST(GgufWriter, BlockEncodersGiveGgmlsBytes) {
  float x[32] = {};
  x[0] = 127.0f, x[1] = -63.5f, x[2] = 2.5f, x[3] = -0.49f;
  uint8_t q8[34];
  io::encode_q8_0(x, 32, q8);
  const uint8_t want8[6] = {0x00, 0x3c, 0x7f, 0xc0, 0x03, 0x00};  // d = f16 1.0; 127, -64, 3, 0
  EXPECT_EQ(std::memcmp(q8, want8, 6), 0);
  float y[32] = {};
  y[0] = -8.0f, y[1] = 7.0f, y[2] = 3.5f, y[16] = 0.4f, y[17] = -0.6f;
  uint8_t q4[18];
  io::encode_q4_0(y, 32, q4);
  // d = -8 / -8 = 1; q = 0, 15, 12 (low nibbles) and 8, 7, 8 (high: y[16..18]); zeros are 8 | 8 << 4.
  const uint8_t want4[18] = {0x00, 0x3c, 0x80, 0x7f, 0x8c, 0x88, 0x88, 0x88, 0x88,
                             0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
  EXPECT_EQ(std::memcmp(q4, want4, 18), 0);
  y[0] = 8.0f;  // the largest magnitude positive: d = -1, and it encodes as q = 0
  io::encode_q4_0(y, 32, q4);
  EXPECT_EQ(q4[0], 0x00);
  EXPECT_EQ(q4[1], 0xbc);
  EXPECT_EQ(q4[2] & 15, 0);
  EXPECT_EQ(q4_0_value(q4, 0), 8.0f);
}

TEST(GgufWriter, AFailedWriteLeavesNothing) {
  TempDir tmp;
  io::GgufWriter w;
  w.set_str("general.architecture", "llama");
  w.add_tensor("a", GgmlType::F32, {4}, [](uint8_t* d) { std::memset(d, 0, 16); });
  w.add_tensor("b", GgmlType::F32, {4}, [](uint8_t*) { fail("cannot read b"); });
  EXPECT_THROW(w.write(tmp / "x.gguf"), Error);
  EXPECT_FALSE(fs::exists(tmp / "x.gguf"));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
}

TEST(GgufWriter, RoundTripsMetadataAndAlignedTensors) {
  TempDir tmp;
  io::GgufWriter w;
  w.set_str("general.architecture", "llama");
  w.set_u32("llama.block_count", 3);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_str_array("tokenizer.ggml.tokens", {"a", "bc", ""});
  w.set_i32_array("tokenizer.ggml.token_type", {1, 3, 6});
  w.set_f32_array("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f});
  EXPECT_THROW(w.set_u32("llama.block_count", 4), Error);
  std::vector<float> a(3 * 5), b(64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::sin(float(i));
  w.add_tensor("a", GgmlType::F32, {5, 3}, [&](uint8_t* d) { std::memcpy(d, a.data(), a.size() * 4); });
  w.add_tensor("b", GgmlType::Q8_0, {64}, [&](uint8_t* d) { io::encode_q8_0(b.data(), 64, d); });
  EXPECT_THROW(w.add_tensor("c", GgmlType::Q4_0, {48, 2}, [](uint8_t*) {}), Error);  // 48 not a multiple of 32
  EXPECT_THROW(w.add_tensor("a", GgmlType::F32, {1}, [](uint8_t*) {}), Error);       // name taken
  const std::string path = tmp / "t.gguf";
  w.write(path);
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());

  const GgufMetadata m = read_gguf_metadata(path);
  EXPECT_EQ(std::get<std::string>(m.kv.at("general.architecture")), "llama");
  EXPECT_EQ(std::get<int64_t>(m.kv.at("llama.block_count")), 3);
  EXPECT_EQ(std::get<double>(m.kv.at("llama.rope.freq_base")), 10000.0);
  EXPECT_EQ(std::get<bool>(m.kv.at("tokenizer.ggml.add_bos_token")), true);
  EXPECT_EQ(std::get<std::vector<std::string>>(m.kv.at("tokenizer.ggml.tokens")),
            (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(m.kv.at("tokenizer.ggml.token_type")), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(std::get<std::vector<double>>(m.kv.at("tokenizer.ggml.scores")), (std::vector<double>{0.5, -1.0, 2.0}));

  GgufFile f(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors["a"].ne, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(f.f32("a"), a);
  EXPECT_EQ(f.tensors["b"].type, 8u);
  EXPECT_EQ(f.tensors["b"].offset, 64u);  // 60 bytes of "a", padded to 32
  for (int j = 0; j < 64; ++j) EXPECT_NEAR(q8_0_value(f.data("b") + (j / 32) * 34, j % 32), b[size_t(j)], 0.01f);
  EXPECT_EQ(f.bytes.size(), f.data_start + 64 + 68 + 28);  // the last tensor is padded too
}

TEST(CliExportGguf, StoriesHasLlamaMetadataVocabularyAndInterleavedRotaryRows) {
  TempDir tmp;
  const std::string out = tmp / "stories.gguf";
  CmdResult r = run_rinfer("export-gguf --hf " + quote(stories_hf()) + " --out " + quote(out) + " --type f32 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("MB of weights read per decoded token"), std::string::npos) << r.out;
  const GgufMetadata m = read_gguf_metadata(out);
  auto u = [&](const char* k) { return std::get<int64_t>(m.kv.at(k)); };
  EXPECT_EQ(std::get<std::string>(m.kv.at("general.architecture")), "llama");
  EXPECT_EQ(u("llama.block_count"), 5);
  EXPECT_EQ(u("llama.embedding_length"), 64);
  EXPECT_EQ(u("llama.feed_forward_length"), 172);
  EXPECT_EQ(u("llama.attention.head_count"), 8);
  EXPECT_EQ(u("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(u("llama.rope.dimension_count"), 8);
  EXPECT_EQ(u("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(u("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(u("tokenizer.ggml.unknown_token_id"), 0);
  const SentencePieceVocab sp = read_sentencepiece_vocab(testdata("stories260K/hf/tokenizer.model"));
  EXPECT_EQ(std::get<std::vector<std::string>>(m.kv.at("tokenizer.ggml.tokens")), sp.pieces);
  const auto& types = std::get<std::vector<int64_t>>(m.kv.at("tokenizer.ggml.token_type"));
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[0], 2);    // <unk>
  EXPECT_EQ(types[1], 3);    // <s>
  EXPECT_EQ(types[3], 6);    // <0x00>
  EXPECT_EQ(types[259], 1);  // "▁t"
  // The exported vocabulary tokenizes as the checkpoint does.
  const auto gguf_tok = load_gguf_tokenizer(out);
  EXPECT_EQ(gguf_tok->encode("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));

  GgufFile f(out);
  EXPECT_EQ(f.tensors.size(), 1u + 5 * 9 + 1);  // tied: no output.weight
  EXPECT_FALSE(f.tensors.count("output.weight"));
  EXPECT_EQ(f.tensors["blk.0.attn_q.weight"].ne, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(f.tensors["blk.0.attn_k.weight"].ne, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(f.tensors["blk.0.ffn_down.weight"].ne, (std::vector<int64_t>{172, 64}));
  io::SafetensorsCheckpoint hf(stories_hf());
  auto hf_f32 = [&](const std::string& name) { return tensor_f32(hf, name); };
  // q: 8 heads, k: 4, head_dim 8: GGUF row h*8 + 2i + j = HF row h*8 + 4j + i.
  for (const auto& [proj, heads] : {std::pair<std::string, int>{"q", 8}, {"k", 4}}) {
    const auto g = f.f32("blk.3.attn_" + proj + ".weight");
    const auto h = hf_f32("model.layers.3.self_attn." + proj + "_proj.weight");
    for (int hd = 0; hd < heads; ++hd)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j)
          for (int c = 0; c < 64; ++c)
            ASSERT_EQ(g[size_t((hd * 8 + 2 * i + j) * 64 + c)], h[size_t((hd * 8 + 4 * j + i) * 64 + c)])
                << proj << " head " << hd << " i " << i << " j " << j;
  }
  EXPECT_EQ(f.f32("blk.3.attn_v.weight"), hf_f32("model.layers.3.self_attn.v_proj.weight"));
  EXPECT_EQ(f.f32("blk.4.ffn_down.weight"), hf_f32("model.layers.4.mlp.down_proj.weight"));
  EXPECT_EQ(f.f32("output_norm.weight"), hf_f32("model.norm.weight"));
}

TEST(CliExportGguf, QuantizedTypesFallBackToF16ForOddRowsAndKeepNormsF32) {
  TempDir tmp;
  const std::string out = tmp / "q4.gguf";
  CmdResult r =
      run_rinfer("export-gguf --hf " + quote(stories_hf()) + " --out " + quote(out) + " --type q4_0 --output-type q8_0 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("5 matrices stay f16"), std::string::npos) << r.err;  // ffn_down: K = 172
  GgufFile f(out);
  EXPECT_EQ(f.tensors["blk.0.attn_q.weight"].type, 2u);  // Q4_0
  EXPECT_EQ(f.tensors["blk.0.ffn_down.weight"].type, 1u);  // F16
  EXPECT_EQ(f.tensors["blk.0.attn_norm.weight"].type, 0u);
  EXPECT_EQ(f.tensors["token_embd.weight"].type, 2u);
  EXPECT_EQ(f.tensors["output.weight"].type, 8u);  // its own type: a copy of the tied table
  EXPECT_EQ(std::get<int64_t>(read_gguf_metadata(out).kv.at("general.file_type")), 2);
}

TEST(CliExportGguf, Qwen2KeepsHalfSplitRowsAndWritesBiases) {
  TempDir tmp;
  const std::string out = tmp / "qwen2.gguf";
  CmdResult r = run_rinfer("export-gguf --hf " + quote(golden_dir("qwen2") + "/hf") + " --out " + quote(out) +
                           " --type f32 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::get<std::string>(read_gguf_metadata(out).kv.at("general.architecture")), "qwen2");
  GgufFile f(out);
  io::SafetensorsCheckpoint hf(golden_dir("qwen2") + "/hf");
  auto hf_f32 = [&](const std::string& name) { return tensor_f32(hf, name); };
  EXPECT_EQ(f.f32("blk.1.attn_q.weight"), hf_f32("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_EQ(f.f32("blk.1.attn_k.bias"), hf_f32("model.layers.1.self_attn.k_proj.bias"));
}

TEST(CliExportGguf, UntiedOutputLayerIsItsOwnTensor) {
  TempDir tmp;
  const std::string out = tmp / "llama.gguf";
  CmdResult r = run_rinfer("export-gguf --hf " + quote(golden_dir("llama") + "/hf") + " --out " + quote(out) +
                           " --type f32 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  GgufFile f(out);
  io::SafetensorsCheckpoint hf(golden_dir("llama") + "/hf");
  auto hf_f32 = [&](const std::string& name) { return tensor_f32(hf, name); };
  EXPECT_EQ(f.tensors["output.weight"].ne, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(f.f32("output.weight"), hf_f32("lm_head.weight"));
  EXPECT_EQ(f.f32("token_embd.weight"), hf_f32("model.embed_tokens.weight"));
  // bytes per token: everything but the embedding table, f32.
  int64_t n = 0;
  for (const auto& [name, t] : f.tensors)
    if (name != "token_embd.weight") {
      int64_t e = 1;
      for (auto d : t.ne) e *= d;
      n += e;
    }
  EXPECT_NE(r.out.find("(" + std::to_string(n * 4) + " bytes)"), std::string::npos) << r.out;
}

TEST(GgufVocab, AddedTokensAndPaddingFillVocabSize) {
  const SentencePieceVocab sp = read_sentencepiece_vocab(testdata("stories260K/hf/tokenizer.model"));
  HfTokenizerConfig cfg;
  AddedTokenSpec im_end{"<|im_end|>"}, word{"foo"};
  im_end.special = true;
  cfg.added_tokens = {{1, AddedTokenSpec{"<s>"}}, {512, im_end}, {514, word}};
  const GgufVocab v = gguf_llama_vocab(sp, cfg, 516);
  ASSERT_EQ(v.pieces.size(), 516u);
  ASSERT_EQ(v.scores.size(), 516u);
  ASSERT_EQ(v.types.size(), 516u);
  EXPECT_EQ(v.pieces[1], "<s>");  // a piece already: unchanged
  EXPECT_EQ(v.types[1], 3);
  EXPECT_EQ(v.pieces[512], "<|im_end|>");
  EXPECT_EQ(v.types[512], 3);
  EXPECT_EQ(v.pieces[513], "[PAD513]");
  EXPECT_EQ(v.types[513], 5);
  EXPECT_EQ(v.pieces[514], "foo");
  EXPECT_EQ(v.types[514], 4);
  EXPECT_EQ(v.scores[515], -1000.0f);
  cfg.added_tokens.push_back({600, word});
  EXPECT_THROW(gguf_llama_vocab(sp, cfg, 516), Error);
}

TEST(CliExportGguf, RejectsWhatItCannotWrite) {
  TempDir tmp;
  expect_fails("export-gguf --hf " + quote(golden_dir("deepseek_v2") + "/hf") + " --out " + quote(tmp / "x.gguf"),
               "supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM");
  expect_fails("export-gguf --hf " + quote(stories_hf()) + " --out " + quote(tmp / "x.gguf") + " --type q5_k",
               "--type");
  // No SentencePiece vocabulary.
  const fs::path ck = copy_checkpoint(stories_hf(), tmp.path / "ck");
  fs::remove(ck / "tokenizer.model");
  expect_fails("export-gguf --hf " + quote(ck.string()) + " --out " + quote(tmp / "x.gguf"), "tokenizer.model");
  // An existing output is not overwritten.
  { std::ofstream(tmp / "keep.gguf") << "mine"; }
  expect_fails("export-gguf --hf " + quote(stories_hf()) + " --out " + quote(tmp / "keep.gguf"), "exists");
  std::ifstream in(tmp / "keep.gguf");
  std::string s;
  in >> s;
  EXPECT_EQ(s, "mine");
  EXPECT_FALSE(fs::exists(tmp / "x.gguf"));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
}

}  // namespace
}  // namespace rinfer::test::cli
