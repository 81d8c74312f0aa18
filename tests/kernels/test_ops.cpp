// Element-wise ops, rope, softmax and paged attention: every ISA the CPU
// supports against the scalar reference. Bounds are stated per test, as
// multiples of the f32 unit roundoff u = 2^-24 relative to the magnitudes
// involved.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/cpu_features.h"
#include "kernels/cpu/latent_attention.h"
#include "kernel_test_util.h"

namespace rinfer::kernels::cpu::testing {
namespace {

const double u = std::ldexp(1.0, -24);
// q and p as hi + lo BF16 (Bf16Attention::Bf16Dot): |x - hi - lo| <= 2^-18 |x|.
const double kSplitU = std::ldexp(1.0, -18);

TEST(Rmsnorm, MatchesReference) {
  // |y - ref| <= 8u * |ref| + 1e-30: the sum of squares is in double in every
  // implementation, so only the last products round differently.
  std::mt19937 rng(1);
  for (int64_t n : {1, 3, 17, 100, 2048, 4097}) {
    auto x = random_floats(rng, size_t(n), -3, 3);
    auto w = random_floats(rng, size_t(n), 0.5f, 1.5f);
    std::vector<float> ref(static_cast<size_t>(n));
    reference::rmsnorm(x.data(), w.data(), n, 1e-5f, ref.data());
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> y(static_cast<size_t>(n));
      rmsnorm(x.data(), w.data(), n, 1e-5f, y.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(std::fabs(y[i] - ref[i]), 8 * u * std::fabs(ref[i]) + 1e-30) << isa_name(isa) << " n=" << n;
      // in place
      std::vector<float> z = x;
      rmsnorm(z.data(), w.data(), n, 1e-5f, z.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(z[i], y[i]) << isa_name(isa) << " in place, n=" << n;
    }
  }
}

TEST(Rope, BothStylesPartialRotationAndMscale) {
  // cos/sin come from the same libm calls as the reference, so each output is
  // the same two products and one sum: |y - ref| <= 4u * (|x0| + |x1|) * mscale.
  std::mt19937 rng(2);
  struct Shape {
    int n_heads, head_dim, rot_dim;
  };
  const Shape shapes[] = {{1, 8, 8}, {3, 8, 4}, {2, 64, 64}, {5, 64, 32}, {4, 80, 20},
                          {2, 128, 128}, {3, 128, 64}, {1, 256, 256}, {2, 96, 2}, {1, 576, 512}};
  for (RopeStyle style : {RopeStyle::RotateHalf, RopeStyle::Interleaved})
    for (const Shape& s : shapes)
      for (int64_t pos : {0, 1, 17, 4095, 100000})
        for (float mscale : {1.0f, 1.25f}) {
          std::vector<float> inv(static_cast<size_t>(s.rot_dim / 2));
          for (int i = 0; i < s.rot_dim / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / s.rot_dim);
          auto x = random_floats(rng, size_t(s.n_heads * s.head_dim), -2, 2);
          std::vector<float> ref = x;
          reference::rope(ref.data(), s.n_heads, s.head_dim, s.rot_dim, pos, inv.data(), style, mscale);
          for (KernelLevel isa : supported_isas()) {
            IsaScope scope(isa);
            std::vector<float> y = x;
            rope(y.data(), s.n_heads, s.head_dim, s.rot_dim, pos, inv.data(), style, mscale);
            for (int h = 0; h < s.n_heads; ++h)
              for (int d = 0; d < s.head_dim; ++d) {
                const int64_t i = int64_t(h) * s.head_dim + d;
                if (d >= s.rot_dim) {
                  ASSERT_EQ(y[i], x[i]) << "rope touched an unrotated value";
                  continue;
                }
                // partner of d in its pair
                int half = s.rot_dim / 2;
                int p = style == RopeStyle::RotateHalf ? (d < half ? d + half : d - half) : (d ^ 1);
                double bound = 4 * u * (std::fabs(x[i]) + std::fabs(x[h * s.head_dim + p])) * mscale + 1e-30;
                ASSERT_LE(std::fabs(y[i] - ref[i]), bound)
                    << isa_name(isa) << " style=" << int(style) << " hd=" << s.head_dim << " rot=" << s.rot_dim
                    << " pos=" << pos << " d=" << d;
              }
            // In two steps (the angles once, as a forward pass takes them for
            // all its layers): rope's bits.
            std::vector<float> cs(static_cast<size_t>(s.rot_dim), -1.0f), y2 = x;
            rope_angles(pos, inv.data(), s.rot_dim, mscale, cs.data());
            rope_with_angles(y2.data(), s.n_heads, s.head_dim, s.rot_dim, cs.data(), style);
            ASSERT_EQ(std::memcmp(y2.data(), y.data(), y.size() * sizeof(float)), 0)
                << isa_name(isa) << " style=" << int(style) << " rot=" << s.rot_dim << " pos=" << pos;
          }
        }
}

TEST(SiluMul, MatchesReferenceIncludingExtremes) {
  // exp is a polynomial approximation (<= 2-3 ulp), then one add, one divide
  // and one multiply: |y - ref| <= 8u * |ref| + 1e-38.
  std::mt19937 rng(3);
  for (int64_t n : {1, 3, 16, 17, 100, 5632, 4097}) {
    auto g = random_floats(rng, size_t(n), -20, 20);
    auto up = random_floats(rng, size_t(n), -3, 3);
    const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 88.8f, -88.8f, 100.0f, -100.0f,
                              103.0f, -103.0f, 200.0f, -200.0f, 1e30f, -1e30f};
    for (size_t i = 0; i < std::size(specials) && i < size_t(n); ++i) g[i * 7 % n] = specials[i];
    std::vector<float> ref(static_cast<size_t>(n));
    reference::silu_mul(g.data(), up.data(), ref.data(), n);
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> y(static_cast<size_t>(n));
      silu_mul(g.data(), up.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(std::fabs(y[i] - ref[i]), 8 * u * std::fabs(ref[i]) + 1e-38)
            << isa_name(isa) << " gate=" << g[i] << " up=" << up[i] << " y=" << y[i] << " ref=" << ref[i];
      // out aliasing gate
      std::vector<float> a = g;
      silu_mul(a.data(), up.data(), a.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], y[i]);
    }
  }
}

TEST(AddInplace, Exact) {
  std::mt19937 rng(4);
  for (int64_t n : {1, 7, 8, 31, 32, 33, 1000}) {
    auto y0 = random_floats(rng, size_t(n)), x = random_floats(rng, size_t(n));
    std::vector<float> ref = y0;
    reference::add_inplace(ref.data(), x.data(), n);
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> y = y0;
      add_inplace(y.data(), x.data(), n);
      ASSERT_EQ(y, ref) << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(Axpy, Exact) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 512, 1000}) {
    auto y0 = random_floats(rng, size_t(n)), x = random_floats(rng, size_t(n));
    std::vector<float> ref = y0;
    reference::axpy(ref.data(), 0.37f, x.data(), n);
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> y = y0;
      axpy(y.data(), 0.37f, x.data(), n);
      ASSERT_EQ(y, ref) << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(Softmax, MatchesReference) {
  // |y - ref| <= 8u * ref + 1e-38 (exp <= 3 ulp, sum in double, one multiply)
  std::mt19937 rng(5);
  for (int64_t n : {1, 2, 7, 16, 17, 100, 1000, 32000})
    for (float spread : {1.0f, 30.0f, 1000.0f}) {
      auto x = random_floats(rng, size_t(n), -spread, spread);
      if (n > 3) x[n / 2] = -INFINITY;  // a masked-out position
      for (auto& v : x) v += 5000.0f * (spread == 1000.0f);  // large offset: needs the max shift
      std::vector<float> ref = x;
      reference::softmax(ref.data(), n);
      for (KernelLevel isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<float> y = x;
        softmax(y.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_LE(std::fabs(y[i] - ref[i]), 8 * u * ref[i] + 1e-38)
              << isa_name(isa) << " n=" << n << " i=" << i << " y=" << y[i] << " ref=" << ref[i];
      }
    }
}

TEST(SoftmaxTempered, IsSoftmaxOfTheShiftedDividedLogits) {
  // The max, the subtraction and the division are exact IEEE in every
  // implementation, so each level's result is its own softmax of (logits -
  // max) / T, bit for bit; a tiny temperature does not overflow.
  std::mt19937 rng(9);
  for (int64_t n : {1, 7, 16, 17, 1000, 151936})
    for (float temp : {1e-30f, 0.3f, 1.0f, 1.7f}) {
      auto x = random_floats(rng, size_t(n), -20, 20);
      if (n > 3) x[n / 3] = -INFINITY;
      const float mx = *std::max_element(x.begin(), x.end());
      for (KernelLevel isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), 7.0f);
        for (int64_t i = 0; i < n; ++i) want[size_t(i)] = (x[size_t(i)] - mx) / temp;
        softmax(want.data(), n);
        softmax_tempered(x.data(), n, temp, got.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[size_t(i)], want[size_t(i)]) << isa_name(isa) << " n=" << n << " T=" << temp << " i=" << i;
        if (temp < 1e-20f) {
          ASSERT_EQ(got[size_t(std::max_element(x.begin(), x.end()) - x.begin())], 1.0f) << isa_name(isa);
        }
      }
    }
}

TEST(Argmax, MatchesReferenceWithTiesNansAndInfinities) {
  // Exact: the first index of the largest value, as reference::argmax's loop.
  std::mt19937 rng(11);
  auto check = [&](const std::vector<float>& x, const char* what) {
    const int64_t n = int64_t(x.size());
    const int64_t ref = reference::argmax(x.data(), n);
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      ASSERT_EQ(argmax(x.data(), n), ref) << isa_name(isa) << " " << what << " n=" << n;
    }
  };
  for (int64_t n : {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 32000, 151936}) {
    auto x = random_floats(rng, size_t(n), -10, 10);
    check(x, "random");
    // The largest value several times: the first one wins, wherever it falls
    // (another lane, another set of lanes, the tail).
    std::uniform_int_distribution<int64_t> pos(0, n - 1);
    for (int rep = 0; rep < 4; ++rep) {
      auto y = x;
      for (int c = 0; c < 3; ++c) y[size_t(pos(rng))] = 20.0f;
      check(y, "ties");
      y[size_t(n - 1)] = 20.0f;
      check(y, "tie at the end");
    }
    auto z = x;  // NaNs never win
    for (int c = 0; c < 5; ++c) z[size_t(pos(rng))] = NAN;
    check(z, "nans");
    z[0] = NAN;
    check(z, "nan first");
    std::vector<float> inf(size_t(n), -INFINITY);
    check(inf, "all -inf");
    if (n > 1) inf[size_t(n - 1)] = -1e30f;
    check(inf, "-inf but the last");
    std::vector<float> nan_inf(size_t(n), NAN);
    nan_inf[0] = -INFINITY;
    check(nan_inf, "-inf then nans");
    std::vector<float> same(size_t(n), 1.5f);
    check(same, "all equal");
    auto w = x;  // +inf beats everything; two of them: the first
    w[size_t(pos(rng))] = INFINITY;
    w[size_t(pos(rng))] = INFINITY;
    check(w, "+inf");
  }
}

