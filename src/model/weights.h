#pragma once
// WeightStore: every tensor of a loaded model by name, plus whatever owns
// their bytes (anonymous buffers or file mappings). Models look tensors up
// once at construction with the shape they expect; a missing or mis-shaped
// tensor is an error that names it, never a silent fallback.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"
#include "core/quantized_weight.h"

namespace rinfer {

class WeightStore {
 public:
  void add(const std::string& name, const TensorView& view);
  void own(Buffer&& buffer) { buffers_.push_back(std::move(buffer)); }
  void own(std::shared_ptr<void> holder) { holders_.push_back(std::move(holder)); }
  // A file mapping, and how to hand its resident pages back to the kernel.
  void own_mapping(std::shared_ptr<void> holder, std::function<void()> drop_pages) {
    holders_.push_back(std::move(holder));
    drop_pages_.push_back(std::move(drop_pages));
  }
  // Drops every mapping's resident pages: after a shard has copied what it
  // copies, the pages read for that would otherwise stay in its RSS; the
  // views it still uses fault theirs back in from the page cache.
  void drop_mapped_pages() const {
    for (const auto& d : drop_pages_) d();
  }
  // How to hand a mapped tensor's pages back — bytes [from, from + len)
  // of it, all of it (and a quantized one's scales) for len = kAll — and
  // doing it: a shard that copied its part of a matrix lets the pages go as
  // it copies. A tensor not in a mapping: nothing.
  static constexpr size_t kAll = ~size_t(0);
  using PageRelease = std::function<void(size_t from, size_t len)>;
  void set_page_release(const std::string& name, PageRelease release) { page_release_[name] = std::move(release); }
  void release_pages(const std::string& name, size_t from = 0, size_t len = kAll) const {
    if (const auto it = page_release_.find(name); it != page_release_.end()) it->second(from, len);
  }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor with exactly this shape, or an Error naming it and the shape.
  TensorView get(const std::string& name, const Shape& expected) const;
  // As get(), and it must also be F32 (norm weights and biases are kept in f32).
  const float* get_f32(const std::string& name, const Shape& expected) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Quantized matrices, by the name of their data tensor ("<prefix>.weight"),
  // as the loader laid them out for the kernels (the interleaved layout where
  // the weights are copied into memory: core/quantized_weight.h). Their bytes are
  // the data tensor's (and, in the separate layout, its scale tensor's).
  void add_quantized(const std::string& name, const QuantizedWeight& q);
  const QuantizedWeight* quantized(const std::string& name) const;
  uint64_t total_bytes() const;
  // Float tensors (f32, f16, bf16, blocked bf16, separate quantization
  // scales) that hold NaN or infinity: a checkpoint that would run and
  // print garbage. Reads every such weight once.
  struct NonFinite {
    std::string name;
    int64_t count = 0;  // non-finite values
    int64_t first = 0;  // index of the first
  };
  std::vector<NonFinite> non_finite_tensors() const;
  std::string source;  // where the weights came from, for messages

 private:
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, QuantizedWeight> quantized_;
  std::vector<Buffer> buffers_;
  std::vector<std::shared_ptr<void>> holders_;
  std::vector<std::function<void()>> drop_pages_;
  std::map<std::string, PageRelease> page_release_;
};

}  // namespace rinfer
