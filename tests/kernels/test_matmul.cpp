// matmul: every ISA the CPU supports against the scalar double-accumulating
// reference, over odd shapes (both the decode GEMV and the prefill GEMM
// regimes), all weight dtypes, bias / no bias, strided x and y, 1-3 threads.
//
// Error bound checked (per output, u = 2^-24):
//   |y - ref| <= (K/8 + K/512 + 8) * u * (sum_k |x_k * w_k| + |bias|)
// The decode GEMV sums each output in 16 (AVX-512) or 8 (AVX2) lanes, so its
// longest chain of roundings has K/16 or K/8 terms plus the lane reduction:
// this is then a rigorous bound (Higham's gamma_n). The prefill GEMM sums one
// output sequentially over K, whose rigorous worst case is K * u * sum|x w|;
// with data of random signs the error grows like sqrt(K) u, far below the
// bound above (the test prints the worst error / bound it saw, ~0.25-0.45).
// The reference accumulates in double and reads the same F16/BF16 bits, so
// the weight dtype adds no error of its own.
//
// BF16 weights in the GEMM regime are also run with Bf16Gemm::Bf16Dot where
// the CPU has AVX-512 BF16: x is then rounded to BF16 first, so that path is
// checked against the reference on the BF16-rounded x with the same bound
// (vdpbf16ps products are exact; only the f32 additions round).
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/cpu_features.h"
#include "kernel_test_util.h"

namespace rinfer::kernels::cpu::testing {
namespace {

ThreadPool& pool(int n) {
  static std::unique_ptr<ThreadPool> pools[4];
  if (!pools[n]) pools[n] = std::make_unique<ThreadPool>(n);
  return *pools[n];
}

// Pins the BF16 GEMM mode for the scope, then goes back to Auto.
struct Bf16GemmScope {
  explicit Bf16GemmScope(Bf16Gemm m) { set_bf16_gemm(m); }
  ~Bf16GemmScope() { set_bf16_gemm(Bf16Gemm::Auto); }
};

std::vector<float> round_to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  std::vector<float> r(v.size());
  convert_from_f32(DType::BF16, v.data(), b.data(), v.size());
  convert_to_f32(DType::BF16, b.data(), r.data(), v.size());
  return r;
}

struct Case {
  int64_t M, K, N;
  DType dt;
  bool bias;
  int64_t ldx_pad = 0, ldy_pad = 0;
  bool blocked = false;  // BF16 weights in the blocked layout (matmul_bf16_blocked)
};

// Runs one shape for every ISA and thread count; returns the worst |err| / bound.
double check_case(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t ldx = c.K + c.ldx_pad, ldy = c.N + c.ldy_pad;
  auto x = random_floats(rng, size_t(c.M * ldx));
  TypedData w = make_typed(c.dt, random_floats(rng, size_t(c.N * c.K)));
  auto bias = random_floats(rng, size_t(c.N));
  const float* b = c.bias ? bias.data() : nullptr;
  std::vector<uint16_t> wblk;
  if (c.blocked) {
    wblk.resize(size_t(c.N * c.K));
    block_bf16(static_cast<const uint16_t*>(w.data()), c.N, c.K, wblk.data());
  }

  const double rel = (double(c.K) / 8 + double(c.K) / 512 + 8) * std::ldexp(1.0, -24);
  double worst = 0;
  // One pass per (ISA, BF16 GEMM mode); xin is the x the path multiplies by.
  auto check_path = [&](const char* what, const std::vector<float>& xin) {
    std::vector<float> ref(size_t(c.M * ldy), -7.0f);
    reference::matmul(xin.data(), c.M, c.K, ldx, w.data(), c.dt, c.N, b, ref.data(), ldy);
    // the bound's scale: sum |x w| + |bias| per output
    std::vector<double> mag(static_cast<size_t>(c.M * c.N));
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double s = b ? std::fabs(b[n]) : 0.0;
        for (int64_t k = 0; k < c.K; ++k) s += std::fabs(double(xin[m * ldx + k]) * w.values[n * c.K + k]);
        mag[m * c.N + n] = s;
      }
    const Isa isa = active_isa();
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      if (isa == Isa::Scalar && threads != 2) continue;  // the threaded reference itself: once is enough
      std::vector<float> y(size_t(c.M * ldy), -7.0f);  // -7 marks the gaps of a strided y
      if (c.blocked)
        matmul_bf16_blocked(x.data(), c.M, c.K, ldx, wblk.data(), c.N, b, y.data(), ldy, pool(threads));
      else
        matmul(x.data(), c.M, c.K, ldx, w.data(), c.dt, c.N, b, y.data(), ldy, pool(threads));
      for (int64_t m = 0; m < c.M; ++m) {
        for (int64_t n = 0; n < c.N; ++n) {
          const double err = std::fabs(double(y[m * ldy + n]) - ref[m * ldy + n]);
          const double bound = rel * mag[m * c.N + n] + 1e-30;
          worst = std::max(worst, err / bound);
          if (!(err <= bound)) {
            ADD_FAILURE() << isa_name(isa) << " " << what << " " << dt_name(c.dt) << " M=" << c.M << " K=" << c.K
                          << " N=" << c.N << " bias=" << c.bias << " threads=" << threads << " y[" << m << "," << n
                          << "]=" << y[m * ldy + n] << " ref=" << ref[m * ldy + n] << " bound=" << bound;
            return;
          }
        }
        for (int64_t n = c.N; n < ldy; ++n)
          if (y[m * ldy + n] != -7.0f) {
            ADD_FAILURE() << "matmul wrote past N in row " << m;
            return;
          }
      }
      // The split over threads never changes the order of the additions.
      if (first.empty())
        first = y;
      else if (first != y)
        ADD_FAILURE() << isa_name(isa) << " " << what << " " << dt_name(c.dt) << " M=" << c.M << " K=" << c.K
                      << " N=" << c.N << ": result depends on the thread count";
    }
  };
  for (KernelLevel isa : supported_isas()) {
    IsaScope scope(isa);
    {
      Bf16GemmScope mode(Bf16Gemm::F32Fma);
      check_path("fma", x);
    }
    if (c.dt == DType::BF16 && isa == Isa::Avx512 && rinfer::cpu_features().has_avx512_bf16()) {
      Bf16GemmScope mode(Bf16Gemm::Bf16Dot);
      EXPECT_TRUE(bf16_gemm_uses_dot());
      check_path("dot", std::string(matmul_path(c.M, c.dt)) == "bf16-dot-gemm" ? round_to_bf16(x) : x);
    }
    if (::testing::Test::HasFailure()) break;
  }
  return worst;
}

