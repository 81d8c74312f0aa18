// Quantized weights (Q8 / Q4, per-group scales), W8A8 activations and the
// INT8 KV cache: every ISA the CPU supports against the scalar reference.
//
// Error bounds checked (u = 2^-24, per output y[m, n]):
//  - quantization itself: |dequant(quant(w)) - w| <= s/2 per element (s = the
//    stored scale of its group), plus 2u|w| for the f32 rounding of s * q.
//  - weight-only paths (decode GEMV, AVX2 / no-VNNI dequant GEMM, scalar) vs
//    reference::matmul_q on the same x, accumulated in double:
//      |y - ref| <= (K/8 + 2G + 32) u * (sum_k |x_k| s_g (|q_k| + 2 off) + |bias|)
//    The GEMV sums x * (q + off) in f32 (gs/4 terms per lane and group), scales
//    per group (G terms) and subtracts off * s_g * sum_g(x); the magnitude
//    covers the intermediate sums with the zero-point offset (off = 128 / 8).
//    The dequant GEMM sums K f32 products sequentially (worst case K u, the
//    K/8 reflects random signs, as in test_matmul.cpp).
//  - W8A8 / W4A8 paths vs reference::matmul_q(ActQuant::PerRow or PerGroup),
//    i.e. on the same quantized activations: the int32 group sums are exact, so
//      |y - ref| <= (G + 8) u * (sum_k |sx qx_k| s_g |q_k| + |bias|)
//    (G roundings of the f32 group accumulation, the scale products, bias).
//    And vs the unquantized-activation reference: the activation rounding adds
//    at most sx/2 per element: |y - ref_f32| <= sum_k sx/2 |w_k| + the above.
//  Both decode variants (weight-only and int8-activation GEMV) are run.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/cpu/quant_layout.h"

namespace rinfer::kernels::cpu::testing {
namespace {

constexpr double u = 1.0 / 16777216.0;

ThreadPool& pool(int n) {
  static std::unique_ptr<ThreadPool> pools[4];
  if (!pools[n]) pools[n] = std::make_unique<ThreadPool>(n);
  return *pools[n];
}

// A quantized weight owning its buffers (64-byte aligned).
struct QW {
  std::vector<uint8_t> data_buf, scale_buf, il_buf;
  uint8_t* data = nullptr;
  uint8_t* scales = nullptr;
  QuantizedWeight w;
  QuantizedWeight wi;      // the same values, interleaved (interleave_quant_scales)
  std::vector<float> deq;  // dequantized N x K
};

uint8_t* align64(std::vector<uint8_t>& v, size_t n) {
  v.assign(n + 64, 0xcd);
  return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
}

std::unique_ptr<QW> make_qw(const std::vector<float>& src, int64_t N, int64_t K, int64_t ldw, QuantType t, int64_t gs,
                            DType sdt, int threads = 2) {
  auto q = std::make_unique<QW>();
  q->data = align64(q->data_buf, quant_data_bytes(t, N, K));
  q->scales = align64(q->scale_buf, quant_scale_bytes(N, K, gs, sdt));
  quantize_weights(src.data(), N, K, ldw, t, gs, sdt, q->data, q->scales, pool(threads));
  q->w.type = t;
  q->w.N = N;
  q->w.K = K;
  q->w.group_size = gs;
  q->w.scale_dtype = sdt;
  q->w.data = q->data;
  q->w.scales = q->scales;
  q->deq.resize(size_t(N * K));
  dequantize_weights(q->w, q->deq.data());
  const size_t il_bytes = quant_interleaved_bytes(t, N, K, gs, sdt);
  q->wi = interleave_quant_scales(q->w, align64(q->il_buf, il_bytes));
  if (q->il_buf.back() != 0xcd) ADD_FAILURE() << "interleave_quant_scales wrote past its size";
  return q;
}

float stored_scale(const QuantizedWeight& w, int64_t n, int64_t g) {
  const int64_t idx = ((n / 16) * (w.K / w.group_size) + g) * 16 + n % 16;
  return w.scale_dtype == DType::F16 ? f16_to_f32(static_cast<const uint16_t*>(w.scales)[idx])
                                     : static_cast<const float*>(w.scales)[idx];
}

std::vector<float> random_weights(std::mt19937& rng, int64_t N, int64_t ldw) {
  // rows of different magnitudes, some groups all zero or tiny (subnormal f16 scales)
  auto v = random_floats(rng, size_t(N * ldw));
  for (int64_t n = 0; n < N; ++n) {
    const float mag = std::pow(10.0f, float(int(n % 7) - 3));  // 1e-3 .. 1e3
    for (int64_t k = 0; k < ldw; ++k) v[size_t(n * ldw + k)] *= mag;
  }
  if (N > 2)
    for (int64_t k = 0; k < std::min<int64_t>(ldw, 40); ++k) {
      v[size_t(1 * ldw + k)] = 0.0f;
      v[size_t(2 * ldw + k)] *= 1e-6f;
    }
  return v;
}

TEST(Quant, RoundTripWithinHalfAScaleAndFastEqualsReference) {
  std::mt19937 rng(1);
  int cases = 0;
  for (QuantType t : {QuantType::Q8, QuantType::Q4})
    for (int64_t gs : {32, 64, 128})
      for (DType sdt : {DType::F16, DType::F32})
        for (int64_t N : {1, 3, 16, 37})
          for (int64_t K : {gs, 3 * gs}) {
            const int64_t ldw = K + 5;
            auto src = random_weights(rng, N, ldw);
            auto q = make_qw(src, N, K, ldw, t, gs, sdt, 3);
            // reference, single-threaded: identical bytes
            std::vector<uint8_t> rd(quant_data_bytes(t, N, K)), rs(quant_scale_bytes(N, K, gs, sdt));
            reference::quantize_weights(src.data(), N, K, ldw, t, gs, sdt, rd.data(), rs.data());
            ASSERT_EQ(std::memcmp(rd.data(), q->data, rd.size()), 0) << quant_type_name(t) << " gs=" << gs;
            ASSERT_EQ(std::memcmp(rs.data(), q->scales, rs.size()), 0) << quant_type_name(t) << " gs=" << gs;
            // nothing written past the sizes
            ASSERT_EQ(q->data[rd.size()], 0xcd);
            ASSERT_EQ(q->scales[rs.size()], 0xcd);
            const int qmax = t == QuantType::Q8 ? 127 : 7;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t k = 0; k < K; ++k) {
                const float s = stored_scale(q->w, n, k / gs);
                const float w = src[size_t(n * ldw + k)], d = q->deq[size_t(n * K + k)];
                ASSERT_LE(std::fabs(double(d) - w), 0.5 * s + 2 * u * std::fabs(w))
                    << quant_type_name(t) << " gs=" << gs << " n=" << n << " k=" << k << " s=" << s;
                // the scale is not needlessly large: max|w| / qmax <= s (<= one f16 ulp above)
                ASSERT_LE(std::fabs(double(d)), qmax * double(s) * (1 + 1e-6));
              }
            // padding rows of the last block: scale 0
            for (int64_t n = N; n < quant_padded_rows(N); ++n) ASSERT_EQ(stored_scale(q->w, n, 0), 0.0f);
            // the interleaved copy holds the same values
            std::vector<float> deqi(size_t(N * K));
            dequantize_weights(q->wi, deqi.data());
            ASSERT_EQ(deqi, q->deq) << quant_type_name(t) << " gs=" << gs << " interleaved";
            ++cases;
          }
  std::printf("  %d quantized shapes\n", cases);
}

TEST(Quant, SizesAndRejectedShapes) {
  EXPECT_EQ(quant_data_bytes(QuantType::Q8, 17, 64), size_t(32 * 64));
  EXPECT_EQ(quant_data_bytes(QuantType::Q4, 17, 64), size_t(32 * 32));
  EXPECT_EQ(quant_scale_bytes(17, 256, 128, DType::F16), size_t(32 * 2 * 2));
  EXPECT_EQ(quant_scale_bytes(16, 256, 32, DType::F32), size_t(16 * 8 * 4));
  std::vector<float> w(64 * 4, 1.0f);
  std::vector<uint8_t> d(4096), s(4096);
  EXPECT_THROW(quantize_weights(w.data(), 1, 64, 64, QuantType::Q8, 48, DType::F16, d.data(), s.data(), pool(1)),
               Error);
  EXPECT_THROW(quantize_weights(w.data(), 1, 96, 96, QuantType::Q8, 64, DType::F16, d.data(), s.data(), pool(1)),
               Error);
  EXPECT_THROW(quantize_weights(w.data(), 1, 64, 64, QuantType::Q4, 32, DType::BF16, d.data(), s.data(), pool(1)),
               Error);
  w[5] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_weights(w.data(), 1, 64, 64, QuantType::Q4, 32, DType::F16, d.data(), s.data(), pool(1)),
               Error);
  w[5] = 1e9f;  // scale 1e9/127 overflows f16; F32 scales are fine
  EXPECT_THROW(quantize_weights(w.data(), 1, 64, 64, QuantType::Q8, 32, DType::F16, d.data(), s.data(), pool(1)),
               Error);
  EXPECT_NO_THROW(quantize_weights(w.data(), 1, 64, 64, QuantType::Q8, 32, DType::F32, d.data(), s.data(), pool(1)));
  QuantizedWeight qw;
  qw.N = 1;
  qw.K = 64;
  qw.data = d.data();
  qw.scales = s.data();
  qw.scale_dtype = DType::F32;
  float x[64] = {}, y[2];
  qw.zeros = d.data();
  EXPECT_THROW(matmul_q(x, 1, 64, 64, qw, nullptr, y, 1, pool(1)), Error);  // zero points: not yet
  qw.zeros = nullptr;
  EXPECT_THROW(matmul_q(x, 1, 32, 32, qw, nullptr, y, 1, pool(1)), Error);  // K mismatch
}

