#include "runtime/engine.h"

#include <algorithm>

#include "runtime/expert_rebalancer.h"

namespace rinfer {

namespace {
double seconds(Sequence::Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

Engine::Engine(ModelRunner& runner, const EngineOptions& opts)
    : runner_(runner),
      opts_(opts),
      blocks_(runner.kv(), opts.prefix_caching),
      scheduler_(opts.scheduler, blocks_) {
  RINFER_CHECK(opts.max_model_len >= 0, "--max-model-len must be >= 0, got ", opts.max_model_len);
  RINFER_CHECK(opts.max_waiting >= 1, "the waiting queue must hold at least one request");
  // A sequence must fit the pool alone, or the schedulers could wait forever
  // for blocks that can never be free.
  const KVCache& kv = runner.kv();
  max_model_len_ = std::min(runner.config().max_position_embeddings, kv.capacity_tokens());
  if (opts.max_model_len > 0) max_model_len_ = std::min(max_model_len_, opts.max_model_len);
  vocab_ = runner.vocab_size();
  counters_.kv_blocks_total = published_.kv_blocks_total = kv.n_blocks();
  counters_.block_size = published_.block_size = kv.block_size();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Engine::check(const GenerationRequest& req) const {
  RINFER_CHECK(!req.prompt.empty(), "the prompt is empty");
  for (int32_t id : req.prompt)
    RINFER_CHECK(id >= 0 && id < vocab_, "token id ", id, " is outside the vocabulary [0, ", vocab_, ")");
  RINFER_CHECK(int64_t(req.prompt.size()) < max_model_len_, "the prompt has ", req.prompt.size(),
               " tokens; with max_model_len ", max_model_len_, " it may have at most ", max_model_len_ - 1);
  RINFER_CHECK(req.max_new_tokens >= 1, "max_tokens must be >= 1, got ", req.max_new_tokens);
  RINFER_CHECK(req.top_logprobs >= -1 && req.top_logprobs <= 20, "top logprobs must be in [0, 20], got ",
               req.top_logprobs);
  req.sampling.validate();
}

int64_t Engine::submit(GenerationRequest req, EventCallback on_event) {
  check(req);
  auto seq = std::make_unique<Sequence>();
  seq->priority = req.priority;
  seq->n_prompt = int64_t(req.prompt.size());
  seq->max_len = std::min(max_model_len_, seq->n_prompt + req.max_new_tokens);
  seq->tokens = std::move(req.prompt);
  seq->stop_ids = std::move(req.stop_ids);
  seq->sampler = std::make_unique<Sampler>(req.sampling);
  seq->top_logprobs = req.top_logprobs;
  seq->reserve_full = opts_.scheduler.policy != SchedulerPolicy::Preemption;
  seq->submitted = Sequence::Clock::now();
  int64_t id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (int64_t(inbox_.size()) + published_.n_waiting >= opts_.max_waiting)
      throw QueueFullError(str("the engine queue is full (", opts_.max_waiting, " requests waiting)"));
    id = next_id_++;
    seq->id = id;
    seq->arrival = next_arrival_++;
    inbox_.push_back({std::move(seq), std::move(on_event)});
  }
  cv_.notify_all();
  return id;
}

void Engine::cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return published_;
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || scheduler_.has_work(); });
      if (stop_) break;
    }
    take_inbox();
    const bool progressed = scheduler_.has_work() && step();
    publish_stats();
    if (!progressed && scheduler_.has_work()) {
      // Nothing fits this instant (cannot last: a lone sequence always
      // fits); do not spin while waiting for a cancellation to free blocks.
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(5));
    }
  }
  // Shutting down: everyone still here learns that their request ended.
  take_inbox();
  std::vector<int64_t> ids;
  for (auto& [id, live] : live_) ids.push_back(id);
  for (int64_t id : ids) finish(id, FinishReason::Cancelled);
  publish_stats();
}