TEST(Matmul, OddShapesAllDtypesAllIsas) {
  const int64_t Ks[] = {1, 3, 17, 63, 100, 4097};
  const int64_t Ns[] = {1, 5, 31, 1000};
  const int64_t Ms[] = {1, 2, 7, 8, 13, 33, 130};
  uint32_t seed = 1;
  double worst = 0;
  int cases = 0;
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t K : Ks)
      for (int64_t N : Ns)
        for (int64_t M : Ms) {
          // keep the double-precision reference affordable (also under ASan)
          if (M * N * K > 6'000'000) continue;
          for (bool bias : {false, true}) {
            if (M * N * K > 600'000 && bias != ((K + N + M) % 2 == 0)) continue;  // one of the two for big ones
            worst = std::max(worst, check_case({M, K, N, dt, bias}, seed++));
            ++cases;
            if (::testing::Test::HasFailure()) return;
          }
        }
  std::printf("  %d shapes, worst error / bound = %.3g\n", cases, worst);
}

TEST(Matmul, LargeShapes) {
  // the big corners of the grid above, once each
  double worst = 0;
  uint32_t seed = 1000;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    worst = std::max(worst, check_case({7, 4097, 1000, dt, true}, seed++));
    worst = std::max(worst, check_case({130, 4097, 31, dt, false}, seed++));
    worst = std::max(worst, check_case({130, 100, 1000, dt, true}, seed++));
    worst = std::max(worst, check_case({33, 1000, 257, dt, false}, seed++));
    worst = std::max(worst, check_case({8, 9000, 37, dt, true}, seed++));  // GEMV with x cut in k-blocks
    worst = std::max(worst, check_case({3, 30000, 9, dt, false}, seed++));
  }
  std::printf("  worst error / bound = %.3g\n", worst);
}

TEST(Matmul, StridedInputAndOutput) {
  uint32_t seed = 2000;
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t M : {1, 3, 4, 5, 9, 40})
      for (int64_t K : {17, 70})
        check_case({M, K, 29, dt, true, /*ldx_pad=*/13, /*ldy_pad=*/7}, seed++);
}