// The interleaved layout's bytes where ops.h says: per 16-row block, a
// line of the next groups' scales (2 groups with F16, the second half zero
// in an odd group count's last chunk; 1 with F32), then their data.
TEST(Quant, InterleavedLayoutAsDocumented) {
  std::mt19937 rng(7);
  for (DType sdt : {DType::F16, DType::F32})
    for (QuantType t : {QuantType::Q8, QuantType::Q4})
      for (int64_t G : {1, 2, 3, 4}) {
        const int64_t gs = 64, K = G * gs, N = 20, S = sdt == DType::F16 ? 32 : 64;
        const int64_t D = (t == QuantType::Q8 ? 16 : 8) * gs, per_line = 64 / S;
        const int64_t lines = (G + per_line - 1) / per_line, block = lines * 64 + G * D;
        auto q = make_qw(random_floats(rng, size_t(N * K)), N, K, K, t, gs, sdt);
        ASSERT_EQ(quant_interleaved_bytes(t, N, K, gs, sdt), size_t(2 * block));
        ASSERT_TRUE(q->wi.interleaved);
        ASSERT_EQ(q->wi.scales, nullptr);
        const auto* il = static_cast<const uint8_t*>(q->wi.data);
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t g = 0; g < G; ++g) {
            const int64_t chunk = b * block + (g / per_line) * (64 + per_line * D);
            EXPECT_EQ(std::memcmp(il + chunk + (g % per_line) * S, q->scales + (b * G + g) * S, size_t(S)), 0)
                << "scales b=" << b << " g=" << g;
            EXPECT_EQ(std::memcmp(il + chunk + 64 + (g % per_line) * D, q->data + b * G * D + g * D, size_t(D)), 0)
                << "data b=" << b << " g=" << g;
            if (g == G - 1 && g % per_line == 0 && per_line == 2) {
              for (int64_t i = S; i < 64; ++i) EXPECT_EQ(il[chunk + i], 0) << "padding of the last line";
            }
          }
      }
}

