#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "runtime/draft_model.h"
#include "runtime/prompt_lookup.h"
#include "runtime/speculative_sampling.h"

namespace rinfer {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(ModelRunner& runner) : runner_(runner), kv_(runner.kv()) {}
Generator::~Generator() { reset(); }

void Generator::reset() { kv_.release(blocks_); }

void Generator::set_prefill_chunk(int64_t tokens) {
  RINFER_CHECK(tokens >= 0, "--prefill-chunk must be >= 0 (0: the whole prompt at once), got ", tokens);
  prefill_chunk_ = tokens;
}

void Generator::prefill(std::span<const int32_t> tokens, bool all_logits, float* logits) {
  const int64_t n = int64_t(tokens.size()), vocab = runner_.config().vocab_size;
  const int64_t chunk = prefill_chunk_ > 0 ? prefill_chunk_ : n;
  kv_.reserve(blocks_, n);
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t len = std::min(chunk, n - b);
    // Before the last chunk only the K/V matter (unless every row is scored).
    const LogitRows rows = all_logits ? LogitRows::All : b + len == n ? LogitRows::Last : LogitRows::None;
    BatchItem item{tokens.subspan(size_t(b), size_t(len)), b, blocks_, rows};
    runner_.forward({&item, 1}, all_logits ? logits + b * vocab : logits);
  }
}

int64_t Generator::context_limit(int64_t requested) const {
  int64_t limit = std::min(runner_.config().max_position_embeddings, kv_.capacity_tokens());
  if (requested > 0) limit = std::min(limit, requested);
  return limit;
}

void Generator::check_request(std::span<const int32_t> prompt, const GenerateOptions& opts) const {
  RINFER_CHECK(!prompt.empty(), "the prompt is empty (no tokens, and no BOS to start from)");
  RINFER_CHECK(opts.max_new_tokens >= 0, "--max-new-tokens must be >= 0");
  const int64_t vocab = runner_.config().vocab_size;
  for (int32_t id : prompt)
    RINFER_CHECK(id >= 0 && id < vocab, "token id ", id, " is outside the vocabulary [0, ", vocab, ")");
  const int64_t ctx = context_limit(opts.max_context);
  RINFER_CHECK(int64_t(prompt.size()) <= ctx, "prompt of ", prompt.size(), " tokens is longer than the context of ",
               ctx, " tokens");
  opts.sampling.validate();
}

