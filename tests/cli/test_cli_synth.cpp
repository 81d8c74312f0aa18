// `rinfer synth`, then `run` and `bench` on the random checkpoint; seeded
// sampling.
#include <cmath>

#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

fs::path synth_tiny(const TempDir& tmp, const std::string& name = "t") {
  const fs::path out = tmp.path / name;
  CmdResult r = run_rinfer("synth --preset tiny --out " + quote(out.string()) + " --dtype f32");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(out / "config.json"));
  EXPECT_TRUE(fs::is_regular_file(out / "tokenizer.model"));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
  return out;
}

std::vector<int32_t> sample(const fs::path& model, const std::string& seed) {
  const json j = run_json("run --model " + quote(model.string()) +
                          " --prompt 'Once upon a time' -n 24 --ignore-eos --temperature 0.8 --json --threads 1"
                          " --seed " + seed);
  EXPECT_EQ(j.value("seed", uint64_t(0)), std::stoull(seed)) << "the JSON reports the seed used";
  return ids_of(j, "output_ids");
}

}  // namespace

TEST(CliSynth, TinyRunsFromTextPrompt) {
  TempDir tmp;
  const fs::path t = synth_tiny(tmp);
  const json cfg = read_json(t / "config.json");
  const int64_t vocab = cfg.value("vocab_size", 0);
  ASSERT_GT(vocab, 0);
  CmdResult r = run_rinfer("run --model " + quote(t.string()) + " --prompt 'Hello world' -n 8 --json --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const auto prompt = ids_of(j, "prompt_ids");
  ASSERT_GE(prompt.size(), 2u);
  EXPECT_EQ(prompt[0], 1) << "BOS first";
  const auto out = ids_of(j, "output_ids");
  ASSERT_FALSE(out.empty());
  EXPECT_LE(out.size(), 8u);
  for (int32_t id : out) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, vocab);
  }
  EXPECT_TRUE(j["text"].is_string());
}

TEST(CliSynth, TrailingSlashAndExistingOut) {
  TempDir tmp;
  const fs::path t = tmp.path / "t";
  CmdResult r = run_rinfer("synth --preset tiny --out " + quote(t.string() + "/") + " --dtype bf16");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(t / "model.safetensors"));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
  EXPECT_TRUE(tmp_leftovers(t).empty());
  const std::string before = read_bytes(t / "config.json");
  expect_fails("synth --preset tiny --out " + quote(t.string()), "already exists");
  EXPECT_EQ(read_bytes(t / "config.json"), before);
  expect_fails("synth --preset nope --out " + quote((tmp.path / "u").string()), "tiny");
  EXPECT_FALSE(fs::exists(tmp.path / "u"));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
}