// The decode GEMVs prefetch each data line a fixed distance ahead (one
// prefetchnta per line) and, at the last data line of a group that ends a
// chunk (QuantAddr::chunk_end), one line more. Their targets must reach
// every line of a run of blocks past the first `ahead` bytes: in the
// interleaved layout the scales lines take places in the run that no data
// line's own prefetch covers, and a line never prefetched is read by a
// demand miss (1 in 9 lines of Q4 group 32 before chunk_end,
// docs/performance.md). Lines are walked as the kernels walk them: per
// group, its data lines in order.
TEST(Quant, DecodePrefetchReachesEveryLine) {
  std::mt19937 rng(11);
  for (DType sdt : {DType::F16, DType::F32})
    for (QuantType t : {QuantType::Q8, QuantType::Q4})
      for (int64_t gs : {32, 64, 128})
        for (int64_t G : {3, 4}) {
          const int64_t K = G * gs, N = 48;  // three 16-row blocks, one run
          auto q = make_qw(random_floats(rng, size_t(N * K)), N, K, K, t, gs, sdt);
          for (const QuantizedWeight* w : {&q->w, &q->wi}) {
            const QuantAddr qa = quant_addr(*w);
            const int64_t lines_per_group = (t == QuantType::Q8 ? 16 : 8) * gs / 64;
            const auto* base = w->interleaved ? qa.scales : qa.data;
            const int64_t run = 3 * qa.d_block;
            for (int64_t ahead : {1024, 1536, 1600, 3072}) {
              std::vector<bool> hit(size_t(run / 64 + ahead / 64 + 4), false);
              for (int64_t b = 0; b < 3; ++b)
                for (int64_t g = 0; g < G; ++g)
                  for (int64_t i = 0; i < lines_per_group; ++i) {
                    const int64_t at = qa.group_data(b, g) + 64 * i - base;
                    hit[size_t((at + ahead) / 64)] = true;
                    if (i == lines_per_group - 1 && qa.chunk_end(g, G)) hit[size_t((at + 64 + ahead) / 64)] = true;
                  }
              // Lines that held the separate layout's scales are not in its run.
              for (int64_t line = (ahead + 63) / 64 + 1; line < run / 64; ++line)
                ASSERT_TRUE(hit[size_t(line)]) << quant_type_name(t) << " group " << gs << " " << dtype_name(sdt)
                                               << (w->interleaved ? " interleaved" : " separate") << " G=" << G
                                               << " ahead " << ahead << ": line " << line << " of " << run / 64
                                               << " is never prefetched";
            }
          }
        }
}

TEST(Quant, ActivationQuantizationBitExact) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 64, 100, 257, 4864}) {
    for (int variant = 0; variant < 5; ++variant) {
      auto x = random_floats(rng, size_t(n), -3.0f, 3.0f);
      if (variant == 1) std::fill(x.begin(), x.end(), 0.0f);
      if (variant == 2) x[size_t(n / 2)] = std::numeric_limits<float>::quiet_NaN();
      if (variant == 3) x[0] = -std::numeric_limits<float>::infinity();
      if (variant == 4)
        for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(i % 5 - 2) * 0.5f;  // exact .5 ties after scaling
      std::vector<int8_t> want(static_cast<size_t>(n));
      float want_s;
      reference::quantize_row_i8(x.data(), n, want.data(), &want_s);
      for (KernelLevel isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<int8_t> got(size_t(n) + 1, 99);
        float s;
        quantize_row_i8(x.data(), n, got.data(), &s);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), size_t(n)), 0) << isa_name(isa) << " n=" << n << " v=" << variant;
        ASSERT_EQ(got[size_t(n)], 99);
        ASSERT_EQ(f32_bits(s), f32_bits(want_s));
        if (variant == 0) {
          for (int64_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(x[size_t(i)] - s * got[size_t(i)]), 0.5 * s * (1 + 1e-6));
        }
      }
    }
  }
}

struct MCase {
  int64_t M, K, N;
  QuantType t;
  int64_t gs;
  DType sdt;
  bool bias;
  int64_t ldx_pad = 0, ldy_pad = 0;
};

