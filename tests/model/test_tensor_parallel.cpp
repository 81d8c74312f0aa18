// Tensor parallelism inside one process: two (or four) ranks, each a thread
// with its own instance of a layer that loaded only its shard, reduced
// through an in-memory communicator, must give the unsharded layer's output.
// Checked for a column/row-parallel Linear pair, GQA attention (with fewer
// K/V heads than ranks: the ranks share copies of a K/V head) and the gated
// MLP, in every stored matrix layout, and for whole golden models (vocab-
// parallel embedding and output layer included).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "loading/model_loader.h"
#include "model/attention.h"
#include "model/feed_forward.h"
#include "model/fake_communicator.h"
#include "model/layers.h"
#include "runtime/generator.h"
#include "runtime/kv_cache.h"
#include "test_util.h"

namespace rinfer {
namespace {

namespace kc = kernels::cpu;

// Quantized matrices in both layouts: interleaved (a model directory loaded
// into memory) and separate (mapped files, or a checkpoint converted in memory).
enum class Layout { F32, BlockedBf16, Q8, Q4, Q8Separate, Q4Separate };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::F32:
      return "f32";
    case Layout::BlockedBf16:
      return "bf16_blocked";
    case Layout::Q8:
      return "q8";
    case Layout::Q4:
      return "q4";
    case Layout::Q8Separate:
      return "q8_separate";
    case Layout::Q4Separate:
      return "q4_separate";
  }
  return "?";
}

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 0.5f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Adds prefix.weight [N, K] (in `layout`) and prefix.bias [N] to the store.
void add_linear(WeightStore& ws, const std::string& prefix, int64_t N, int64_t K, Layout layout, uint32_t seed,
                bool bias = true) {
  const std::vector<float> w = random_values(size_t(N * K), seed);
  const std::string name = prefix + ".weight";
  switch (layout) {
    case Layout::F32: {
      Buffer b(w.size() * sizeof(float));
      std::memcpy(b.data(), w.data(), b.size());
      ws.add(name, {DType::F32, {N, K}, b.data()});
      ws.own(std::move(b));
      break;
    }
    case Layout::BlockedBf16: {
      std::vector<uint16_t> rows(w.size());
      convert_from_f32(DType::BF16, w.data(), rows.data(), w.size());
      Buffer b(w.size() * 2);
      kc::block_bf16(rows.data(), N, K, b.as<uint16_t>());
      ws.add(name, {DType::BF16, {N / 8, K / 32, 8, 32}, b.data()});
      ws.own(std::move(b));
      break;
    }
    case Layout::Q8:
    case Layout::Q4:
    case Layout::Q8Separate:
    case Layout::Q4Separate: {
      const QuantType t = layout == Layout::Q8 || layout == Layout::Q8Separate ? QuantType::Q8 : QuantType::Q4;
      ThreadPool pool(1);
      Buffer data(kc::quant_data_bytes(t, N, K)), scales(kc::quant_scale_bytes(N, K, 32, DType::F16));
      kc::quantize_weights(w.data(), N, K, K, t, 32, DType::F16, data.data(), scales.data(), pool);
      QuantizedWeight q{t, N, K, 32, DType::F16, data.data(), scales.data(), false, nullptr};
      if (layout == Layout::Q8Separate || layout == Layout::Q4Separate) {
        ws.add(name, {DType::U8, {int64_t(data.size())}, data.data()});
        ws.add_quantized(name, q);
        ws.own(std::move(data));
        ws.own(std::move(scales));
        break;
      }
      Buffer inter(kc::quant_interleaved_bytes(t, N, K, 32, DType::F16));
      const QuantizedWeight qi = kc::interleave_quant_scales(q, inter.data());
      ws.add(name, {DType::U8, {int64_t(inter.size())}, inter.data()});
      ws.add_quantized(name, qi);
      ws.own(std::move(inter));
      break;
    }
  }
  if (bias) {
    const std::vector<float> b = random_values(size_t(N), seed + 1000);
    Buffer buf(b.size() * sizeof(float));
    std::memcpy(buf.data(), b.data(), buf.size());
    ws.add(prefix + ".bias", {DType::F32, {N}, buf.data()});
    ws.own(std::move(buf));
  }
}