void Engine::take_inbox() {
  std::deque<Live> inbox;
  std::vector<int64_t> cancels;
  {
    std::lock_guard<std::mutex> lk(mu_);
    inbox.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& live : inbox) {
    Sequence* seq = live.seq.get();
    live_.emplace(seq->id, std::move(live));
    scheduler_.add(seq);
  }
  for (int64_t id : cancels)
    if (live_.count(id)) finish(id, FinishReason::Cancelled);
}

bool Engine::step() {
  Schedule s = scheduler_.schedule();
  if (s.empty()) return false;
  batch_.clear();
  size_t rows = 0;
  for (const auto& c : s.chunks) {
    Sequence& seq = *c.seq;
    if (c.n_drafts > 0) {
      // The last token and its drafts: a row of logits for each.
      batch_.push_back({seq.verify_tokens, seq.n_computed, seq.block_table, LogitRows::All});
      rows += size_t(c.n_tokens);
      continue;
    }
    // A prompt chunk that does not reach the end samples nothing: no logits row.
    batch_.push_back({std::span<const int32_t>(seq.tokens).subspan(size_t(seq.n_computed), size_t(c.n_tokens)),
                      seq.n_computed, seq.block_table, c.samples() ? LogitRows::Last : LogitRows::None});
    rows += c.samples();
  }
  logits_.resize(rows * size_t(vocab_));
  try {
    runner_.forward(batch_, logits_.data());
  } catch (const std::exception& e) {
    // Not a request's fault that can be told apart: fail the whole batch
    // rather than retry it forever.
    for (const auto& c : s.chunks) finish(c.seq->id, FinishReason::Error, e.what());
    return true;
  }
  ++counters_.steps_total;
  size_t row = 0;  // logits rows: one per sampling chunk (1 + drafts when verifying), in batch order
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    Sequence& seq = *s.chunks[i].seq;
    if (s.chunks[i].n_drafts > 0) {
      verify(seq, s.chunks[i].n_drafts, logits_.data() + row * size_t(vocab_));
      row += size_t(s.chunks[i].n_tokens);
      continue;
    }
    const bool samples = s.chunks[i].samples();
    const int64_t begin = seq.n_computed, end = begin + s.chunks[i].n_tokens;
    counters_.prompt_tokens_total += std::max<int64_t>(0, std::min(end, seq.n_prompt) - begin);
    seq.n_computed = end;
    blocks_.register_computed(seq);
    if (samples) sample(seq, logits_.data() + row++ * size_t(vocab_));
  }
  return true;
}

// Rows 0..n_drafts of `logits` follow the last token and each draft. As in
// the Generator, every row is sampled as plain decoding would, one sampler
// draw per token, while the samples equal the drafts: the output is the one
// without speculation. An accepted draft's K/V (written by this forward) are
// valid; a rejected one's are overwritten by later steps.
void Engine::verify(Sequence& seq, int64_t n_drafts, float* logits) {
  const std::vector<int32_t> drafts(seq.verify_tokens.begin() + 1, seq.verify_tokens.end());
  const int64_t id = seq.id;
  seq.n_computed += 1;
  blocks_.register_computed(seq);
  int64_t accepted = 0;
  for (int64_t i = 0; i <= n_drafts; ++i) {
    const bool alive = sample(seq, logits + i * size_t(vocab_));
    const bool hit = i < n_drafts && alive && seq.tokens.back() == drafts[size_t(i)];
    if (!hit) break;
    ++accepted;
    seq.n_computed += 1;
    blocks_.register_computed(seq);
  }
  counters_.spec_draft_tokens_total += n_drafts;
  counters_.spec_accepted_tokens_total += accepted;
  if (!live_.count(id)) return;  // finished: seq is gone
  seq.n_drafted += n_drafts;
  seq.n_accepted += accepted;
  // Back off after a full miss, grow after a full hit.
  const int64_t most = opts_.scheduler.speculative.num_tokens;
  if (accepted == 0)
    seq.draft_len = std::max<int64_t>(1, seq.draft_len / 2);
  else if (accepted == n_drafts)
    seq.draft_len = std::min(most, seq.draft_len + 1);
}