// Every ISA and 1-3 threads against the reference; returns the worst |err| / bound.
double check_matmul_q(const MCase& c, uint32_t seed, const char** path_seen = nullptr) {
  std::mt19937 rng(seed);
  const int64_t ldx = c.K + c.ldx_pad, ldy = c.N + c.ldy_pad, G = c.K / c.gs;
  auto x = random_floats(rng, size_t(c.M * ldx), -2.0f, 2.0f);
  auto src = random_floats(rng, size_t(c.N * c.K));
  auto q = make_qw(src, c.N, c.K, c.K, c.t, c.gs, c.sdt);
  auto bias = random_floats(rng, size_t(c.N));
  const float* b = c.bias ? bias.data() : nullptr;
  const double off = c.t == QuantType::Q8 ? 128 : 8;

  std::vector<float> ref32(size_t(c.M * ldy)), ref_row(size_t(c.M * ldy)), ref_grp(size_t(c.M * ldy));
  reference::matmul_q(x.data(), c.M, c.K, ldx, q->w, b, ref32.data(), ldy, ActQuant::None);
  reference::matmul_q(x.data(), c.M, c.K, ldx, q->w, b, ref_row.data(), ldy, ActQuant::PerRow);
  reference::matmul_q(x.data(), c.M, c.K, ldx, q->w, b, ref_grp.data(), ldy, ActQuant::PerGroup);
  // magnitudes for the bounds; index 0: per-row activation scale, 1: per group
  std::vector<double> mag32(size_t(c.M * c.N)), mag8[2], act[2];
  for (int i = 0; i < 2; ++i) {
    mag8[i].resize(size_t(c.M * c.N));
    act[i].resize(size_t(c.M * c.N));
  }
  std::vector<int8_t> qx(static_cast<size_t>(c.K)), qg(static_cast<size_t>(c.K));
  std::vector<float> sg(static_cast<size_t>(G));
  for (int64_t m = 0; m < c.M; ++m) {
    float sx;
    reference::quantize_row_i8(x.data() + m * ldx, c.K, qx.data(), &sx);
    for (int64_t g = 0; g < G; ++g)
      reference::quantize_row_i8(x.data() + m * ldx + g * c.gs, c.gs, qg.data() + g * c.gs, &sg[size_t(g)]);
    for (int64_t n = 0; n < c.N; ++n) {
      double s32 = b ? std::fabs(b[n]) : 0.0, s8[2] = {0, 0}, sw[2] = {0, 0};
      for (int64_t k = 0; k < c.K; ++k) {
        const double s = stored_scale(q->w, n, k / c.gs), wq = q->deq[size_t(n * c.K + k)];
        const double qv = s > 0 ? std::fabs(wq) / s : 0;
        s32 += std::fabs(x[size_t(m * ldx + k)]) * s * (qv + 2 * off);
        s8[0] += std::fabs(double(qx[size_t(k)]) * sx) * s * qv;
        s8[1] += std::fabs(double(qg[size_t(k)]) * sg[size_t(k / c.gs)]) * s * qv;
        sw[0] += 0.5 * sx * std::fabs(wq);
        sw[1] += 0.5 * sg[size_t(k / c.gs)] * std::fabs(wq);
      }
      mag32[size_t(m * c.N + n)] = s32;
      for (int i = 0; i < 2; ++i) {
        mag8[i][size_t(m * c.N + n)] = s8[i] + (b ? std::fabs(b[n]) : 0.0);
        act[i][size_t(m * c.N + n)] = sw[i];
      }
    }
  }
  const double rel32 = (double(c.K) / 8 + 2.0 * G + 32) * u, rel8 = (double(G) + 8) * u;

  double worst = 0;
  for (KernelLevel isa : supported_isas())
   for (QuantDecode dm : {QuantDecode::WeightOnly, QuantDecode::Int8Activations}) {
    IsaScope scope(isa);
    set_quant_decode(dm);
    const ActQuant aq = matmul_q_activation_quant(c.M, q->w);
    const bool a8 = aq != ActQuant::None;
    const int ai = aq == ActQuant::PerGroup ? 1 : 0;
    if (path_seen) *path_seen = matmul_q_path(c.M, q->w);
    const auto& ref = aq == ActQuant::PerRow ? ref_row : aq == ActQuant::PerGroup ? ref_grp : ref32;
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      if (isa == Isa::Scalar && threads != 2) continue;
      std::vector<float> y(size_t(c.M * ldy), -7.0f);
      matmul_q(x.data(), c.M, c.K, ldx, q->w, b, y.data(), ldy, pool(threads));
      for (int64_t m = 0; m < c.M; ++m) {
        for (int64_t n = 0; n < c.N; ++n) {
          const size_t i = size_t(m * c.N + n);
          const double yv = y[size_t(m * ldy + n)];
          const double err = std::fabs(yv - ref[size_t(m * ldy + n)]);
          const double bound = (a8 ? rel8 * mag8[ai][i] : rel32 * mag32[i]) + 1e-30;
          worst = std::max(worst, err / bound);
          if (!(err <= bound)) {
            ADD_FAILURE() << isa_name(isa) << " " << matmul_q_path(c.M, q->w) << " gs=" << c.gs
                          << " sdt=" << dtype_name(c.sdt) << " M=" << c.M << " K=" << c.K << " N=" << c.N
                          << " bias=" << c.bias << " threads=" << threads << " y[" << m << "," << n << "]=" << yv
                          << " ref=" << ref[size_t(m * ldy + n)] << " bound=" << bound;
            return worst;
          }
          if (a8) {  // and close to the f32-activation result: activation rounding <= sx/2 each
            const double e32 = std::fabs(yv - ref32[size_t(m * ldy + n)]);
            if (!(e32 <= act[ai][i] + rel8 * mag8[ai][i] + rel32 * mag32[i])) {
              ADD_FAILURE() << isa_name(isa) << " W8A8 too far from the f32-activation result: " << e32 << " > "
                            << act[ai][i];
              return worst;
            }
          }
        }
        for (int64_t n = c.N; n < ldy; ++n)
          if (y[size_t(m * ldy + n)] != -7.0f) {
            ADD_FAILURE() << "matmul_q wrote past N in row " << m;
            return worst;
          }
      }
      if (first.empty())
        first = y;
      else if (first != y)
        ADD_FAILURE() << isa_name(isa) << " M=" << c.M << " K=" << c.K << " N=" << c.N
                      << ": result depends on the thread count";
      // The interleaved layout: the same bits.
      std::vector<float> yi(size_t(c.M * ldy), -7.0f);
      matmul_q(x.data(), c.M, c.K, ldx, q->wi, b, yi.data(), ldy, pool(threads));
      if (yi != y) {
        ADD_FAILURE() << isa_name(isa) << " " << matmul_q_path(c.M, q->w) << " gs=" << c.gs
                      << " sdt=" << dtype_name(c.sdt) << " M=" << c.M << " K=" << c.K << " N=" << c.N
                      << " threads=" << threads << ": the interleaved layout gives other bits";
        return worst;
      }
    }
    set_quant_decode(QuantDecode::Auto);
  }
  set_quant_decode(QuantDecode::Auto);
  return worst;
}

TEST(MatmulQ, OddShapesAllIsas) {
  uint32_t seed = 10;
  double worst = 0;
  int cases = 0;
  for (QuantType t : {QuantType::Q8, QuantType::Q4})
    for (int64_t gs : {32, 64, 128})
      for (int64_t kg : {1, 3})
        for (int64_t N : {1, 5, 17, 33, 100})
          for (int64_t M : {1, 2, 3, 4, 5, 7, 13, 33, 130}) {
            const int64_t K = gs * kg;
            if (M * N * K > 1'500'000) continue;
            const DType sdt = (M + N) % 2 ? DType::F16 : DType::F32;
            worst = std::max(worst, check_matmul_q({M, K, N, t, gs, sdt, (M + N + K) % 3 != 0}, seed++));
            ++cases;
            if (::testing::Test::HasFailure()) return;
          }
  std::printf("  %d shapes, worst error / bound = %.3g\n", cases, worst);
}