TEST(Matmul, DecodeShapesRoundedBound) {
  // Model-like shapes: the brief's ~1e-5 relative-to-magnitude requirement.
  uint32_t seed = 3000;
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t M : {1, 4, 16}) {
      Case c{M, 2048, 256, dt, false};
      std::mt19937 rng(seed++);
      auto x = random_floats(rng, size_t(M * c.K));
      TypedData w = make_typed(dt, random_floats(rng, size_t(c.N * c.K)));
      Bf16GemmScope mode(Bf16Gemm::F32Fma);  // the f32-activation path; the BF16-dot one is bounded above
      std::vector<float> ref(static_cast<size_t>(M * c.N)), y(size_t(M * c.N));
      reference::matmul(x.data(), M, c.K, c.K, w.data(), dt, c.N, nullptr, ref.data(), c.N);
      matmul(x.data(), M, c.K, c.K, w.data(), dt, c.N, nullptr, y.data(), c.N, pool(2));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < c.N; ++n) {
          double mag = 0;
          for (int64_t k = 0; k < c.K; ++k) mag += std::fabs(double(x[m * c.K + k]) * w.values[n * c.K + k]);
          ASSERT_LE(std::fabs(double(y[m * c.N + n]) - ref[m * c.N + n]), 1e-5 * mag + 1e-6);
        }
    }
}

// The blocked BF16 layout: every ISA (AVX-512 reads it directly, GEMV and
// GEMM; AVX2 its GEMV, M <= 8; AVX2 GEMM and scalar unblock chunks), both
// BF16 GEMM modes, against the
// same reference on the row-major matrix.
TEST(Matmul, BlockedBf16AllIsas) {
  uint32_t seed = 4000;
  double worst = 0;
  int cases = 0;
  for (int64_t K : {32, 96, 4096})
    for (int64_t N : {8, 40, 1000})
      // 9 to 64 rows: the small-M dot kernel on the blocked layout (3-row
      // tiles: every tail), above: the packed GEMM.
      for (int64_t M : {1, 2, 3, 4, 7, 8, 9, 13, 16, 17, 33, 64, 65, 130}) {
        if (M * N * K > 6'000'000) continue;
        Case c{M, K, N, DType::BF16, (M + N) % 2 == 0};
        c.blocked = true;
        if (M == 3 || M == 13) c.ldx_pad = 5, c.ldy_pad = 3;
        worst = std::max(worst, check_case(c, seed++));
        ++cases;
        if (::testing::Test::HasFailure()) return;
      }
  std::printf("  %d shapes, worst error / bound = %.3g\n", cases, worst);
}

TEST(Matmul, BlockedBf16PathNames) {
  for (KernelLevel isa : supported_isas()) {
    IsaScope scope(isa);
    Bf16GemmScope mode(Bf16Gemm::Bf16Dot);
    const bool dot = bf16_gemm_uses_dot() && active_isa() == Isa::Avx512;
    if (active_isa() != Isa::Scalar) {
      EXPECT_STREQ(matmul_bf16_blocked_path(8), "bf16-gemv-blocked");
    }
    EXPECT_STREQ(matmul_bf16_blocked_path(16), dot ? "bf16-dot-blocked" : matmul_path(16, DType::BF16));
    EXPECT_STREQ(matmul_bf16_blocked_path(64), dot ? "bf16-dot-blocked" : matmul_path(64, DType::BF16));
    EXPECT_STREQ(matmul_bf16_blocked_path(65), matmul_path(65, DType::BF16));
  }
}

