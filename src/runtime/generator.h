#pragma once
// Generator: one sequence from prompt to stop — prefill the prompt in chunks
// of at most prefill_chunk tokens, then decode one token per step, sampling
// each, through the model runner. Used by `rinfer run`, `validate` and
// `bench`; the serving engine is the runner's other client.
//
// With speculation, a step forwards the last token and up to k drafted ones
// (prompt lookup, or a draft model) together, and samples along the rows
// while each sample equals the draft: a step yields 1 to k + 1 tokens (k
// halves after a step whose drafts all missed and grows back by one after
// one whose drafts all hit). A
// deterministic draft (prompt lookup, a greedy draft model) is a one-hot
// proposal: each token is sampled from the model's distribution given the
// tokens before it, with one draw of the sampler per token, and the draft
// is accepted exactly when the sample hits it, so the output is the one
// plain decoding gives. A sampled draft model goes through the acceptance
// rule of speculative sampling (runtime/speculative_sampling.h): the output
// is distributed as plain decoding's. Up to 3 drafts the rows take the
// decode kernels (GEMVs up to 4 rows for every weight type) and the logits
// are bitwise those of plain decoding; more rows round differently.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"

namespace rinfer {

class DraftModel;

struct SpeculativeOptions {
  int64_t num_tokens = 0;  // drafted per step at most; 0: no speculation
  int64_t ngram_max = 3;   // prompt lookup: longest suffix searched for
  DraftModel* draft = nullptr;  // drafts from this model instead of prompt lookup
};

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SpeculativeOptions speculative;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // EOS ids; empty: never stop early
  int64_t max_context = 0;        // tokens (prompt + output); 0: the model's and the cache's limit
};

struct GenerateResult {
  std::vector<int32_t> output_ids;
  std::string stop_reason;  // "eos", "length" (max_new_tokens) or "context"
  double prefill_s = 0;     // prompt forward passes
  double ttft_s = 0;        // prompt forward + first sampled token
  double decode_s = 0;      // all later steps
  int64_t n_decode_steps = 0;  // forward passes after the prompt's
  int64_t n_drafted = 0, n_accepted = 0;  // speculation: tokens proposed, and those sampled as proposed
  double draft_s = 0;                     // of decode_s: the draft model's forwards

  // Tokens after the first, per second of decode_s.
  double decode_tokens_per_s() const {
    return output_ids.size() > 1 && decode_s > 0 ? double(output_ids.size() - 1) / decode_s : 0;
  }
};

class Generator {
 public:
  explicit Generator(ModelRunner& runner);
  ~Generator();

  // Largest prompt + output length usable with this model and cache.
  int64_t context_limit(int64_t requested = 0) const;

  // Prompt tokens per forward call (0: the whole prompt at once). The
  // activations of a forward call grow with its tokens (a 2000-token
  // TinyLlama prompt in one pass: about 200 MB of workspace, peak RSS 1.24 x
  // weights + KV cache), so long prompts go in chunks; each chunk attends to
  // the cached K/V of the ones before it, so the result is the same up to
  // float rounding (a chunk of 4 tokens or fewer takes the decode GEMV path).
  static constexpr int64_t kDefaultPrefillChunk = 512;
  void set_prefill_chunk(int64_t tokens);
  int64_t prefill_chunk() const { return prefill_chunk_; }

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
  // Forward `tokens` (positions [0, n)) in chunks; logits of the last token,
  // or of every token when all_logits ([n, vocab]).
  void prefill(std::span<const int32_t> tokens, bool all_logits, float* logits);
  int64_t prefill_chunk_ = kDefaultPrefillChunk;
  ModelRunner& runner_;
  KVCache& kv_;
  std::vector<int32_t> blocks_;
  std::vector<float> logits_, p_, residual_;
};

}  // namespace rinfer