TEST(MatmulQ, LargerShapesAndKBlocks) {
  // K beyond the GEMM k-block (kQKC = 8192: two k-blocks, the second
  // accumulating into y), many W blocks, M across m-tile edges
  uint32_t seed = 500;
  double worst = 0;
  for (QuantType t : {QuantType::Q8, QuantType::Q4}) {
    worst = std::max(worst, check_matmul_q({13, 8192 + 640, 40, t, t == QuantType::Q4 ? 32 : 128, DType::F16, true},
                                           seed++));
    worst = std::max(worst, check_matmul_q({1, 2048, 300, t, 32, DType::F16, true}, seed++));
    worst = std::max(worst, check_matmul_q({4, 1152, 77, t, 128, DType::F16, false}, seed++));
    worst = std::max(worst, check_matmul_q({37, 1664, 161, t, 64, DType::F32, true}, seed++));
    worst = std::max(worst, check_matmul_q({130, 640, 48, t, 128, DType::F16, false}, seed++));
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("  worst error / bound = %.3g\n", worst);
}

TEST(MatmulQ, StridedInputAndOutput) {
  uint32_t seed = 900;
  for (QuantType t : {QuantType::Q8, QuantType::Q4})
    for (int64_t M : {1, 3, 4, 6, 9, 40}) check_matmul_q({M, 96, 29, t, 32, DType::F16, true, 13, 7}, seed++);
}

// matmul_q_multi (one x, several weights) gives each weight exactly the
// result of its own matmul_q call: fused on the decode GEMV (one type and
// group size, M <= 4), one call each otherwise (mixed types, prefill M).
// With two weight streams per thread (up to M = 2) or four (M = 1) the
// blocks worked side by side can straddle matrices (the fused blocks are 7
// + 1 + 3). Every group size.
TEST(MatmulQ, MultiEqualsOneCallEach) {
  uint32_t seed = 1300;
  for (QuantType t : {QuantType::Q8, QuantType::Q4})
    for (int64_t gs : {32, 64, 128})
      for (int64_t M : {1, 2, 3, 4, 9, 40})
        for (bool mixed : {false, true}) {
          std::mt19937 rng(seed++);
          const int64_t K = 2 * gs + (gs == 32 ? 64 : 0), ldx = K + 5;
          const int64_t Ns[3] = {100, 16, 33};
          auto x = random_floats(rng, size_t(M * ldx), -2.0f, 2.0f);
          std::vector<std::unique_ptr<QW>> ws;
          std::vector<std::vector<float>> biases;
          for (int i = 0; i < 3; ++i) {
            const QuantType ti = mixed && i == 1 ? (t == QuantType::Q8 ? QuantType::Q4 : QuantType::Q8) : t;
            ws.push_back(make_qw(random_floats(rng, size_t(Ns[i] * K)), Ns[i], K, K, ti, gs, DType::F16));
            biases.push_back(random_floats(rng, size_t(Ns[i])));
          }
          // (layout 0: separate scales; 1: interleaved; 2: the middle
          // weight interleaved, the others not.)
          for (KernelLevel isa : supported_isas())
            for (const char* profile : {"default:q8_streams=2,q4_streams=2", "default", "default:q8_streams=4,q4_streams=4"})
            for (int layout : {0, 1, 2})
            for (int threads : {1, 2}) {
              IsaScope scope(isa);
              PrefetchScope pscope(profile);
              std::vector<std::vector<float>> want(3), got(3);
              QMatmulOut outs[3];
              for (int i = 0; i < 3; ++i) {
                want[i].assign(size_t(M * Ns[i]), 0.0f);
                got[i].assign(size_t(M * Ns[i]), 7.0f);
                const float* b = i == 1 ? nullptr : biases[size_t(i)].data();
                matmul_q(x.data(), M, K, ldx, ws[size_t(i)]->w, b, want[i].data(), Ns[i], pool(threads));
                const bool il = layout == 1 || (layout == 2 && i == 1);
                outs[i] = {il ? &ws[size_t(i)]->wi : &ws[size_t(i)]->w, b, got[i].data(), Ns[i]};
              }
              matmul_q_multi(x.data(), M, K, ldx, outs, 3, pool(threads));
              for (int i = 0; i < 3; ++i)
                ASSERT_EQ(got[i], want[i]) << isa_name(isa) << " " << quant_type_name(t) << " gs=" << gs << " M=" << M
                                           << " mixed=" << mixed << " " << profile << " layout " << layout
                                           << " threads=" << threads << " weight " << i;
            }
        }
}

void check_gate_up_silu(const std::vector<float>& x, int64_t M, int64_t K, int64_t ldx, const QuantizedWeight& wg,
                        const QuantizedWeight& wu, const float* bg, const float* bu, int64_t N, int64_t ldy,
                        int threads) {
  std::vector<float> want(size_t(M * ldy), 5.0f), want_up(size_t(M * ldy), 5.0f);
  matmul_q(x.data(), M, K, ldx, wg, bg, want.data(), ldy, pool(threads));
  matmul_q(x.data(), M, K, ldx, wu, bu, want_up.data(), ldy, pool(threads));
  for (int64_t m = 0; m < M; ++m) silu_mul(want.data() + m * ldy, want_up.data() + m * ldy, want.data() + m * ldy, N);
  std::vector<float> got(size_t(M * ldy), 5.0f), up_scratch(size_t(M * ldy), 5.0f);
  matmul_q_gate_up_silu(x.data(), M, K, ldx, {&wg, bg, got.data(), ldy}, {&wu, bu, up_scratch.data(), ldy},
                        pool(threads));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) ASSERT_EQ(got[size_t(m * ldy + n)], want[size_t(m * ldy + n)]) << "m=" << m << " n=" << n;
  for (int64_t m = 0; m < M; ++m)  // the padding between rows is not written
    for (int64_t n = N; n < ldy; ++n) ASSERT_EQ(got[size_t(m * ldy + n)], 5.0f) << "m=" << m << " n=" << n;
}