// The tolerance for a sharded result against the whole one: the partial
// sums only change the order of additions, except where the prompt GEMM
// quantizes each activation row to int8 with one scale per row (the rank
// sees only its columns, so its scale differs).
float tolerance(Layout l, int64_t rows) {
  if (l != Layout::F32 && l != Layout::BlockedBf16 && rows > kc::quant_gemv_max_m()) return 3e-2f;
  return 1e-4f;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 0.0f) << what;
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, rel * scale) << what << ": max |diff| " << worst << " against max |y| " << scale;
}

ForwardContext layer_context(ThreadPool& pool, Communicator& comm, Workspace& ws) {
  ForwardContext ctx;
  ctx.exec.pool = &pool;
  ctx.comm = &comm;
  ctx.ws = &ws;
  return ctx;
}

class TensorParallel : public ::testing::TestWithParam<Layout> {};

TEST_P(TensorParallel, ColumnThenRowLinearMatchesTheWholePair) {
  const Layout layout = GetParam();
  const int64_t H = 64, I = 128;
  WeightStore ws;
  add_linear(ws, "up", I, H, layout, 1);
  add_linear(ws, "down", H, I, layout, 2);
  for (int world_size : {2, 4})
    for (int64_t rows : {int64_t(3), int64_t(20)}) {
      const std::vector<float> x = random_values(size_t(rows * H), 7, 1.0f);
      // The whole pair.
      std::vector<float> mid(size_t(rows * I)), want(size_t(rows * H));
      {
        ThreadPool pool(1);
        Workspace w;
        ForwardContext ctx = layer_context(pool, single_process(), w);
        Linear::load(ws, "up", H, I, true).forward(ctx, x.data(), rows, mid.data());
        Linear::load(ws, "down", I, H, true).forward(ctx, mid.data(), rows, want.data());
      }
      test::FakeWorld world(world_size);
      std::vector<std::vector<float>> got(static_cast<size_t>(world_size));
      world.run([&](int rank, Communicator& comm) {
        const Shard shard{rank, world_size};
        const Linear up = Linear::load(ws, "up", H, I, true, ParallelMode::Column, shard);
        const Linear down = Linear::load(ws, "down", I, H, true, ParallelMode::Row, shard);
        EXPECT_EQ(up.rows().begin, down.cols().begin);
        EXPECT_EQ(up.out(), I / world_size);
        EXPECT_TRUE(down.reduces());
        ThreadPool pool(1);
        Workspace w;
        ForwardContext ctx = layer_context(pool, comm, w);
        std::vector<float> part(size_t(rows * up.out()));
        got[size_t(rank)].resize(size_t(rows * H));
        up.forward(ctx, x.data(), rows, part.data());
        down.forward(ctx, part.data(), rows, got[size_t(rank)].data());
      });
      for (int r = 0; r < world_size; ++r)
        expect_close(got[size_t(r)], want, tolerance(layout, rows),
                     std::string(layout_name(layout)) + " rows " + std::to_string(rows) + " world " +
                         std::to_string(world_size) + " rank " + std::to_string(r));
    }
}

TEST_P(TensorParallel, GatedMlpMatchesTheWholeMlp) {
  const Layout layout = GetParam();
  const int64_t H = 128, I = 256;
  WeightStore ws;
  add_linear(ws, "mlp.gate_proj", I, H, layout, 11, false);
  add_linear(ws, "mlp.up_proj", I, H, layout, 12, false);
  add_linear(ws, "mlp.down_proj", H, I, layout, 13, false);
  for (int world_size : {2, 4})
    for (int64_t rows : {int64_t(1), int64_t(4), int64_t(20)}) {
      const std::vector<float> x = random_values(size_t(rows * H), 17, 1.0f);
      std::vector<float> want(size_t(rows * H));
      {
        ThreadPool pool(1);
        Workspace w;
        ForwardContext ctx = layer_context(pool, single_process(), w);
        GatedMLP::load(ws, "mlp.", H, I).forward(x.data(), rows, want.data(), ctx);
      }
      test::FakeWorld world(world_size);
      std::vector<std::vector<float>> got(static_cast<size_t>(world_size));
      world.run([&](int rank, Communicator& comm) {
        GatedMLP mlp =
            GatedMLP::load(ws, "mlp.", H, I, "gate_proj", "up_proj", "down_proj", false, {rank, world_size});
        EXPECT_EQ(mlp.intermediate(), I / world_size);
        ThreadPool pool(1);
        Workspace w;
        ForwardContext ctx = layer_context(pool, comm, w);
        got[size_t(rank)].resize(size_t(rows * H));
        mlp.forward(x.data(), rows, got[size_t(rank)].data(), ctx);
      });
      for (int r = 0; r < world_size; ++r)
        expect_close(got[size_t(r)], want, tolerance(layout, rows),
                     std::string(layout_name(layout)) + " rows " + std::to_string(rows) + " world " +
                         std::to_string(world_size) + " rank " + std::to_string(r));
    }
}

