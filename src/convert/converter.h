#pragma once
// The converter: HF checkpoint -> rinfer tensors, one group (the globals, then
// each layer) at a time, so memory stays near one layer however big the model.
// Where the tensors go is a WeightSink: a rinfer model directory on disk
// (ModelDirWriter) or a WeightStore in memory (running an HF dir directly).
#include <functional>
#include <string>
#include <vector>

#include "convert/hf_checkpoint.h"
#include "core/buffer.h"
#include "model/weights.h"

namespace rinfer {

struct ConvertOptions {
  DType dtype = DType::BF16;  // for matrices and embeddings; vectors stay F32
  bool progress = false;      // progress line on stderr
};

class WeightSink {
 public:
  virtual ~WeightSink() = default;
  virtual void begin_group(int64_t group) = 0;
  virtual void add(const TensorSpec& spec, DType dtype, Buffer&& data) = 0;
  virtual void end_group(int64_t group) = 0;
};

// Keeps every tensor in anonymous memory inside a WeightStore.
class MemorySink : public WeightSink {
 public:
  explicit MemorySink(WeightStore& store) : store_(store) {}
  void begin_group(int64_t) override {}
  void add(const TensorSpec& spec, DType dtype, Buffer&& data) override;
  void end_group(int64_t) override {}

 private:
  WeightStore& store_;
};

struct ConvertStats {
  uint64_t bytes_in = 0, bytes_out = 0;
  double seconds = 0;
  std::vector<std::string> unused_hf_tensors;
};

ConvertStats convert_tensors(const HfCheckpoint& hf, const ConvertOptions& opts, WeightSink& sink);

// Whole conversion to a rinfer model directory at `out_dir` (written under a
// temporary name and renamed at the end; an existing out_dir is an error).
ConvertStats convert_to_dir(const std::string& hf_dir, const std::string& out_dir, const ConvertOptions& opts);

}  // namespace rinfer