// matmul_q_gate_up_silu (the gated MLP's gate and up) gives the bits of
// matmul_q on each weight followed by silu_mul: on the VNNI GEMM one tile
// computes a gate block and the same up block and stores silu(gate) * up;
// the other paths go through up.y. With and without biases, N not a
// multiple of 16, M on both sides of the GEMV limit, 1 and 2 threads.
TEST(MatmulQ, GateUpSiluEqualsTwoMatmulsThenSilu) {
  uint32_t seed = 1900;
  for (QuantType t : {QuantType::Q8, QuantType::Q4})
    for (int64_t gs : {32, 128})
      for (int64_t M : {1, 4, 5, 9, 40})
        for (bool with_bias : {false, true}) {
          std::mt19937 rng(seed++);
          const int64_t K = 2 * gs + (gs == 32 ? 64 : 0), ldx = K + 5, N = 75, ldy = N + 3;
          const auto x = random_floats(rng, size_t(M * ldx), -2.0f, 2.0f);
          auto wg = make_qw(random_floats(rng, size_t(N * K)), N, K, K, t, gs, DType::F16);
          auto wu = make_qw(random_floats(rng, size_t(N * K)), N, K, K, t, gs, DType::F16);
          const auto bg = random_floats(rng, size_t(N), -3.0f, 3.0f), bu = random_floats(rng, size_t(N));
          const float* pbg = with_bias ? bg.data() : nullptr;
          const float* pbu = with_bias ? bu.data() : nullptr;
          for (KernelLevel isa : supported_isas())
            for (bool il : {false, true})
            for (int threads : {1, 2}) {
              IsaScope scope(isa);
              check_gate_up_silu(x, M, K, ldx, il ? wg->wi : wg->w, il ? wu->wi : wu->w, pbg, pbu, N, ldy, threads);
              ASSERT_FALSE(HasFatalFailure()) << isa_name(isa) << " " << quant_type_name(t) << " gs=" << gs << " M=" << M
                                              << " bias=" << with_bias << " interleaved=" << il
                                              << " threads=" << threads;
            }
        }
  // K longer than the GEMM's k-block (8192): the tile cannot see the whole
  // sum, so the unfused path is taken.
  std::mt19937 rng(1999);
  const int64_t M = 9, K = 8320, N = 20;
  const auto x = random_floats(rng, size_t(M * K), -2.0f, 2.0f);
  auto wg = make_qw(random_floats(rng, size_t(N * K)), N, K, K, QuantType::Q4, 128, DType::F16);
  auto wu = make_qw(random_floats(rng, size_t(N * K)), N, K, K, QuantType::Q4, 128, DType::F16);
  for (KernelLevel isa : supported_isas()) {
    IsaScope scope(isa);
    check_gate_up_silu(x, M, K, K, wg->w, wu->w, nullptr, nullptr, N, N, 2);
    ASSERT_FALSE(HasFatalFailure()) << isa_name(isa) << " K=" << K;
  }
}

TEST(MatmulQ, PathNames) {
  QuantizedWeight w;
  w.type = QuantType::Q4;
  for (KernelLevel isa : supported_isas()) {
    IsaScope scope(isa);
    for (QuantType t : {QuantType::Q8, QuantType::Q4}) {
      w.type = t;
      std::printf("  %s %s: M=1 %s, M=%d %s, M=512 %s\n", isa_name(isa), quant_type_name(t), matmul_q_path(1, w),
                  int(quant_gemv_max_m()), matmul_q_path(quant_gemv_max_m(), w), matmul_q_path(512, w));
    }
    set_quant_decode(QuantDecode::WeightOnly);
    EXPECT_EQ(matmul_q_activation_quant(1, w), ActQuant::None);
    set_quant_decode(QuantDecode::Auto);
    // The AVX2 level's prefill: int8 dot products with AVX-VNNI or with
    // vpmaddubsw, both types.
    if (isa == Isa::Avx2) {
      EXPECT_EQ(avx_vnni_active(), isa.avx_vnni);
      w.type = QuantType::Q4;
      EXPECT_STREQ(matmul_q_path(512, w), isa.avx_vnni ? "w4a8-avxvnni-gemm" : "w4a8-avx2-gemm");
      EXPECT_EQ(matmul_q_activation_quant(512, w), ActQuant::PerRow);
      w.type = QuantType::Q8;
      EXPECT_STREQ(matmul_q_path(512, w), isa.avx_vnni ? "w8a8-avxvnni-gemm" : "w8a8-avx2-gemm");
      EXPECT_EQ(matmul_q_activation_quant(512, w), ActQuant::PerRow);
    }
  }
}

// The AVX2 level's int8 prefill GEMMs (ymm: AVX-VNNI, and vpmaddubsw) do the
// AVX-512 VNNI GEMM's arithmetic in the same order: the same bits, for every
// type, group size, scale dtype, M across their 6-, 4- (plain AVX2 Q8) and
// 3-row (Q4) and the AVX-512 6-row tiles, N with a partial block, K across the 8192
// k-block, one matrix and fused (matmul_q_multi, gate/up).
TEST(MatmulQ, Avx2LevelInt8GemmsGiveTheAvx512GemmBits) {
  if (best_isa() < Isa::Avx512 || !rinfer::cpu_features().avx512_vnni)
    GTEST_SKIP() << "needs AVX-512 VNNI for the GEMM to compare with (this CPU: " << rinfer::cpu_features().summary()
                 << "); OddShapesAllIsas checks the AVX2 level against the reference";
  uint32_t seed = 2500;
  struct Shape {
    int64_t M, K, N;
  };
  for (QuantType t : {QuantType::Q8, QuantType::Q4})
    for (int64_t gs : {32, 64, 128})
      for (Shape sh : {Shape{5, 256, 40}, Shape{17, 384, 16}, Shape{64, 512, 100}, Shape{7, 8192 + 256, 33},
                       Shape{4 + 6, 128, 45}}) {
        if (sh.K % gs) continue;
        std::mt19937 rng(seed++);
        const int64_t M = sh.M, K = sh.K, N = sh.N, ldx = K + 3;
        const DType sdt = gs == 64 ? DType::F32 : DType::F16;
        const auto x = random_floats(rng, size_t(M * ldx), -2.0f, 2.0f);
        auto wa = make_qw(random_floats(rng, size_t(N * K)), N, K, K, t, gs, sdt);
        auto wb = make_qw(random_floats(rng, size_t(N * K)), N, K, K, t, gs, sdt);
        const auto bias = random_floats(rng, size_t(N));
        auto run = [&](KernelLevel level, int threads) {
          IsaScope scope(level);
          std::vector<float> y(size_t(4 * M * N), 3.0f);
          matmul_q(x.data(), M, K, ldx, wa->w, bias.data(), y.data(), N, pool(threads));
          const QMatmulOut outs[2] = {{&wa->w, nullptr, y.data() + M * N, N}, {&wb->w, bias.data(), y.data() + 2 * M * N, N}};
          matmul_q_multi(x.data(), M, K, ldx, outs, 2, pool(threads));
          std::vector<float> up(size_t(M * N));
          matmul_q_gate_up_silu(x.data(), M, K, ldx, {&wa->w, bias.data(), y.data() + 3 * M * N, N},
                                {&wb->w, nullptr, up.data(), N}, pool(threads));
          return y;
        };
        for (int threads : {1, 2}) {
          const auto want = run(Isa::Avx512, threads);
          for (bool vnni : {true, false}) {
            if (vnni && !rinfer::cpu_features().avx_vnni) continue;
            const auto got = run(KernelLevel(Isa::Avx2, vnni), threads);
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i]))
                  << (vnni ? "avx2+avxvnni " : "avx2 ") << quant_type_name(t) << " gs=" << gs << " M=" << M
                  << " K=" << K << " N=" << N << " threads=" << threads << " output " << i / size_t(M * N) << " ["
                  << i % size_t(M * N) / size_t(N) << ", " << i % size_t(N) << "]";
          }
        }
      }
}

