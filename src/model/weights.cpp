#include "model/weights.h"

#include "core/error.h"

namespace rinfer {

void WeightStore::add(const std::string& name, const TensorView& view) {
  RINFER_CHECK(tensors_.emplace(name, view).second, "duplicate tensor ", name);
}

void WeightStore::add_quantized(const std::string& name, const QuantizedWeight& q) {
  RINFER_CHECK(has(name), "quantized weight ", name, " has no data tensor");
  RINFER_CHECK(quantized_.emplace(name, q).second, "duplicate quantized weight ", name);
}

const QuantizedWeight* WeightStore::quantized(const std::string& name) const {
  const auto it = quantized_.find(name);
  return it == quantized_.end() ? nullptr : &it->second;
}

TensorView WeightStore::get(const std::string& name, const Shape& expected) const {
  auto it = tensors_.find(name);
  RINFER_CHECK(it != tensors_.end(), "missing tensor ", name, " (expected shape ", shape_str(expected), ") in ",
               source);
  RINFER_CHECK(it->second.shape == expected, "tensor ", name, " has shape ", shape_str(it->second.shape),
               ", expected ", shape_str(expected), " in ", source);
  return it->second;
}

const float* WeightStore::get_f32(const std::string& name, const Shape& expected) const {
  TensorView v = get(name, expected);
  RINFER_CHECK(v.dtype == DType::F32, "tensor ", name, " must be F32, is ", dtype_name(v.dtype), " in ", source);
  return v.as<float>();
}

uint64_t WeightStore::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, v] : tensors_) n += v.nbytes();
  return n;
}

namespace {

// Non-finite values of n elements whose exponent field is `mask` (all ones:
// infinity or NaN), and the first one's index.
template <typename Bits>
std::pair<int64_t, int64_t> count_non_finite(const Bits* v, int64_t n, Bits mask) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += (v[i] & mask) == mask;
  if (count == 0) return {0, 0};
  int64_t first = 0;
  while ((v[first] & mask) != mask) ++first;
  return {count, first};
}

}  // namespace

std::vector<WeightStore::NonFinite> WeightStore::non_finite_tensors() const {
  std::vector<NonFinite> out;
  for (const auto& [name, v] : tensors_) {
    if (v.device != Device::Cpu || !v.data) continue;
    std::pair<int64_t, int64_t> r{0, 0};
    if (v.dtype == DType::F32)
      r = count_non_finite(v.as<uint32_t>(), v.numel(), uint32_t(0x7F800000u));
    else if (v.dtype == DType::BF16)
      r = count_non_finite(v.as<uint16_t>(), v.numel(), uint16_t(0x7F80u));
    else if (v.dtype == DType::F16)
      r = count_non_finite(v.as<uint16_t>(), v.numel(), uint16_t(0x7C00u));
    if (r.first > 0) out.push_back({name, r.first, r.second});
  }
  return out;
}

}  // namespace rinfer