GenerateResult Generator::generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                                   const std::function<void(int32_t)>& on_token) {
  check_request(prompt, opts);
  const int64_t vocab = runner_.config().vocab_size;
  const int64_t ctx = context_limit(opts.max_context);
  const SpeculativeOptions& spec = opts.speculative;
  reset();
  Sampler sampler(opts.sampling);
  DraftModel* draft_model = spec.num_tokens > 0 ? spec.draft : nullptr;
  if (draft_model) draft_model->start(opts.sampling);
  GenerateResult res;
  std::vector<int32_t> history(prompt.begin(), prompt.end()), tokens, drafts;
  logits_.resize(size_t(vocab));
  auto t0 = std::chrono::steady_clock::now();
  prefill(prompt, false, logits_.data());
  res.prefill_s = seconds_since(t0);
  int64_t pos = int64_t(prompt.size());  // where the next sampled token goes
  int64_t rows = 1;                      // of logits_: for positions pos, pos + 1, ...
  res.stop_reason = "length";
  auto t_decode = std::chrono::steady_clock::now();
  int64_t drafted_at = 0;  // history's length when the drafts were made
  // Drafts per step, backing off as serve does: halved after a step whose
  // drafts all missed, one more after a step whose drafts all hit (rows
  // that miss cost compute, which a small model notices).
  int64_t draft_len = spec.num_tokens;
  while (int64_t(res.output_ids.size()) < opts.max_new_tokens) {
    bool stop = false;
    int64_t accepted = 0;
    for (int64_t i = 0; i < rows; ++i) {
      if (pos >= ctx) {
        res.stop_reason = "context";
        stop = true;
        break;
      }
      float* row = logits_.data() + i * vocab;
      const bool sampled_draft = draft_model && i < int64_t(drafts.size()) && !draft_model->q(i).empty();
      int32_t id;
      if (sampled_draft) {
        runner_.distribution(row, sampler, history, p_);
        id = accept_or_resample(p_, drafts[size_t(i)], draft_model->q(i), sampler, residual_);
      } else {
        id = runner_.sample(row, sampler, history).id;
      }
      if (res.output_ids.empty()) {
        res.ttft_s = seconds_since(t0);
        t_decode = std::chrono::steady_clock::now();
      }
      res.output_ids.push_back(id);
      history.push_back(id);
      ++pos;
      if (on_token) on_token(id);
      if (std::find(opts.stop_ids.begin(), opts.stop_ids.end(), id) != opts.stop_ids.end()) {
        res.stop_reason = "eos";
        stop = true;
        break;
      }
      if (int64_t(res.output_ids.size()) == opts.max_new_tokens) {
        stop = true;
        break;
      }
      // Row i + 1 holds the position after drafts[i]: usable only if the
      // sample is that draft.
      if (i >= int64_t(drafts.size()) || id != drafts[size_t(i)]) break;
      ++accepted;
    }
    res.n_accepted += accepted;
    if (draft_model) draft_model->accepted(drafted_at, accepted);
    if (!drafts.empty()) {
      if (accepted == 0)
        draft_len = std::max<int64_t>(1, draft_len / 2);
      else if (accepted == int64_t(drafts.size()))
        draft_len = std::min(spec.num_tokens, draft_len + 1);
    }
    if (stop) break;
    if (pos >= ctx) {
      res.stop_reason = "context";
      break;
    }
    // The last token at pos - 1, then the drafts: each token forwarded needs
    // its row's sample to fit the context and the output budget.
    const int64_t room = std::min(ctx - pos, opts.max_new_tokens - int64_t(res.output_ids.size())) - 1;
    const int64_t k = std::min(draft_len, room);
    drafted_at = int64_t(history.size());
    if (draft_model) {
      const auto d = draft_model->propose(history, k);
      drafts.assign(d.begin(), d.end());
      // A draft vocabulary padded past the model's: such a token could
      // never be accepted (and has no embedding here).
      const auto out = std::find_if(drafts.begin(), drafts.end(), [&](int32_t t) { return t >= vocab; });
      drafts.erase(out, drafts.end());
    } else {
      drafts = prompt_lookup_draft(history, k, spec.ngram_max);
    }
    res.n_drafted += int64_t(drafts.size());
    tokens.assign(1, res.output_ids.back());
    tokens.insert(tokens.end(), drafts.begin(), drafts.end());
    rows = int64_t(tokens.size());
    kv_.reserve(blocks_, pos + rows - 1);
    logits_.resize(size_t(rows * vocab));
    BatchItem next{tokens, pos - 1, blocks_, rows > 1 ? LogitRows::All : LogitRows::Last};
    runner_.forward({&next, 1}, logits_.data());
    ++res.n_decode_steps;
  }
  res.decode_s = seconds_since(t_decode);
  if (draft_model) {
    res.draft_s = draft_model->seconds();
    draft_model->finish();
  }
  reset();
  return res;
}

void Generator::score(std::span<const int32_t> prompt, std::span<const int32_t> forced,
                      std::vector<float>& prompt_logits, std::vector<float>& step_logits) {
  const int64_t vocab = runner_.config().vocab_size;
  const int64_t n = int64_t(prompt.size());
  RINFER_CHECK(n > 0, "score: empty prompt");
  RINFER_CHECK(n + int64_t(forced.size()) <= context_limit(), "score: sequence longer than the context");
  reset();
  prompt_logits.resize(size_t(n * vocab));
  prefill(prompt, true, prompt_logits.data());
  step_logits.resize(forced.size() * size_t(vocab));
  for (size_t i = 0; i < forced.size(); ++i) {
    kv_.reserve(blocks_, n + int64_t(i) + 1);
    BatchItem next{forced.subspan(i, 1), n + int64_t(i), blocks_, LogitRows::Last};
    runner_.forward({&next, 1}, step_logits.data() + i * size_t(vocab));
  }
  reset();
}

}  // namespace rinfer
