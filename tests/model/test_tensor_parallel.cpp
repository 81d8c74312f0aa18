// Tensor parallelism inside one process: two (or four) ranks, each a thread
// with its own instance of a layer that loaded only its shard, reduced
// through an in-memory communicator, must give the unsharded layer's output.
// Checked for a column/row-parallel Linear pair, GQA attention (with fewer
// K/V heads than ranks: the ranks share copies of a K/V head), the gated
// MLP, the mixture of experts (every expert split, one reduction per layer)
// and latent attention (heads split), in every stored matrix layout, and for
// whole golden models (vocab-parallel embedding and output layer included).
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
#include "model/mla.h"
#include "model/moe_layout.h"
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

// An f32 tensor `name` of `shape`, its values around `center`.
void add_f32(WeightStore& ws, const std::string& name, const Shape& shape, uint32_t seed, float center = 0.0f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v = random_values(size_t(n), seed);
  for (float& x : v) x += center;
  Buffer b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  ws.add(name, {DType::F32, shape, b.data()});
  ws.own(std::move(b));
}

// Passes every collective on to `inner`, counting the all-reduces: how
// often a layer makes its ranks wait for one another.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world() const override { return inner_.world(); }
  void all_reduce_sum(float* data, int64_t n) override {
    ++all_reduces;
    inner_.all_reduce_sum(data, n);
  }
  void all_gather_columns(const float* send, int64_t rows, std::span<const int64_t> counts, float* recv) override {
    inner_.all_gather_columns(send, rows, counts, recv);
  }
  void broadcast(void* data, int64_t bytes, int root) override { inner_.broadcast(data, bytes, root); }
  int all_reduces = 0;

 private:
  Communicator& inner_;
};

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
        // The partial sums, reduced by the caller, add the bias once.
        std::vector<float> partial(size_t(rows * H));
        down.forward_partial(ctx, part.data(), rows, partial.data());
        comm.all_reduce_sum(partial.data(), rows * H);
        expect_close(partial, got[size_t(rank)], 1e-5f, "forward_partial, reduced");
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
std::vector<float> run_attention(AttentionBlock& attn, const KVCacheShape& kv_shape, const float* h, int64_t hidden,
                                 ThreadPool& pool, Communicator& comm) {
  KVCacheOptions ko;
  ko.block_size = 4;
  ko.n_blocks = 4;
  KVCache kv(kv_shape, ko);
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
    want = run_attention(whole, {1, n_kv_heads, D}, h.data(), H, pool, single_process());
  }
  test::FakeWorld world(world_size);
  std::vector<std::vector<float>> got(static_cast<size_t>(world_size));
  world.run([&](int rank, Communicator& comm) {
    GqaAttention part = GqaAttention::load(shape, ws, p, true, true, rope, slopes, {rank, world_size});
    EXPECT_EQ(part.n_local_heads(), n_heads / world_size);
    EXPECT_EQ(part.n_local_kv_heads(), std::max<int64_t>(1, n_kv_heads / world_size));
    ThreadPool pool(1);
    got[size_t(rank)] = run_attention(part, {1, part.n_local_kv_heads(), D}, h.data(), H, pool, comm);
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

// The replicated router and shared-expert gate, with every expert's and the
// shared expert's width split: the rank's partial sums, weighted, give the
// whole layer's output after one all-reduce, and each rank holds 1/world
// of the experts' bytes.
TEST_P(TensorParallel, MoeSplitsEveryExpertAndReducesOnce) {
  const Layout layout = GetParam();
  const int64_t H = 128, I = 128, E = 4;
  WeightStore ws;
  const std::string p = "moe.";
  add_f32(ws, p + "gate.weight", {E, H}, 31);
  for (int64_t e = 0; e < E; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    add_linear(ws, x + "gate_proj", I, H, layout, uint32_t(40 + 3 * e), false);
    add_linear(ws, x + "up_proj", I, H, layout, uint32_t(41 + 3 * e), false);
    add_linear(ws, x + "down_proj", H, I, layout, uint32_t(42 + 3 * e), false);
  }
  add_linear(ws, p + "shared_expert.gate_proj", I, H, layout, 60, false);
  add_linear(ws, p + "shared_expert.up_proj", I, H, layout, 61, false);
  add_linear(ws, p + "shared_expert.down_proj", H, I, layout, 62, false);
  add_f32(ws, p + "shared_expert_gate.weight", {1, H}, 63);
  MoeRouting r;
  r.n_experts = E;
  r.top_k = 2;
  r.norm_topk_prob = true;
  const MoeShape shape{H, I, I};
  MoeNames names;
  names.shared = "shared_expert";
  names.shared_gate = "shared_expert_gate";
  // What every rank holds whole: the router and the shared expert's gate.
  const uint64_t replicated = uint64_t(E * H + H) * sizeof(float);
  for (int world_size : {2, 4})
    for (int64_t rows : {int64_t(1), int64_t(4), int64_t(20)}) {
      const std::vector<float> x = random_values(size_t(rows * H), 37, 1.0f);
      std::vector<float> want(size_t(rows * H));
      uint64_t whole_bytes = 0;
      {
        ThreadPool pool(1);
        Workspace w;
        ForwardContext ctx = layer_context(pool, single_process(), w);
        auto moe = make_moe(ws, p, r, shape, names);
        whole_bytes = moe->weight_bytes_per_token();
        moe->forward(x.data(), rows, want.data(), ctx);
      }
      test::FakeWorld world(world_size);
      std::vector<std::vector<float>> got(static_cast<size_t>(world_size));
      world.run([&](int rank, Communicator& comm) {
        auto moe = make_moe(ws, p, r, shape, names, {rank, world_size});
        // Quantized shards round up to their blocks (Q4 most): within 10 %.
        EXPECT_NEAR(double(moe->weight_bytes_per_token() - replicated) * world_size, double(whole_bytes - replicated),
                    0.1 * double(whole_bytes - replicated));
        ThreadPool pool(1);
        Workspace w;
        CountingCommunicator counting(comm);
        ForwardContext ctx = layer_context(pool, counting, w);
        got[size_t(rank)].resize(size_t(rows * H));
        moe->forward(x.data(), rows, got[size_t(rank)].data(), ctx);
        EXPECT_EQ(counting.all_reduces, 1);
      });
      for (int rk = 0; rk < world_size; ++rk)
        expect_close(got[size_t(rk)], want, tolerance(layout, rows),
                     std::string(layout_name(layout)) + " MoE rows " + std::to_string(rows) + " world " +
                         std::to_string(world_size) + " rank " + std::to_string(rk));
    }
}

// Latent attention with the heads split (q through q_a/q_b, or q_proj):
// the rank's q, kv_b and o_proj parts over the replicated latent cache give
// the whole layer's output after o_proj's one all-reduce.
void check_mla(Layout layout, int64_t q_lora_rank, int world_size) {
  MlaShape s{128, 4, q_lora_rank, 64, 32, 16, 32};
  const int64_t H = s.hidden, QK = s.nope_dim + s.rope_dim, ROW = s.kv_lora_rank + s.rope_dim;
  WeightStore ws;
  const std::string p = "attn.";
  if (q_lora_rank > 0) {
    add_linear(ws, p + "q_a_proj", q_lora_rank, H, layout, 71, false);
    add_f32(ws, p + "q_a_layernorm.weight", {q_lora_rank}, 72, 1.0f);
    add_linear(ws, p + "q_b_proj", s.n_heads * QK, q_lora_rank, layout, 73, false);
  } else {
    add_linear(ws, p + "q_proj", s.n_heads * QK, H, layout, 73, false);
  }
  add_linear(ws, p + "kv_a_proj_with_mqa", ROW, H, layout, 74, false);
  add_f32(ws, p + "kv_a_layernorm.weight", {s.kv_lora_rank}, 75, 1.0f);
  // kv_b stays a float matrix in every model (mla.cpp reads its rows).
  add_linear(ws, p + "kv_b_proj", s.n_heads * (s.nope_dim + s.v_dim), s.kv_lora_rank, Layout::F32, 76, false);
  add_linear(ws, p + "o_proj", H, s.n_heads * s.v_dim, layout, 77, false);
  ModelConfig cfg;
  cfg.rope_theta = 10000;
  cfg.max_position_embeddings = 64;
  auto rope = std::make_shared<const RotaryEmbedding>(cfg, s.rope_dim, RopeStyle::Interleaved);
  const float scale = float(1.0 / std::sqrt(double(QK)));
  const KVCacheShape latent{1, 1, ROW, 0};
  const std::vector<float> h = random_values(size_t(8 * H), 79, 1.0f);
  const std::string what = std::string(layout_name(layout)) + " MLA q_lora " + std::to_string(q_lora_rank) +
                           " world " + std::to_string(world_size);
  std::vector<float> want;
  uint64_t whole_bytes = 0;
  {
    ThreadPool pool(1);
    MlaAttention whole(s, ws, p, 1e-6, rope, scale);
    whole_bytes = whole.weight_bytes();
    want = run_attention(whole, latent, h.data(), H, pool, single_process());
  }
  // What every rank holds whole: the latent's projection and q_a.
  uint64_t replicated = Linear::load(ws, p + "kv_a_proj_with_mqa", H, ROW, false).bytes();
  if (q_lora_rank > 0) replicated += Linear::load(ws, p + "q_a_proj", H, q_lora_rank, false).bytes();
  test::FakeWorld world(world_size);
  std::vector<std::vector<float>> got(static_cast<size_t>(world_size));
  world.run([&](int rank, Communicator& comm) {
    MlaAttention part(s, ws, p, 1e-6, rope, scale, {rank, world_size});
    EXPECT_EQ(part.n_local_heads(), s.n_heads / world_size);
    EXPECT_NEAR(double(part.weight_bytes() - replicated) * world_size, double(whole_bytes - replicated),
                0.1 * double(whole_bytes - replicated))
        << what;
    ThreadPool pool(1);
    CountingCommunicator counting(comm);
    got[size_t(rank)] = run_attention(part, latent, h.data(), H, pool, counting);
    EXPECT_EQ(counting.all_reduces, 4) << what;  // o_proj's, once in each of the 4 steps
  });
  for (int r = 0; r < world_size; ++r)
    expect_close(got[size_t(r)], want, tolerance(layout, 4), what + " rank " + std::to_string(r));
}

TEST_P(TensorParallel, MlaSplitsHeadsOverAReplicatedLatent) {
  check_mla(GetParam(), 64, 2);
  check_mla(GetParam(), 64, 4);
  check_mla(GetParam(), 0, 2);
}

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

TEST(TensorParallelShards, MlaHeadsAndExpertWidthsThatDoNotSplitAreAClearError) {
  WeightStore ws;
  const MlaShape s{64, 3, 0, 32, 16, 16, 16};
  add_linear(ws, "attn.q_proj", 3 * 32, 64, Layout::F32, 1, false);
  add_linear(ws, "attn.kv_a_proj_with_mqa", 48, 64, Layout::F32, 2, false);
  add_f32(ws, "attn.kv_a_layernorm.weight", {32}, 3, 1.0f);
  add_linear(ws, "attn.kv_b_proj", 3 * 32, 32, Layout::F32, 4, false);
  add_linear(ws, "attn.o_proj", 64, 3 * 16, Layout::F32, 5, false);
  try {
    MlaAttention(s, ws, "attn.", 1e-6, nullptr, 1.0f, {0, 2});
    FAIL() << "3 MLA heads split over 2 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 attention heads do not split over 2 ranks"), std::string::npos)
        << e.what();
  }
  // Experts 32 wide in groups of 32: one group cannot feed two ranks.
  WeightStore q;
  add_f32(q, "moe.gate.weight", {2, 64}, 6);
  for (int e = 0; e < 2; ++e) {
    const std::string x = "moe.experts." + std::to_string(e) + ".";
    add_linear(q, x + "gate_proj", 32, 64, Layout::Q8, 7, false);
    add_linear(q, x + "up_proj", 32, 64, Layout::Q8, 8, false);
    add_linear(q, x + "down_proj", 64, 32, Layout::Q8, 9, false);
  }
  MoeRouting r;
  r.n_experts = 2;
  r.top_k = 1;
  try {
    make_moe(q, "moe.", r, {64, 32, 0}, MoeNames{}, {0, 2});
    FAIL() << "32-wide experts split over 2 ranks in groups of 32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the 32 columns of moe.experts.0.down_proj do not split over 2 ranks"),
              std::string::npos)
        << e.what();
  }
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
  check_model("llama", 2, QuantType::Q8);
  check_model("llama", 4, QuantType::Q4);
}