// ---------------------------------------------------------------- paged attention
struct AttnCase {
  int head_dim, n_kv_heads, block_size;
  int64_t n_ctx;
  DType dt;
  float alibi;
  float q_scale;
};

void check_attention(const AttnCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n_blocks_used = (c.n_ctx + c.block_size - 1) / c.block_size;
  const int64_t pool_blocks = n_blocks_used + 3;  // some blocks belong to nobody
  const int64_t per_block = int64_t(c.block_size) * c.n_kv_heads * c.head_dim;
  TypedData k = make_typed(c.dt, random_floats(rng, size_t(pool_blocks * per_block)));
  TypedData v = make_typed(c.dt, random_floats(rng, size_t(pool_blocks * per_block)));
  std::vector<int32_t> order(static_cast<size_t>(pool_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> table(order.begin(), order.begin() + n_blocks_used);
  PagedKV kv;
  kv.k = k.data();
  kv.v = v.data();
  kv.dtype = c.dt;
  kv.block_size = c.block_size;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  kv.n_blocks = pool_blocks;
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  for (int kv_head = 0; kv_head < c.n_kv_heads; ++kv_head) {
    auto q = random_floats(rng, size_t(c.head_dim), -c.q_scale, c.q_scale);
    std::vector<float> ref(static_cast<size_t>(c.head_dim)), scratch(size_t(c.n_ctx));
    reference::attention_head(q.data(), kv, kv_head, table.data(), c.n_ctx, scale, c.alibi, ref.data(),
                              scratch.data());
    // Bound: an error e in a score changes the output by at most e * max|V|
    // (|V| <= 1 here); scores carry (head_dim/8 + 8) u * scale * sum|q k| from
    // the dot, the softmax ~8u relative, the V sum (n_ctx/2 + 4) u.
    double qk = 0;
    for (int d = 0; d < c.head_dim; ++d) qk += std::fabs(q[d]);
    const double score_err = (c.head_dim / 8.0 + 8) * u * scale * qk + 4 * u * std::fabs(c.alibi) * c.n_ctx;
    const double bound = 2 * score_err + 16 * u + (c.n_ctx / 2.0 + 4) * u;
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      // BF16 dot products (Bf16Attention in ops.h): q as hi + lo moves a score
      // by at most 2^-18 scale sum|q| (|K| <= 1), which moves the output by
      // twice that (|V| <= 1); p as hi + lo moves it by at most 2^-18 sum p
      // |V| <= 2^-18; each lane sums the hi and the lo products of n_ctx / 2
      // pairs of keys: n_ctx / 2 more roundings than the f32 path's V sum.
      const double bf16_term = 2 * kSplitU * scale * qk + kSplitU + c.n_ctx / 2.0 * u;
      const double bound_isa = bound + (attention_uses_bf16_dot(c.dt, c.head_dim) ? bf16_term : 0);
      std::vector<float> out(size_t(c.head_dim), 123.0f), s2(size_t(c.n_ctx));
      attention_head(q.data(), kv, kv_head, table.data(), c.n_ctx, scale, c.alibi, out.data(), s2.data());
      for (int d = 0; d < c.head_dim; ++d)
        ASSERT_LE(std::fabs(out[d] - ref[d]), bound_isa)
            << isa_name(isa) << " " << dt_name(c.dt) << " hd=" << c.head_dim << " kvh=" << kv_head << "/"
            << c.n_kv_heads << " bs=" << c.block_size << " n_ctx=" << c.n_ctx << " alibi=" << c.alibi << " d=" << d;
    }
    // attention_rows: several query rows sharing this K/V head, each with its
    // own context length (prompt tokens: causal) and slope; each row must be
    // attention_head's result within the same bound. Eight rows take the row
    // path at the AVX-512 level (neighbours of one length, rows 0-1 and 3-4,
    // the two-rows-at-once kernels) and one lane tile at the AVX2 level; 45
    // rows (a prompt's tokens x a group's heads: 7 heads per length, and some
    // empty rows) take the rows-in-lanes path in tiles of 16, 16 and 13 (the
    // first two as a pair; at the AVX2 level five tiles of 8 and the last 5
    // rows on the row path, rows 40-41 a pair); 140 rows below take it in two
    // calls. 4 rows take the row path at every level.
    auto check_rows = [&](const std::vector<int64_t>& lens) {
      const int R = int(lens.size());
      std::vector<std::vector<float>> qs, refs;
      std::vector<double> bounds, bf16_terms;
      for (int r = 0; r < R; ++r) {
        qs.push_back(random_floats(rng, size_t(c.head_dim), -c.q_scale, c.q_scale));
        const float slope = c.alibi * float(r % 8 + 1);
        std::vector<float> rr(static_cast<size_t>(c.head_dim)), sc(size_t(c.n_ctx) + 1);
        reference::attention_head(qs[r].data(), kv, kv_head, table.data(), lens[r], scale, slope, rr.data(), sc.data());
        refs.push_back(rr);
        double qa = 0;
        for (int d = 0; d < c.head_dim; ++d) qa += std::fabs(qs[r][d]);
        const double se = (c.head_dim / 8.0 + 8) * u * scale * qa + 4 * u * std::fabs(slope) * c.n_ctx;
        bounds.push_back(2 * se + 16 * u + (c.n_ctx / 2.0 + 4) * u);
        bf16_terms.push_back(2 * kSplitU * scale * qa + kSplitU + c.n_ctx / 2.0 * u);  // as for attention_head above
      }
      for (KernelLevel isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<std::vector<float>> outs(R, std::vector<float>(size_t(c.head_dim), 123.0f));
        std::vector<AttnRow> rows;
        for (int r = 0; r < R; ++r) rows.push_back({qs[r].data(), outs[r].data(), lens[r], c.alibi * float(r % 8 + 1)});
        attention_rows(rows.data(), R, kv, kv_head, table.data(), scale);
        // Fewer than 12 rows take the row path (BF16 dot products where
        // attention_uses_bf16_dot); more, rows in lanes (f32).
        const bool dot = R < 12 && attention_uses_bf16_dot(c.dt, c.head_dim);
        for (int r = 0; r < R; ++r)
          for (int d = 0; d < c.head_dim; ++d)
            ASSERT_LE(std::fabs(outs[r][d] - refs[r][d]), bounds[r] + (dot ? bf16_terms[r] : 0.0))
                << "attention_rows " << isa_name(isa) << " " << dt_name(c.dt) << " hd=" << c.head_dim << " kvh="
                << kv_head << " bs=" << c.block_size << " rows " << R << " row " << r << " n_ctx=" << lens[r]
                << " d=" << d;
      }
    };
    check_rows({c.n_ctx, c.n_ctx, std::max<int64_t>(0, c.n_ctx - 1), c.n_ctx / 2, c.n_ctx / 2, 1, 0, c.n_ctx});
    if (::testing::Test::HasFatalFailure()) return;
    // Decode: one token's GQA group of heads, all of one length (7: score
    // passes of 3 + 2 + 2 rows, value passes of 4 + 3; 6: 3 + 3 and 4 + 2),
    // and runs of 5 and 3 rows of two lengths (scores 3 + 2 + 3).
    check_rows(std::vector<int64_t>(7, c.n_ctx));
    if (::testing::Test::HasFatalFailure()) return;
    check_rows(std::vector<int64_t>(6, c.n_ctx));
    if (::testing::Test::HasFatalFailure()) return;
    check_rows({c.n_ctx, c.n_ctx, std::max<int64_t>(0, c.n_ctx - 2), c.n_ctx});
    if (::testing::Test::HasFatalFailure()) return;
    const int64_t shorter = std::max<int64_t>(0, c.n_ctx - 3);
    check_rows({c.n_ctx, c.n_ctx, c.n_ctx, c.n_ctx, c.n_ctx, shorter, shorter, shorter});
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<int64_t> prompt;
    for (int r = 0; r < 45; ++r) prompt.push_back(r >= 42 ? int64_t(r == 44) : std::max<int64_t>(0, c.n_ctx - r / 7));
    check_rows(prompt);
    if (::testing::Test::HasFatalFailure()) return;
    // Lane tiles go in pairs that run to the longer context of the two: a
    // pair of a full tile and a tile of empty rows.
    std::vector<int64_t> half_empty(32, 0);
    std::fill_n(half_empty.begin(), 16, c.n_ctx);
    check_rows(half_empty);
    if (::testing::Test::HasFatalFailure()) return;
    // 140 rows: more than one call's worth of lane tiles (128 rows), the
    // last 12 rows all empty (a tile with no positions at all).
    if (c.n_ctx <= 17) {
      std::vector<int64_t> many;
      for (int r = 0; r < 140; ++r) many.push_back(r >= 128 ? 0 : std::max<int64_t>(1, c.n_ctx - r % 5));
      check_rows(many);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// BF16 caches run both decode paths: f32 FMAs and BF16 dot products.
struct Bf16AttentionScope {
  explicit Bf16AttentionScope(Bf16Attention m) { set_bf16_attention(m); }
  ~Bf16AttentionScope() { set_bf16_attention(Bf16Attention::Auto); }
};

TEST(Attention, PagedAllKvDtypes) {
  uint32_t seed = 100;
  for (Bf16Attention mode : {Bf16Attention::F32, Bf16Attention::Bf16Dot}) {
    Bf16AttentionScope scope(mode);
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (int hd : {8, 16, 24, 32, 64, 80, 96, 128, 200, 256})
        for (int64_t n_ctx : {1, 2, 5, 15, 16, 17, 100, 300}) {
          if (mode == Bf16Attention::Bf16Dot && dt != DType::BF16) continue;
          const int kvh = hd <= 24 ? 3 : hd == 64 ? 2 : 1;
          check_attention({hd, kvh, 16, n_ctx, dt, 0.0f, 1.0f}, seed++);
          if (::testing::Test::HasFailure()) return;
        }
  }
}

TEST(Attention, AlibiOddBlockSizesAndPeakedScores) {
  uint32_t seed = 500;
  for (Bf16Attention mode : {Bf16Attention::F32, Bf16Attention::Bf16Dot}) {
    Bf16AttentionScope scope(mode);
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (int bs : {1, 3, 7, 16, 32})
        for (int64_t n_ctx : {1, 4, 33, 257}) {
          if (mode == Bf16Attention::Bf16Dot && dt != DType::BF16) continue;
          check_attention({8, 2, bs, n_ctx, dt, 0.0625f, 1.0f}, seed++);
          check_attention({64, 1, bs, n_ctx, dt, -0.5f, 1.0f}, seed++);
          check_attention({32, 2, bs, n_ctx, dt, 0.25f, 1.0f}, seed++);
          check_attention({40, 2, bs, n_ctx, dt, 0.0f, 12.0f}, seed++);  // large scores: near one-hot softmax
          check_attention({96, 1, bs, n_ctx, dt, 0.0f, 12.0f}, seed++);
          if (::testing::Test::HasFailure()) return;
        }
  }
}

TEST(Attention, Bf16DotFollowsTheSetting) {
  if (!cpu_features().has_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16 here";
  IsaScope isa(Isa::Avx512);
  {
    Bf16AttentionScope s(Bf16Attention::Bf16Dot);
    EXPECT_TRUE(attention_uses_bf16_dot(DType::BF16, 64));
    EXPECT_TRUE(attention_uses_bf16_dot(DType::BF16, 256));
    EXPECT_FALSE(attention_uses_bf16_dot(DType::BF16, 80));  // not a multiple of 32
    EXPECT_FALSE(attention_uses_bf16_dot(DType::BF16, 288));
    EXPECT_FALSE(attention_uses_bf16_dot(DType::F16, 64));
    EXPECT_FALSE(attention_uses_bf16_dot(DType::F32, 64));
  }
  {
    Bf16AttentionScope s(Bf16Attention::F32);
    EXPECT_FALSE(attention_uses_bf16_dot(DType::BF16, 64));
  }
  IsaScope avx2(Isa::Avx2);
  EXPECT_FALSE(attention_uses_bf16_dot(DType::BF16, 64));
}

TEST(StoreKv, MatchesScalarConversionBitForBit) {
  // every f16 value, random bit patterns (incl. NaN/inf/denormals) and ties
  std::vector<float> vals;
  for (uint32_t h = 0; h < 65536; ++h) vals.push_back(f16_to_f32(uint16_t(h)));
  std::mt19937 rng(7);
  for (int i = 0; i < 65536; ++i) vals.push_back(f32_from_bits(uint32_t(rng())));
  for (uint32_t b : {0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0xff7f8000u, 0x3f800001u, 0x7f800000u, 0x7fc00000u,
                     0xffc00001u, 0x00008000u, 0x38800000u, 0x387fc000u, 0x33000000u, 0x477ff000u, 0x477fefffu})
    vals.push_back(f32_from_bits(b));
  while (vals.size() % (12 * 16)) vals.push_back(0.5f);  // whole blocks of 16 tokens
  PagedKV kv;
  kv.n_kv_heads = 3;
  kv.head_dim = 4;  // 12 values per token
  kv.block_size = 16;
  const int64_t n = int64_t(vals.size()), tokens = n / 12;
  kv.n_blocks = tokens / 16;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const size_t esz = dtype_size(dt);
    std::vector<uint8_t> conv(size_t(n) * esz), want(size_t(n) * esz);
    convert_from_f32(dt, vals.data(), conv.data(), size_t(n));
    // head-major pools: head h of token t is row (h * n_blocks + t / 16) * 16 + t % 16
    for (int64_t t = 0; t < tokens; ++t)
      for (int h = 0; h < 3; ++h)
        std::memcpy(want.data() + ((h * kv.n_blocks + t / 16) * 16 + t % 16) * 4 * esz,
                    conv.data() + (t * 12 + h * 4) * esz, 4 * esz);
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<uint8_t> kc(size_t(n) * esz), vc(size_t(n) * esz);
      kv.k = kc.data();
      kv.v = vc.data();
      kv.dtype = dt;
      for (int64_t t = 0; t < tokens; ++t) store_kv(kv, t, vals.data() + t * 12, vals.data() + t * 12);
      ASSERT_EQ(std::memcmp(kc.data(), want.data(), want.size()), 0) << isa_name(isa) << " " << dt_name(dt);
      ASSERT_EQ(std::memcmp(vc.data(), want.data(), want.size()), 0) << isa_name(isa) << " " << dt_name(dt);
    }
  }
}

// Multi-head latent attention (DeepSeek MLA, absorbed): every ISA against
// a float64 evaluation of the same cache rows, for caches whose blocks are
// scattered and contexts that end inside a block. Bound: the scores' dot
// products (576 terms) and the weighted sums, a few hundred u relative to
// the magnitudes (|q|, |row| <= 1).
TEST(LatentAttention, MatchesDoublePrecision) {
  std::mt19937 rng(21);
  const int L = 64, R = 16, D = L + R, bs = 16;
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (int n_heads : {1, 3, 16})
      for (int64_t n_ctx : {1, 15, 16, 17, 70}) {
        const int64_t n_blocks = (n_ctx + bs - 1) / bs + 2;
        std::vector<uint8_t> cache(size_t(n_blocks * bs * D) * dtype_size(dt));
        PagedKV kv;
        kv.k = cache.data();
        kv.dtype = dt;
        kv.block_size = bs;
        kv.n_kv_heads = 1;
        kv.head_dim = D;
        kv.n_blocks = n_blocks;
        std::vector<int32_t> table;
        for (int64_t b = 0; b < (n_ctx + bs - 1) / bs; ++b) table.push_back(int32_t(n_blocks - 1 - b));  // reversed
        std::vector<std::vector<float>> rows;  // as stored (rounded to dt)
        for (int64_t j = 0; j < n_ctx; ++j) {
          auto r = random_floats(rng, size_t(D));
          const int64_t slot = int64_t(table[size_t(j / bs)]) * bs + j % bs;
          store_latent(kv, slot, r.data());
          std::vector<float> back(static_cast<size_t>(D));
          convert_to_f32(dt, cache.data() + size_t(slot * D) * dtype_size(dt), back.data(), size_t(D));
          rows.push_back(back);
        }
        const auto q = random_floats(rng, size_t(n_heads * D));
        const float scale = 0.125f;
        std::vector<double> want(size_t(n_heads * L), 0.0);
        for (int h = 0; h < n_heads; ++h) {
          std::vector<double> sc(static_cast<size_t>(n_ctx));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < n_ctx; ++j) {
            double d = 0;
            for (int c = 0; c < D; ++c) d += double(q[size_t(h * D + c)]) * rows[size_t(j)][size_t(c)];
            sc[size_t(j)] = d * scale;
            mx = std::max(mx, sc[size_t(j)]);
          }
          for (auto& v : sc) sum += v = std::exp(v - mx);
          for (int64_t j = 0; j < n_ctx; ++j)
            for (int c = 0; c < L; ++c) want[size_t(h * L + c)] += sc[size_t(j)] / sum * rows[size_t(j)][size_t(c)];
        }
        for (KernelLevel isa : supported_isas()) {
          IsaScope scope(isa);
          std::vector<float> out(size_t(n_heads * L), -1.0f);
          std::vector<float> scratch(size_t(latent_attention_scratch(n_heads, n_ctx, D, bs)));
          latent_attention_heads(q.data(), n_heads, kv, table.data(), n_ctx, L, scale, out.data(), scratch.data());
          for (size_t i = 0; i < out.size(); ++i)
            ASSERT_NEAR(out[i], want[i], 512 * u) << isa_name(isa) << " " << dtype_name(dt) << " heads " << n_heads
                                                  << " n_ctx " << n_ctx << " at " << i;
        }
      }
}

}  // namespace
}  // namespace rinfer::kernels::cpu::testing
