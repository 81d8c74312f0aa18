#pragma once
// `rinfer validate --reference REF`: how far a model (e.g. bf16, int8, int4
// or with an INT8 KV cache) is from a reference model (normally the f32
// conversion of the same checkpoint). The reference generates a greedy
// continuation of each prompt; both models are then teacher-forced over it and
// compared position by position: top-1 agreement, mean KL(reference || model),
// and the perplexity each assigns to the continuation.
#include <string>

#include "common.h"

namespace rinfer::cli {

struct ReferenceValidation {
  std::string model, reference, golden, prompts, json_out;
  int64_t gen_len = 64;
  double min_top1 = 0;        // fail below this agreement (0: report only)
  double max_kl = INFINITY;   // fail above this mean KL
  RuntimeOptions rt;
};

int run_reference_validation(const ReferenceValidation& o);

}  // namespace rinfer::cli