// ---------------------------------------------------------------- INT8 KV cache
struct KvI8 {
  std::vector<int8_t> k, v;
  std::vector<float> ks, vs;
  std::vector<float> kf, vf;    // the f32 values stored, [slot][head][hd]
  std::vector<float> kfc, vfc;  // the same in an F32 cache (its layout), for the accuracy check
  PagedKV kv;
};

KvI8 make_kv_i8(std::mt19937& rng, int hd, int nkv, int bs, int64_t pool_blocks) {
  KvI8 c;
  const int64_t slots = pool_blocks * bs, per = int64_t(nkv) * hd;
  c.k.assign(size_t(slots * per), 0);
  c.v.assign(size_t(slots * per), 0);
  c.ks.assign(size_t(slots * nkv), 0.0f);
  c.vs.assign(size_t(slots * nkv), 0.0f);
  c.kf = random_floats(rng, size_t(slots * per), -2.0f, 2.0f);
  c.vf = random_floats(rng, size_t(slots * per));
  c.kv.k = c.k.data();
  c.kv.v = c.v.data();
  c.kv.dtype = DType::I8;
  c.kv.block_size = bs;
  c.kv.n_kv_heads = nkv;
  c.kv.head_dim = hd;
  c.kv.n_blocks = pool_blocks;
  c.kv.k_scale = c.ks.data();
  c.kv.v_scale = c.vs.data();
  for (int64_t s = 0; s < slots; ++s) reference::store_kv(c.kv, s, c.kf.data() + s * per, c.vf.data() + s * per);
  c.kfc.assign(c.kf.size(), 0.0f);
  c.vfc.assign(c.vf.size(), 0.0f);
  PagedKV f = c.kv;
  f.dtype = DType::F32;
  f.k = c.kfc.data();
  f.v = c.vfc.data();
  for (int64_t s = 0; s < slots; ++s) reference::store_kv(f, s, c.kf.data() + s * per, c.vf.data() + s * per);
  return c;
}

TEST(KvCacheI8, StoreMatchesReferenceBitForBit) {
  std::mt19937 rng(11);
  for (int hd : {8, 13, 64, 80, 128}) {
    const int nkv = 3, bs = 4;
    KvI8 want = make_kv_i8(rng, hd, nkv, bs, 2);
    want.kf[5] = std::numeric_limits<float>::quiet_NaN();  // the NaN convention too
    for (int64_t s = 0; s < 8; ++s)
      reference::store_kv(want.kv, s, want.kf.data() + s * nkv * hd, want.vf.data() + s * nkv * hd);
    for (KernelLevel isa : supported_isas()) {
      IsaScope scope(isa);
      KvI8 got = want;
      got.kv.k = got.k.data();
      got.kv.v = got.v.data();
      got.kv.k_scale = got.ks.data();
      got.kv.v_scale = got.vs.data();
      std::fill(got.k.begin(), got.k.end(), 0);
      std::fill(got.ks.begin(), got.ks.end(), 0.0f);
      for (int64_t s = 0; s < 8; ++s) store_kv(got.kv, s, got.kf.data() + s * nkv * hd, got.vf.data() + s * nkv * hd);
      ASSERT_EQ(got.k, want.k) << isa_name(isa) << " hd=" << hd;
      ASSERT_EQ(got.v, want.v) << isa_name(isa) << " hd=" << hd;
      ASSERT_EQ(std::memcmp(got.ks.data(), want.ks.data(), got.ks.size() * 4), 0) << isa_name(isa);
      ASSERT_EQ(std::memcmp(got.vs.data(), want.vs.data(), got.vs.size() * 4), 0) << isa_name(isa);
    }
  }
}