// Every expert split (routing replicated) and, for DeepSeek-V2/V3, latent
// attention's heads split; 4 heads and widths of 16 and up split over 4.
TEST(TensorParallelModels, MoeAndMlaFamiliesOnTwoAndFourRanks) {
  for (const char* family : {"mixtral", "qwen2_moe", "deepseek_moe", "deepseek_v2", "deepseek_v2_lite", "deepseek_v3",
                             "deepseek_v3_grouped"}) {
    check_model(family, 2, std::nullopt);
    check_model(family, 4, std::nullopt);
  }
  check_model("mixtral", 2, QuantType::Q8);  // experts 128 wide: two groups of 32 per rank
}

// The sharding saves memory: a rank of two holds about half of what one
// token reads in DeepSeek-V3 (MLA and MoE) and Qwen2-MoE, the rest being
// the replicated routers, q_a and kv_a projections.
TEST(TensorParallelModels, EachRankHoldsItsShareOfTheWeights) {
  for (const char* family : {"deepseek_v3", "qwen2_moe"}) {
    const std::string dir = test::testdata(std::string("golden/") + family + "/hf").string();
    ThreadPool pool(1);
    auto bytes = [&](const Shard& shard) {
      LoadOptions lo;
      lo.shard = shard;
      return load_model(dir, lo, pool).model->weight_bytes_per_token();
    };
    const double whole = double(bytes({}));
    for (int world : {2, 4})
      for (int r = 0; r < world; ++r) {
        const double part = double(bytes({r, world}));
        EXPECT_LT(part / whole, 1.0 / world + 0.1) << family << " rank " << r << " of " << world;
      }
  }
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