TEST(CliBench, WritesJsonWithAllMetrics) {
  TempDir tmp;
  const fs::path t = synth_tiny(tmp);
  const fs::path b = tmp.path / "b.json";
  CmdResult r = run_rinfer("bench --model " + quote(t.string()) + " --prompt-len 8 --gen-len 4 --samples 2 --json " +
                           quote(b.string()) + " --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::is_regular_file(b));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
  const json j = read_json(b);
  for (const char* k : {"ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "peak_rss_bytes"}) {
    SCOPED_TRACE(k);
    ASSERT_TRUE(j.contains(k) && j[k].is_number());
    EXPECT_GT(j[k].get<double>(), 0);
    const std::string s = std::string(k) + "_std";
    ASSERT_TRUE(j.contains(s) && j[s].is_number()) << s;
    EXPECT_GE(j[s].get<double>(), 0);
  }
  ASSERT_TRUE(j.contains("weight_bytes_per_token") && j["weight_bytes_per_token"].is_number_integer());
  EXPECT_GT(j["weight_bytes_per_token"].get<int64_t>(), 0);
  EXPECT_EQ(j.value("threads", 0), 1);
  EXPECT_EQ(j.value("dtype", ""), "f32");
  EXPECT_EQ(j.value("model", ""), "t");
  ASSERT_TRUE(j.contains("cpu") && j["cpu"].is_string());
  ASSERT_TRUE(j.contains("rinfer_commit") && j["rinfer_commit"].is_string());
  EXPECT_FALSE(j["rinfer_commit"].get<std::string>().empty());
  EXPECT_EQ(j.value("samples", 0), 2);
  EXPECT_EQ(j.value("prompt_len", 0), 8);
  EXPECT_EQ(j.value("gen_len", 0), 4);
  // Memory accounting: weights and the preallocated KV cache, and peak RSS
  // over their sum (the process itself adds a few MB to a tiny model).
  EXPECT_GT(j.at("weight_bytes_total").get<double>(), j.at("weight_bytes_per_token").get<double>());
  EXPECT_GT(j.at("kv_cache_bytes").get<double>(), 0);
  EXPECT_EQ(j.at("n_layers"), read_json(t / "config.json").at("num_hidden_layers"));
  // f32 KV cache (f32 weights): K and V of every layer.
  {
    const json c = read_json(t / "config.json");
    const int64_t heads = c.at("num_attention_heads"), kv_heads = c.value("num_key_value_heads", heads);
    const int64_t head_dim = c.at("hidden_size").get<int64_t>() / heads;
    EXPECT_EQ(j.at("kv_bytes_per_token").get<int64_t>(), 2 * 4 * j.at("n_layers").get<int64_t>() * kv_heads * head_dim);
  }
  EXPECT_DOUBLE_EQ(j.at("peak_rss_over_weights_and_kv").get<double>(),
                   j.at("peak_rss_bytes").get<double>() /
                       (j.at("weight_bytes_total").get<double>() + j.at("kv_cache_bytes").get<double>()));
  // Prefill work as the matmul kernels counted it: every projection for the
  // 8 prompt tokens, lm_head for the last one only.
  const json c = read_json(t / "config.json");
  const double H = c["hidden_size"], I = c["intermediate_size"], L = c["num_hidden_layers"], V = c["vocab_size"];
  const double heads = c["num_attention_heads"], kvh = c.value("num_key_value_heads", heads), hd = H / heads;
  const double per_token = L * (2 * H * heads * hd + 2 * H * kvh * hd + 3 * H * I);
  EXPECT_DOUBLE_EQ(j.at("prefill_matmul_gflop").get<double>(), 2 * (8 * per_token + V * H) / 1e9);
  EXPECT_GT(j.at("prefill_matmul_gflop_s").get<double>(), 0);
  // The roofline is measured in the run unless --mem-bw gives the bandwidth:
  // by default a read between the decode steps (--bw-probe steps), whose
  // 256 MiB buffer is not counted in the peak RSS.
  EXPECT_EQ(j.value("mem_bw_source", ""), "measured");
  EXPECT_EQ(j.value("bw_probe", ""), "steps");
  EXPECT_NE(r.out.find("GB/s (read between the decode steps)"), std::string::npos) << r.out;
  EXPECT_GT(j.at("mem_bw_gb_s").get<double>(), 0);
  EXPECT_GT(j.at("decode_bandwidth_ratio").get<double>(), 0);
  EXPECT_EQ(j.value("peak_kind", ""), "f32-fma");  // f32 weights: the FMA GEMM
  // Each sample against its own peak probes (before and after its prefill),
  // and the mean prefill rate against the run's best probe.
  const auto peaks = j.at("sample_peak_gops").get<std::vector<double>>();
  const auto prefill_s = j.at("sample_prefill_s").get<std::vector<double>>();
  ASSERT_EQ(peaks.size(), 2u);
  ASSERT_EQ(prefill_s.size(), 2u);
  double ratio = 0;
  for (size_t i = 0; i < 2; ++i) ratio += j.at("prefill_matmul_gflop").get<double>() / prefill_s[i] / peaks[i] / 2;
  EXPECT_NEAR(j.at("prefill_peak_ratio").get<double>(), ratio, 1e-12 * ratio);
  EXPECT_NEAR(j.at("peak_gops").get<double>(), (peaks[0] + peaks[1]) / 2, 1e-9);
  EXPECT_EQ(j.at("peak_gops_best").get<double>(), std::max(peaks[0], peaks[1]));
  EXPECT_GT(j.at("peak_gops").get<double>(), 0);
  EXPECT_DOUBLE_EQ(j.at("prefill_peak_ratio_vs_best").get<double>(),
                   j.at("prefill_matmul_gflop_s").get<double>() / j.at("peak_gops_best").get<double>());
  // The decode ratio likewise, sample by sample against its read probe.
  {
    const auto bws = j.at("sample_mem_bw_gb_s").get<std::vector<double>>();
    const auto tps = j.at("sample_decode_tokens_per_s").get<std::vector<double>>();
    ASSERT_EQ(bws.size(), 2u);
    ASSERT_EQ(tps.size(), 2u);
    const double wb = j.at("weight_bytes_per_token").get<double>();
    const double dr = (wb * tps[0] / 1e9 / bws[0] + wb * tps[1] / 1e9 / bws[1]) / 2;
    EXPECT_NEAR(j.at("decode_bandwidth_ratio").get<double>(), dr, 1e-12 * dr);
  }
  // One sample on one thread with `extra` options; its JSON.
  auto one_sample = [&](const std::string& extra) {
    r = run_rinfer("bench --model " + quote(t.string()) + " --prompt-len 8 --gen-len 4 --samples 1 --threads 1 " +
                   extra + " --json " + quote(b.string()));
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? read_json(b) : json::object();
  };
  const json g = one_sample("--mem-bw 12.5 --no-roofline");
  EXPECT_EQ(g.value("mem_bw_source", ""), "given");
  EXPECT_EQ(g.at("mem_bw_gb_s").get<double>(), 12.5);
  EXPECT_FALSE(g.contains("peak_gops"));
  EXPECT_NE(r.out.find("of 12.5 GB/s (--mem-bw)"), std::string::npos) << r.out;
  // --bw-probe after: a 512 MiB read after each sample (freed before the
  // next one, so outside the RSS). The step probe's 256 MiB, resident during
  // the samples, are subtracted: the two runs' peak RSS are about the same.
  const json a = one_sample("--bw-probe after");
  EXPECT_EQ(a.value("bw_probe", ""), "after");
  ASSERT_TRUE(a.contains("mem_bw_gb_s"));
  EXPECT_GT(a.at("mem_bw_gb_s").get<double>(), 0);
  EXPECT_NE(r.out.find("GB/s (read, measured after each sample)"), std::string::npos) << r.out;
  EXPECT_LT(std::abs(j.at("peak_rss_bytes").get<double>() - a.at("peak_rss_bytes").get<double>()), 64.0 * (1 << 20));
}

// bench --batch: N sequences decoding together through the runner. The
// matmul work it counts per token is the model's (every projection and the
// output layer once), and the aggregate and lone rates are real rates.
TEST(CliBench, BatchDecodesSequencesTogether) {
  TempDir tmp;
  const fs::path t = synth_tiny(tmp);
  const fs::path b = tmp.path / "batch.json";
  CmdResult r = run_rinfer("bench --model " + quote(t.string()) + " --batch 5 --prompt-len 8 --gen-len 6 --samples 2 " +
                           "--threads 1 --json " + quote(b.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("scaling"), std::string::npos) << r.out;
  const json j = read_json(b);
  EXPECT_EQ(j.at("batch"), 5);
  for (const char* k : {"decode_tokens_per_s_aggregate", "decode_tokens_per_s_alone", "batch_scaling", "step_ms"}) {
    SCOPED_TRACE(k);
    EXPECT_GT(j.at(k).get<double>(), 0);
  }
  EXPECT_EQ(j.at("sample_batch_scaling").size(), 2u);
  const json c = read_json(t / "config.json");
  const int64_t H = c.at("hidden_size"), I = c.at("intermediate_size"), L = c.at("num_hidden_layers"),
                V = c.at("vocab_size"), heads = c.at("num_attention_heads");
  const int64_t kv = c.value("num_key_value_heads", heads) * (H / heads);
  const double macs = double(L * (H * H + 2 * kv * H + H * H + 3 * I * H) + V * H);
  EXPECT_NEAR(j.at("matmul_gflop_per_token").get<double>(), 2 * macs / 1e9, 1e-12);
  const std::string m = " --model " + quote(t.string()) + " --batch 4";
  expect_fails("bench" + m + " --speculative ngram", "--batch");
  expect_fails("bench" + m + " --gen-len 1", "--gen-len");
  expect_fails("bench" + m + " --batch 0", "--batch");
}

TEST(CliBench, RejectsBadRequests) {
  TempDir tmp;
  const fs::path t = synth_tiny(tmp);
  const std::string m = " --model " + quote(t.string());
  expect_fails("bench" + m + " --prompt-len 0", "--prompt-len");
  expect_fails("bench" + m + " --samples -1", "--samples");
  expect_fails("bench" + m + " --gen-len x", "--gen-len");
  expect_fails("bench" + m + " --bw-probe sometimes", "--bw-probe");
  // Prompt plus generation beyond the model's positions.
  const int64_t ctx = read_json(t / "config.json").value("max_position_embeddings", 0);
  expect_fails("bench" + m + " --threads 1 --prompt-len " + std::to_string(ctx) + " --gen-len 1", "context");
}

TEST(CliSynth, SeededSamplingIsReproducible) {
  TempDir tmp;
  const fs::path t = synth_tiny(tmp);
  const auto a = sample(t, "1234");
  const auto b = sample(t, "1234");
  ASSERT_EQ(a.size(), 24u);
  EXPECT_EQ(a, b) << "same seed, same ids";
  // Different seeds give different samples (random weights: a nearly flat
  // distribution over 1024 ids, so 24 equal draws would be astronomically rare).
  EXPECT_NE(sample(t, "1235"), a);
  // And on the real model, the same holds with a peaked distribution.
  const std::string base = "run --model " + quote(stories_hf()) +
                           " --prompt 'The cat' -n 48 --temperature 0.8 --top-p 0.95 --json --threads 1 --seed 42";
  const json x = run_json(base), y = run_json(base);
  EXPECT_EQ(ids_of(x, "output_ids"), ids_of(y, "output_ids"));
  EXPECT_EQ(x.value("text", "a"), y.value("text", "b"));
}

}  // namespace rinfer::test::cli
