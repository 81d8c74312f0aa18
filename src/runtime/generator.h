#pragma once
// Generator: one sequence from prompt to stop — prefill the prompt as one
// batch, then decode one token per step, sampling each. Used by `rinfer run`,
// `validate` and `bench`; the serving engine drives Model::forward itself.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace rinfer {

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // EOS ids; empty: never stop early
  int64_t max_context = 0;        // tokens (prompt + output); 0: the model's and the cache's limit
};

struct GenerateResult {
  std::vector<int32_t> output_ids;
  std::string stop_reason;  // "eos", "length" (max_new_tokens) or "context"
  double prefill_s = 0;     // prompt forward pass
  double ttft_s = 0;        // prompt forward + first sampled token
  double decode_s = 0;      // all later steps
  int64_t n_decode_steps = 0;
};

class Generator {
 public:
  Generator(Model& model, KVCache& kv);
  ~Generator();

  // Largest prompt + output length usable with this model and cache.
  int64_t context_limit(int64_t requested = 0) const;

  // Throws the one-line Error generate() would throw for this request (empty
  // prompt, ids outside the vocabulary, prompt longer than the context, bad
  // sampling parameters), so a caller can check before printing anything.
  void check_request(std::span<const int32_t> prompt, const GenerateOptions& opts) const;

  // on_token is called for every generated id as soon as it is sampled.
  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                          const std::function<void(int32_t)>& on_token = {});

  // Teacher forcing for validation: run `prompt` in a fresh cache, return
  // logits for every position [n, vocab], then feed `forced` one token at a
  // time returning each step's logits [forced.size(), vocab].
  void score(std::span<const int32_t> prompt, std::span<const int32_t> forced, std::vector<float>& prompt_logits,
             std::vector<float>& step_logits);

 private:
  void reset();
  Model& model_;
  KVCache& kv_;
  std::vector<int32_t> blocks_;
  std::vector<float> logits_;
};

}  // namespace rinfer