bool Engine::sample(Sequence& seq, float* logits) {
  GenerationEvent ev;
  SampledToken t = runner_.sample(logits, *seq.sampler, seq.tokens, seq.top_logprobs);
  ev.token = t.id;
  ev.logprob = t.logprob;
  ev.top_logprobs = std::move(t.top);
  seq.tokens.push_back(ev.token);
  ++counters_.generation_tokens_total;
  if (seq.n_generated() == 1) seq.first_token = Sequence::Clock::now();
  FinishReason reason = FinishReason::None;
  if (std::find(seq.stop_ids.begin(), seq.stop_ids.end(), ev.token) != seq.stop_ids.end())
    reason = FinishReason::Stop;
  else if (seq.n_tokens() >= seq.max_len)
    reason = FinishReason::Length;
  if (reason == FinishReason::None) {
    ev.request_id = seq.id;
    emit(live_.at(seq.id), ev);
    return true;
  } else {
    // The last token travels with the finish event.
    auto it = live_.find(seq.id);
    Live live = std::move(it->second);
    live_.erase(it);
    scheduler_.finish(live.seq.get());
    ev.request_id = seq.id;
    ev.finished = true;
    ev.finish_reason = reason;
    emit(live, ev);
    return false;
  }
}

void Engine::finish(int64_t id, FinishReason reason, const std::string& error) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  Live live = std::move(it->second);
  live_.erase(it);
  scheduler_.finish(live.seq.get());
  GenerationEvent ev;
  ev.request_id = id;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  emit(live, ev);
}

void Engine::emit(Live& live, GenerationEvent& ev) {
  const Sequence& seq = *live.seq;
  if (ev.finished) {
    ++counters_.requests_finished;
    ev.n_prompt = seq.n_prompt;
    ev.n_generated = seq.n_generated();
    ev.n_cached_prompt = seq.n_cached_prompt;
    ev.n_preemptions = seq.n_preemptions;
    ev.ttft_s = seq.n_generated() > 0 ? seconds(seq.first_token - seq.submitted) : 0;
    ev.e2e_s = seconds(Sequence::Clock::now() - seq.submitted);
  }
  if (!live.on_event) return;
  try {
    live.on_event(ev);
  } catch (...) {
    // A callback has no one to report to here; the engine must keep going.
  }
}

void Engine::publish_stats() {
  EngineStats s = counters_;
  s.n_running = scheduler_.n_running();
  s.n_waiting = scheduler_.n_waiting();
  s.kv_blocks_used = blocks_.n_used();
  s.kv_blocks_cached = blocks_.n_cached_unused();
  s.preemptions_total = scheduler_.n_preemptions();
  s.prefix_queried_tokens = scheduler_.prefix_queried_tokens();
  s.prefix_hit_tokens = scheduler_.prefix_hit_tokens();
  s.pipeline_stages = runner_.layout().pp;
  s.micro_batches = runner_.micro_batches();
  const PipelineStats& ps = runner_.pipeline_stats();
  s.pipeline_wall_s = ps.wall_s;
  for (double b : ps.busy_s) s.pipeline_busy_s += b;
  s.pipeline_bubble_fraction = ps.bubble_fraction();
  if (runner_.layout().ep > 1) s.expert_rank_tokens = runner_.model().expert_rank_tokens();
  if (opts_.expert_counts) s.expert_counts = runner_.model().expert_counts();
  if (const ExpertRebalancer* rb = runner_.rebalancer()) {
    s.rebalancing = true;
    s.expert_rebalances = rb->rebalances();
    s.experts_moved = rb->experts_moved();
    s.expert_window_balancedness = rb->window_balancedness();
  }
  std::lock_guard<std::mutex> lk(mu_);
  published_ = s;
}

}  // namespace rinfer