TEST(KvCacheI8, AttentionMatchesReference) {
  std::mt19937 rng(12);
  double worst_quant = 0;
  for (int hd : {8, 24, 64, 80, 128})
    for (int bs : {1, 7, 16})
      for (int64_t n_ctx : {1, 5, 16, 17, 100, 300}) {
        const int nkv = hd <= 24 ? 3 : 2;
        const int64_t n_blocks = (n_ctx + bs - 1) / bs, pool_blocks = n_blocks + 2;
        KvI8 c = make_kv_i8(rng, hd, nkv, bs, pool_blocks);
        std::vector<int32_t> order(static_cast<size_t>(pool_blocks));
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        const float scale = 1.0f / std::sqrt(float(hd));
        const float alibi = bs == 7 ? 0.0625f : 0.0f;
        for (int h = 0; h < nkv; ++h) {
          auto q = random_floats(rng, size_t(hd));
          std::vector<float> ref(static_cast<size_t>(hd)), scratch(static_cast<size_t>(n_ctx));
          reference::attention_head(q.data(), c.kv, h, order.data(), n_ctx, scale, alibi, ref.data(), scratch.data());
          // bound as in test_ops.cpp, with |K| <= 2 and the scale products (a few u more)
          double qk = 0;
          for (int d = 0; d < hd; ++d) qk += 2 * std::fabs(q[d]);
          const double score_err = (hd / 8.0 + 12) * u * scale * qk + 4 * u * alibi * n_ctx;
          const double bound = 2 * score_err + 24 * u + (n_ctx / 2.0 + 8) * u;
          for (KernelLevel isa : supported_isas()) {
            IsaScope scope(isa);
            std::vector<float> out(size_t(hd), 123.0f), s2(static_cast<size_t>(n_ctx));
            attention_head(q.data(), c.kv, h, order.data(), n_ctx, scale, alibi, out.data(), s2.data());
            for (int d = 0; d < hd; ++d)
              ASSERT_LE(std::fabs(out[d] - ref[d]), bound)
                  << isa_name(isa) << " hd=" << hd << " bs=" << bs << " n_ctx=" << n_ctx << " d=" << d;
            // the same row through attention_rows, twice (a pair of one length)
            // and beside a shorter (causal) row
            std::vector<float> o1(size_t(hd), 123.0f), o2(size_t(hd), 123.0f), o3(size_t(hd), 123.0f),
                ref2(static_cast<size_t>(hd));
            const int64_t n2 = (n_ctx + 1) / 2;
            reference::attention_head(q.data(), c.kv, h, order.data(), n2, scale, alibi, ref2.data(), scratch.data());
            const AttnRow rows[3] = {
                {q.data(), o1.data(), n_ctx, alibi}, {q.data(), o3.data(), n_ctx, alibi}, {q.data(), o2.data(), n2, alibi}};
            attention_rows(rows, 3, c.kv, h, order.data(), scale);
            for (int d = 0; d < hd; ++d) {
              ASSERT_LE(std::fabs(o1[d] - ref[d]), bound) << "rows " << isa_name(isa) << " hd=" << hd << " n_ctx=" << n_ctx;
              ASSERT_LE(std::fabs(o3[d] - ref[d]), bound) << "rows " << isa_name(isa) << " hd=" << hd << " n_ctx=" << n_ctx;
              ASSERT_LE(std::fabs(o2[d] - ref2[d]), bound) << "rows " << isa_name(isa) << " hd=" << hd << " n_ctx=" << n2;
            }
            // 7 rows (a GQA group's decode path: rows of one length in pairs,
            // the odd one alone): 5 of the full length, 2 of the shorter one
            std::vector<std::vector<float>> g7(7, std::vector<float>(size_t(hd), 123.0f));
            std::vector<AttnRow> group;
            for (int r = 0; r < 7; ++r) group.push_back({q.data(), g7[size_t(r)].data(), r < 5 ? n_ctx : n2, alibi});
            attention_rows(group.data(), 7, c.kv, h, order.data(), scale);
            for (int r = 0; r < 7; ++r)
              for (int d = 0; d < hd; ++d)
                ASSERT_LE(std::fabs(g7[size_t(r)][d] - (r < 5 ? ref : ref2)[d]), bound)
                    << "group " << isa_name(isa) << " hd=" << hd << " row " << r << " n_ctx=" << n_ctx;
            // 18 rows (the rows-in-lanes path: 16 rows in lanes, at AVX-512 one
            // tile and at AVX2 two, the last 2 on the row path): the row
            // alternating with the shorter one
            std::vector<std::vector<float>> lo(18, std::vector<float>(size_t(hd), 123.0f));
            std::vector<AttnRow> many;
            for (int r = 0; r < 18; ++r) many.push_back({q.data(), lo[size_t(r)].data(), r % 2 ? n2 : n_ctx, alibi});
            attention_rows(many.data(), 18, c.kv, h, order.data(), scale);
            for (int r = 0; r < 18; ++r)
              for (int d = 0; d < hd; ++d)
                ASSERT_LE(std::fabs(lo[size_t(r)][d] - (r % 2 ? ref2 : ref)[d]), bound)
                    << "lanes " << isa_name(isa) << " hd=" << hd << " row " << r << " n_ctx=" << n_ctx;
          }
          // accuracy cost of the INT8 cache vs the same cache in f32
          KvI8& f = c;
          PagedKV kf = f.kv;
          kf.dtype = DType::F32;
          kf.k = f.kfc.data();
          kf.v = f.vfc.data();
          std::vector<float> exact(static_cast<size_t>(hd));
          reference::attention_head(q.data(), kf, h, order.data(), n_ctx, scale, alibi, exact.data(), scratch.data());
          for (int d = 0; d < hd; ++d) worst_quant = std::max(worst_quant, double(std::fabs(exact[d] - ref[d])));
        }
        if (::testing::Test::HasFailure()) return;
      }
  std::printf("  INT8 KV vs f32 KV: worst |attention output difference| = %.3g (|V| <= 1)\n", worst_quant);
  EXPECT_LT(worst_quant, 0.05);
}

// The decode prefetch profiles (perf/decode_tuning.h) change where the decode
// GEMV prefetches and how many weight streams a thread reads, never what it
// computes: each profile gives the same bits on 1 and 2 threads (one thread
// with a prefetch is Q8's path on Zen 5; N = 150 is 10 blocks, so two and
// four streams leave blocks over on 1 and on 2 threads), and
// MatmulQ.* hold those bits against the reference under the machine's own
// profile. K = 2048 so that the prefetches reach past a block.
TEST(MatmulQ, DecodePrefetchProfilesGiveTheSameBits) {
  std::mt19937 rng(2024);
  for (QuantType t : {QuantType::Q8, QuantType::Q4})
    for (int64_t M : {1, 2, 4}) {
      const int64_t K = 2048, N = 150, gs = t == QuantType::Q4 ? 32 : 128;
      auto q = make_qw(random_floats(rng, size_t(N * K)), N, K, K, t, gs, DType::F16);
      const auto x = random_floats(rng, size_t(M * K), -2.0f, 2.0f);
      for (KernelLevel isa : supported_isas()) {
        IsaScope iscope(isa);
        std::vector<float> want;
        // (Q4 with nta + L2 prefetches, nta alone, L2 alone and none.)
        for (const char* profile : {"default", "zen5", "icelake", "zen5:line_t0=1", "zen5:q8_streams=2", "zen5:q4_streams=1", "default:q4_nta=0",
                                    "zen5:q4_nta=0", "zen5:q4_streams=4,q8_streams=4"})
          for (int threads : {1, 2}) {
            PrefetchScope scope(profile);
            EXPECT_STREQ(decode_prefetch().name, profile);
            for (bool il : {false, true}) {
              std::vector<float> y(size_t(M * N), -7.0f);
              matmul_q(x.data(), M, K, K, il ? q->wi : q->w, nullptr, y.data(), N, pool(threads));
              if (want.empty())
                want = y;
              else
                ASSERT_EQ(y, want) << isa_name(isa) << " " << quant_type_name(t) << " M=" << M << " " << profile
                                   << " interleaved=" << il << " threads=" << threads;
            }
          }
      }
    }
}

}  // namespace
}  // namespace rinfer::kernels::cpu::testing