TEST(Matmul, BlockedLayoutRoundTrip) {
  const int64_t N = 24, K = 96;
  std::vector<uint16_t> rows(size_t(N * K)), blk(rows.size()), back(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint16_t(i * 7 + 3);
  block_bf16(rows.data(), N, K, blk.data());
  // W[n, k] at ((n / 8) * (K / 32) + k / 32) * 256 + (n % 8) * 32 + k % 32
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      ASSERT_EQ(blk[size_t(((n / 8) * (K / 32) + k / 32) * 256 + (n % 8) * 32 + k % 32)], rows[size_t(n * K + k)]);
  unblock_bf16(blk.data(), N, K, back.data());
  EXPECT_EQ(back, rows);
  EXPECT_FALSE(bf16_blockable(12, 64));
  EXPECT_FALSE(bf16_blockable(16, 48));
  EXPECT_THROW(block_bf16(rows.data(), 12, 64, blk.data()), std::exception);
}

TEST(Matmul, ZeroK) {
  std::vector<float> bias = {1, 2, 3};
  std::vector<float> y(6, -1);
  std::vector<float> w;  // K = 0: no weights
  float x = 0;
  for (KernelLevel isa : supported_isas()) {
    IsaScope scope(isa);
    matmul(&x, 2, 0, 0, w.data(), DType::F32, 3, bias.data(), y.data(), 3, pool(2));
    EXPECT_EQ(y, (std::vector<float>{1, 2, 3, 1, 2, 3}));
  }
}

TEST(Matmul, ForceIsaNeverExceedsTheCpu) {
  force_isa(Isa::Avx512);
  EXPECT_LE(int(active_isa()), int(best_isa()));
  force_isa(best_isa());
}

// The blocked BF16 GEMV under each decode prefetch profile (perf/decode_tuning.h),
// one, two or four weight streams per thread: the same bits at each ISA
// level (Matmul.BlockedBf16AllIsas holds them against the reference under
// the machine's own profile). N = 200 is 25 blocks: two and four streams
// leave blocks over on 1 and on 2 threads.
TEST(Matmul, BlockedBf16DecodePrefetchProfilesGiveTheSameBits) {
  std::mt19937 rng(77);
  const int64_t K = 4096, N = 200;
  const auto w = make_typed(DType::BF16, random_floats(rng, size_t(N * K)));
  std::vector<uint16_t> wblk(size_t(N * K));
  block_bf16(static_cast<const uint16_t*>(w.data()), N, K, wblk.data());
  for (int64_t M : {1, 3}) {
    const auto x = random_floats(rng, size_t(M * K));
    for (KernelLevel isa : supported_isas()) {
      IsaScope iscope(isa);
      std::vector<float> want;
      for (const char* profile : {"default", "zen5", "icelake", "icelake:line_t0=0", "zen5:bf16_streams=1", "default:bf16_streams=2",
                                  "zen5:bf16_streams=2", "default:bf16_streams=3", "zen5:bf16_streams=4"})
        for (int threads : {1, 2}) {
          PrefetchScope scope(profile);
          std::vector<float> y(size_t(M * N), -7.0f);
          matmul_bf16_blocked(x.data(), M, K, K, wblk.data(), N, nullptr, y.data(), N, pool(threads));
          if (want.empty())
            want = y;
          else
            ASSERT_EQ(y, want) << isa_name(isa) << " M=" << M << " " << profile << " threads=" << threads;
        }
    }
  }
}

// matmul_bf16_blocked_multi (one x, several blocked BF16 weights) gives each
// weight exactly the result of its own matmul_bf16_blocked call: at decode
// (M <= 8, the GEMV's largest: the blocks of all matrices one sequence;
// with two to four streams per thread the blocks worked side by side can
// straddle matrices,
// N = 96 + 8 + 24 is 12 + 1 + 3 blocks) and at prefill (one task grid; M =
// 40 and 150 take the small-M and the general blocking), in both BF16 GEMM
// modes.
TEST(Matmul, BlockedBf16MultiEqualsOneCallEach) {
  std::mt19937 rng(1500);
  const int64_t K = 1088, ldx = K + 3;
  const int64_t Ns[3] = {96, 8, 24};
  std::vector<std::vector<uint16_t>> ws;
  std::vector<std::vector<float>> biases;
  for (int i = 0; i < 3; ++i) {
    const auto w = make_typed(DType::BF16, random_floats(rng, size_t(Ns[i] * K)));
    ws.emplace_back(size_t(Ns[i] * K));
    block_bf16(static_cast<const uint16_t*>(w.data()), Ns[i], K, ws.back().data());
    biases.push_back(random_floats(rng, size_t(Ns[i])));
  }
  for (int64_t M : {1, 3, 8, 9, 40, 150}) {
    const auto x = random_floats(rng, size_t(M * ldx));
    for (KernelLevel isa : supported_isas())
      for (Bf16Gemm mode : {Bf16Gemm::F32Fma, Bf16Gemm::Bf16Dot})
        for (const char* profile :
             {"default:bf16_streams=2", "default:bf16_streams=1", "default:bf16_streams=3", "default:bf16_streams=4"})
          for (int threads : {1, 2}) {
            IsaScope scope(isa);
            Bf16GemmScope gemm_mode(mode);
            PrefetchScope pscope(profile);
            std::vector<std::vector<float>> want(3), got(3);
            Bf16BlockedOut outs[3];
            for (int i = 0; i < 3; ++i) {
              const int64_t ldy = Ns[i] + 5;
              want[i].assign(size_t(M * ldy), 0.0f);
              got[i].assign(size_t(M * ldy), 0.0f);
              const float* b = i == 1 ? nullptr : biases[size_t(i)].data();
              matmul_bf16_blocked(x.data(), M, K, ldx, ws[size_t(i)].data(), Ns[i], b, want[i].data(), ldy,
                                  pool(threads));
              outs[i] = {ws[size_t(i)].data(), Ns[i], b, got[i].data(), ldy};
            }
            matmul_bf16_blocked_multi(x.data(), M, K, ldx, outs, 3, pool(threads));
            for (int i = 0; i < 3; ++i)
              ASSERT_EQ(got[i], want[i]) << isa_name(isa) << " M=" << M << " mode=" << int(mode) << " " << profile
                                         << " threads=" << threads << " weight " << i;
          }
  }
}

}  // namespace
}  // namespace rinfer::kernels::cpu::testing
