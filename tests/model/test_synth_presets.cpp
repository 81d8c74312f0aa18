// Synthetic checkpoints: every preset's config parses under its
// architecture; FP8 (DeepSeek-V3 layout) checkpoints dequantize to the same
// weights as the unquantized synth of the same seed, within FP8 rounding.
#include <cmath>

#include "convert/converter.h"
#include "convert/hf_checkpoint.h"
#include "convert/synth.h"
#include "runtime/generator.h"
#include "loading/model_loader.h"
#include "test_util.h"

namespace rinfer {
namespace {

TEST(SynthPresets, EveryPresetParsesWithItsArchitecture) {
  for (const auto& p : synth_presets()) {
    SCOPED_TRACE(p.name);
    const Architecture& arch = find_architecture(p.config["architectures"][0].get<std::string>());
    ModelConfig c = arch.parse_hf_config(p.config);
    EXPECT_GT(all_tensor_specs(arch, c).size(), 3u);
    EXPECT_GT(c.n_layers, 0);
  }
}

TEST(SynthPresets, MiniDeepSeekV3RunsFromHfDirectory) {
  test::TempDir dir;
  SynthOptions o;
  o.preset = "deepseek-v3-mini";
  o.out = dir / "m";
  o.dtype = DType::BF16;
  synth_checkpoint(o);
  ThreadPool pool(2);
  LoadedModel lm = load_model(o.out, {}, pool);
  KVCacheOptions ko;
  ko.n_blocks = 8;
  ko.dtype = DType::BF16;
  ModelRunner runner(*lm.model, ko, pool);
  // MLA caches one latent row per token: (kv_lora + rope) values per layer.
  EXPECT_EQ(runner.kv().bytes_per_token(), size_t(4 * (64 + 16) * 2));
  Generator gen(runner);
  GenerateOptions go;
  go.max_new_tokens = 4;
  go.sampling.temperature = 0;
  auto r = gen.generate(std::vector<int32_t>{1, 300, 301}, go);
  EXPECT_EQ(r.output_ids.size(), 4u);
  EXPECT_FALSE(lm.model->expert_counts().empty());
}

TEST(SynthFp8, DequantizedWeightsMatchUnquantizedWithinFp8Rounding) {
  test::TempDir dir;
  SynthOptions o;
  o.preset = "deepseek-v3-mini";
  o.layers = 2;
  o.dtype = DType::F32;
  o.out = dir / "ref";
  synth_checkpoint(o);
  o.out = dir / "fp8";
  o.fp8 = true;
  synth_checkpoint(o);
  HfCheckpoint ref = HfCheckpoint::open(dir / "ref");
  HfCheckpoint fp8 = HfCheckpoint::open(dir / "fp8");
  ASSERT_TRUE(fp8.config.family.contains("fp8_weight_block"));
  WeightStore ws_ref, ws_fp8;
  MemorySink sink_ref(ws_ref), sink_fp8(ws_fp8);
  ConvertOptions co;
  co.dtype = DType::F32;
  convert_tensors(ref, co, sink_ref);
  ConvertStats st = convert_tensors(fp8, co, sink_fp8);
  EXPECT_TRUE(st.unused_hf_tensors.empty()) << "scale tensors must be consumed";
  int fp8_tensors = 0;
  for (const auto& [name, want] : ws_ref.tensors()) {
    SCOPED_TRACE(name);
    const TensorView got = ws_fp8.tensors().at(name);
    ASSERT_EQ(got.shape, want.shape);
    const auto* entry = fp8.tensors->find(name);
    ASSERT_NE(entry, nullptr);
    const float* a = got.as<float>();
    const float* b = want.as<float>();
    if (entry->dtype != DType::F8_E4M3) {
      for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(a[i], b[i]);
      continue;
    }
    ++fp8_tensors;
    // e4m3 keeps 3 mantissa bits: rounding moves q = w / scale by at most
    // |q| * 2^-4 (normal) or 2^-10 (subnormal), so w by scale times that.
    const TensorView sc = fp8.tensors->get(name + "_scale_inv");
    const int64_t cols = want.shape[1], sc_cols = sc.shape[1];
    double worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float scale = sc.as<float>()[(i / cols) / 128 * sc_cols + (i % cols) / 128];
      const double bound = scale * (std::fabs(b[i] / scale) * 0.0625 + std::ldexp(1.0, -10)) * 1.0001;
      ASSERT_LE(std::fabs(a[i] - b[i]), bound) << "element " << i;
      worst = std::max(worst, double(std::fabs(a[i] - b[i])) / bound);
    }
    EXPECT_GT(worst, 0.05) << "suspiciously exact: is the FP8 path really used?";
  }
  EXPECT_GE(fp8_tensors, 10);
}

}  // namespace
}  // namespace rinfer
