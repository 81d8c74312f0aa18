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

}  // namespace rinfer