// One layer of attention over a fresh cache: a prompt of 6 tokens in two
// chunks of decode size (quantized activations per group, so the shards
// change only the order of additions), then two decode steps; out holds
// every step's rows one after another.
std::vector<float> run_attention(GqaAttention& attn, int64_t n_kv_heads, int64_t head_dim, const float* h,
                                 int64_t hidden, ThreadPool& pool, Communicator& comm) {
  KVCacheOptions ko;
  ko.block_size = 4;
  ko.n_blocks = 4;
  KVCache kv({1, n_kv_heads, head_dim}, ko);
  std::vector<int32_t> table;
  const int32_t ids[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  Workspace ws;
  std::vector<float> out;
  for (auto [start, n] : {std::pair<int64_t, int64_t>{0, 4}, {4, 2}, {6, 1}, {7, 1}}) {
    kv.reserve(table, start + n);
    BatchItem item{std::span<const int32_t>(ids, size_t(n)), start, table, LogitRows::None};
    std::vector<int64_t> pos(static_cast<size_t>(n)), seq(static_cast<size_t>(n), 0);
    for (int64_t t = 0; t < n; ++t) pos[size_t(t)] = start + t;
    const int32_t* tables[1] = {table.data()};
    const KvView view = kv.view();
    TokenAngles angles;
    ForwardContext ctx = layer_context(pool, comm, ws);
    ctx.batch = {&item, 1};
    ctx.tokens = {n, pos.data(), seq.data(), tables, start + n};
    ctx.kv = &view;
    ctx.angles = &angles;
    std::vector<float> o(size_t(n * hidden));
    attn.forward(h + start * hidden, ctx, 0, o.data());
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

void check_attention(Layout layout, int64_t n_heads, int64_t n_kv_heads, int world_size, bool alibi) {
  const int64_t D = 32, H = 128;
  WeightStore ws;
  const std::string p = "attn.";
  add_linear(ws, p + "q_proj", n_heads * D, H, layout, 21);
  add_linear(ws, p + "k_proj", n_kv_heads * D, H, layout, 22);
  add_linear(ws, p + "v_proj", n_kv_heads * D, H, layout, 23);
  add_linear(ws, p + "o_proj", H, n_heads * D, layout, 24);
  ModelConfig cfg;
  cfg.rope_theta = 10000;
  cfg.max_position_embeddings = 64;
  auto rope = alibi ? nullptr : std::make_shared<const RotaryEmbedding>(cfg, D, RopeStyle::RotateHalf);
  const std::vector<float> slopes = alibi ? alibi_slopes(n_heads) : std::vector<float>{};
  const GqaShape shape{H, n_heads, n_kv_heads, D};
  const std::vector<float> h = random_values(size_t(8 * H), 29, 1.0f);
  std::vector<float> want;
  {
    ThreadPool pool(1);
    GqaAttention whole = GqaAttention::load(shape, ws, p, true, true, rope, slopes);
    want = run_attention(whole, n_kv_heads, D, h.data(), H, pool, single_process());
  }
  test::FakeWorld world(world_size);
  std::vector<std::vector<float>> got(static_cast<size_t>(world_size));
  world.run([&](int rank, Communicator& comm) {
    GqaAttention part = GqaAttention::load(shape, ws, p, true, true, rope, slopes, {rank, world_size});
    EXPECT_EQ(part.n_local_heads(), n_heads / world_size);
    EXPECT_EQ(part.n_local_kv_heads(), std::max<int64_t>(1, n_kv_heads / world_size));
    ThreadPool pool(1);
    got[size_t(rank)] = run_attention(part, part.n_local_kv_heads(), D, h.data(), H, pool, comm);
  });
  for (int r = 0; r < world_size; ++r)
    expect_close(got[size_t(r)], want, tolerance(layout, 4),
                 std::string(layout_name(layout)) + " heads " + std::to_string(n_heads) + "/" +
                     std::to_string(n_kv_heads) + " world " + std::to_string(world_size) + " rank " +
                     std::to_string(r));
}

TEST_P(TensorParallel, GqaAttentionWithFewerKvHeadsThanRanks) {
  check_attention(GetParam(), 4, 1, 2, false);  // both ranks keep a copy of the one K/V head
  check_attention(GetParam(), 4, 2, 4, false);  // two ranks per K/V head
}

TEST_P(TensorParallel, GqaAttentionWithKvHeadsSplit) { check_attention(GetParam(), 4, 2, 2, false); }

TEST_P(TensorParallel, AlibiAttentionKeepsEachHeadsSlope) { check_attention(GetParam(), 4, 4, 2, true); }

INSTANTIATE_TEST_SUITE_P(Layouts, TensorParallel,
                         ::testing::Values(Layout::F32, Layout::BlockedBf16, Layout::Q8, Layout::Q4, Layout::Q8Separate,
                                           Layout::Q4Separate),
                         [](const auto& info) { return std::string(layout_name(info.param)); });

TEST(TensorParallelShards, RangesCoverTheWholeOnTheirUnits) {
  for (int world : {1, 2, 3, 4}) {
    int64_t next = 0;
    for (int r = 0; r < world; ++r) {
      const Range part = shard_range(100, {r, world}, 16);
      EXPECT_EQ(part.begin, next);
      EXPECT_TRUE(part.begin % 16 == 0);
      next = part.end;
    }
    EXPECT_EQ(next, 100);
  }
  EXPECT_THROW(shard_range(32, {0, 4}, 16), Error);  // two blocks cannot feed four ranks
}

TEST(TensorParallelShards, HeadsThatDoNotSplitAreAClearError) {
  WeightStore ws;
  add_linear(ws, "attn.q_proj", 3 * 32, 64, Layout::F32, 1);
  add_linear(ws, "attn.k_proj", 32, 64, Layout::F32, 2);
  add_linear(ws, "attn.v_proj", 32, 64, Layout::F32, 3);
  add_linear(ws, "attn.o_proj", 64, 3 * 32, Layout::F32, 4);
  EXPECT_THROW(GqaAttention::load({64, 3, 1, 32}, ws, "attn.", true, true, nullptr, {}, {0, 2}), Error);
  // Whole heads, but their o_proj columns (2 heads of 8) end inside a
  // quantization group of 32.
  WeightStore q;
  add_linear(q, "attn.q_proj", 4 * 8, 64, Layout::Q8, 1);
  add_linear(q, "attn.k_proj", 16, 64, Layout::Q8, 2);
  add_linear(q, "attn.v_proj", 16, 64, Layout::Q8, 3);
  add_linear(q, "attn.o_proj", 64, 4 * 8, Layout::Q8, 4);
  try {
    GqaAttention::load({64, 4, 2, 8}, q, "attn.", true, true, nullptr, {}, {0, 2});
    FAIL() << "o_proj cut inside a group";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of its 32-column units"), std::string::npos) << e.what();
  }
}

// A whole golden model on `world` ranks, driven by rank 0's runner: its
// logits (gathered from every rank's vocabulary columns) match the
// single-process model's, prompt and forced steps.
void check_model(const std::string& family, int world, std::optional<QuantType> quant) {
  const std::string dir = test::testdata("golden/" + family + "/hf").string();
  LoadOptions lo;
  lo.quant = quant;
  if (quant) lo.group_size = 32;
  const std::vector<int32_t> prompt = {1, 17, 33, 250, 7, 99, 401, 12, 5, 60};
  auto run = [&](const Shard& shard, Communicator* comm, std::vector<float>& logits, std::vector<float>& steps) {
    ThreadPool pool(1);
    LoadOptions mine = lo;
    mine.shard = shard;
    LoadedModel lm = load_model(dir, mine, pool);
    KVCacheOptions ko;
    ko.n_blocks = 8;
    ModelRunner runner(*lm.model, ko, pool, comm);
    if (!runner.leader()) {  // the other ranks run rank 0's batches
      runner.work();
      return;
    }
    Generator gen(runner);
    // Quantized: prompt chunks of decode size (the GEMV path, below).
    if (quant) gen.set_prefill_chunk(kc::quant_gemv_max_m());
    const int32_t forced[3] = {40, 41, 42};
    gen.score(prompt, forced, logits, steps);
  };
  // Quantized: the decode GEMV with f32 activations. With int8 activations
  // the shards' other order of additions moves a value across a rounding
  // boundary of the next layer's activation quantization now and then,
  // which Q4 then carries to ~1 % of a logit: real, but not the sharding's
  // error (the layer tests above check each layer with int8 activations).
  struct QuantDecodeScope {
    bool on;
    explicit QuantDecodeScope(bool on) : on(on) {
      if (on) kc::set_quant_decode(kc::QuantDecode::WeightOnly);
    }
    ~QuantDecodeScope() {
      if (on) kc::set_quant_decode(kc::QuantDecode::Auto);
    }
  } weight_only(quant.has_value());
  std::vector<float> want, want_steps;
  run({}, nullptr, want, want_steps);
  test::FakeWorld fw(world);
  std::vector<std::vector<float>> got(static_cast<size_t>(world)), got_steps(static_cast<size_t>(world));
  fw.run([&](int rank, Communicator& comm) { run({rank, world}, &comm, got[size_t(rank)], got_steps[size_t(rank)]); });
  const float tol = 1e-4f;
  const std::string what = family + " world " + std::to_string(world) + (quant ? " int8" : " f32");
  // Rank 0 samples: it has the gathered logits.
  expect_close(got[0], want, tol, what + " prompt");
  expect_close(got_steps[0], want_steps, tol, what + " steps");
}

TEST(TensorParallelModels, GoldenFamiliesOnTwoAndFourRanks) {
  check_model("llama", 2, std::nullopt);
  check_model("llama", 4, std::nullopt);  // 2 K/V heads on 4 ranks
  check_model("qwen2", 2, std::nullopt);  // tied embeddings, q/k/v biases
  check_model("baichuan_13b_alibi", 2, std::nullopt);
  check_model("chatglm_glm4", 2, std::nullopt);
  check_model("mixtral", 2, std::nullopt);  // experts replicated, attention split
  check_model("llama", 2, QuantType::Q8);
  check_model("llama", 4, QuantType::Q4);
}

}  // namespace
}  // namespace rinfer

namespace rinfer {
namespace {

TEST(TensorParallelModels, AShardWithoutItsPeersIsAnError) {
  ThreadPool pool(1);
  LoadOptions lo;
  lo.shard = {1, 2};
  LoadedModel lm = load_model(test::testdata("golden/llama/hf").string(), lo, pool);
  KVCacheOptions ko;
  ko.n_blocks = 4;
  ModelRunner runner(*lm.model, ko, pool);  // no communicator: a world of one
  Generator gen(runner);
  std::vector<float> logits, steps;
  const int32_t prompt[2] = {1, 17};
  try {
    gen.score(prompt, {}, logits, steps);
    FAIL() << "a rank-1-of-2 model ran alone";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rinfer

namespace rinfer {
namespace {

// The control plane: rank 0's runner broadcasts each batch, the other ranks'
// runners follow in work(); greedy generation over two ranks gives the
// single process's tokens.
TEST(TensorParallelModels, WorkersFollowRankZerosBatches) {
  const std::string dir = test::testdata("golden/qwen2/hf").string();
  const std::vector<int32_t> prompt = {1, 17, 33, 250, 7, 99, 401, 12, 5, 60, 3, 44};
  GenerateOptions go;
  go.max_new_tokens = 12;
  go.sampling.temperature = 0;
  auto generate = [&](const Shard& shard, Communicator* comm, std::vector<int32_t>* out) {
    ThreadPool pool(1);
    LoadOptions lo;
    lo.shard = shard;
    LoadedModel lm = load_model(dir, lo, pool);
    KVCacheOptions ko;
    ko.block_size = 4;
    ko.n_blocks = 16;
    ModelRunner runner(*lm.model, ko, pool, comm);
    if (!runner.leader()) {
      runner.work();
      return;
    }
    Generator gen(runner);
    gen.set_prefill_chunk(5);  // three prompt chunks, then decode steps
    *out = gen.generate(prompt, go).output_ids;
  };
  std::vector<int32_t> want, got;
  generate({}, nullptr, &want);
  ASSERT_EQ(want.size(), 12u);
  test::FakeWorld world(2);
  world.run([&](int rank, Communicator& comm) { generate({rank, 2}, &comm, rank == 0 ? &got : nullptr); });
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace rinfer
