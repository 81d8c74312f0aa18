// Linear::read_ahead: the slices the attention tasks prefetch cover exactly
// what the layer's matmul reads (data, and scales when quantized), once.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/layers.h"

namespace rinfer {
namespace {

// Every byte of [p, p + n) of each range, counted over the slices of `parts`.
void expect_exact_cover(const Linear& l, const void* const want_p[2], const int64_t want_n[2], int64_t parts) {
  for (int i = 0; i < 2; ++i) {
    std::vector<int> seen(static_cast<size_t>(want_n[i]), 0);
    for (int64_t part = 0; part < parts; ++part) {
      const kernels::cpu::ReadAhead r = l.read_ahead(part, parts);
      if (want_n[i] == 0) {
        EXPECT_EQ(r.bytes[i], 0);
        continue;
      }
      const int64_t off = static_cast<const char*>(r.p[i]) - static_cast<const char*>(want_p[i]);
      ASSERT_GE(off, 0);
      ASSERT_LE(off + r.bytes[i], want_n[i]) << "part " << part << " of " << parts;
      for (int64_t b = off; b < off + r.bytes[i]; ++b) ++seen[size_t(b)];
    }
    for (int64_t b = 0; b < want_n[i]; ++b) ASSERT_EQ(seen[size_t(b)], 1) << "range " << i << " byte " << b;
  }
}

TEST(LinearReadAhead, SlicesCoverTheWeightOnce) {
  std::vector<uint16_t> w(37 * 64);
  Linear plain;
  plain.weight = TensorView{DType::BF16, {37, 64}, w.data()};
  plain.in = 64;
  plain.out = 37;
  const void* pp[2] = {w.data(), nullptr};
  const int64_t pn[2] = {int64_t(w.size() * 2), 0};
  for (int64_t parts : {1, 3, 4, 7}) expect_exact_cover(plain, pp, pn, parts);

  Linear q;
  q.quantized = true;
  q.qweight.type = kernels::cpu::QuantType::Q4;
  q.qweight.N = 40;
  q.qweight.K = 128;
  q.qweight.group_size = 32;
  q.qweight.scale_dtype = DType::F16;
  const int64_t dn = int64_t(kernels::cpu::quant_data_bytes(q.qweight.type, 40, 128));
  const int64_t sn = int64_t(kernels::cpu::quant_scale_bytes(40, 128, 32, DType::F16));
  std::vector<uint8_t> data(static_cast<size_t>(dn)), scales(static_cast<size_t>(sn));
  q.qweight.data = data.data();
  q.qweight.scales = scales.data();
  q.weight = TensorView{DType::U8, {48, 64}, data.data()};
  const void* qp[2] = {data.data(), scales.data()};
  const int64_t qn[2] = {dn, sn};
  EXPECT_EQ(uint64_t(dn + sn), q.bytes());
  for (int64_t parts : {1, 2, 5, 8}) expect_exact_cover(q, qp, qn, parts);
}

}  // namespace
}  // namespace rinfer
