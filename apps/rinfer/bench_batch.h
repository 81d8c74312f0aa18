#pragma once
// rinfer bench --batch N: N sequences decoding together through the model
// runner (no server, no scheduler), so that the kernels' scaling with the
// batch is seen apart from serving overhead. Each sample decodes one
// sequence alone and then N together at the same context length (the order
// alternates between samples, so that a host's drifting speed meets both),
// and reports aggregate decode tokens/s, its ratio to the lone sequence's,
// and the matmul work per second against the instruction peak of the
// batch's matmul path, probed before and after each sample.
#include <cstdint>
#include <string>

#include "common.h"

namespace rinfer::cli {

struct BatchBenchOptions {
  int64_t batch = 16, prompt_len = 128, gen_len = 64;
  int samples = 3, warmup = 1;
  bool roofline = true, profile = false;
  std::string json_out;
};

// KV cache tokens the run needs (batch + 1 sequences).
int64_t batch_bench_kv_tokens(const BatchBenchOptions& o, int block_size);

int run_batch_bench(Session& s, const BatchBenchOptions& o, const std::string& model_path, const RuntimeOptions& rt);

}  // namespace rinfer::cli
