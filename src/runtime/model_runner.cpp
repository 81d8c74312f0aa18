#include "runtime/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "parallel/communicator.h"
#include "runtime/expert_rebalancer.h"

namespace rinfer {

namespace {
RunnerParallel tensor_parallel(Communicator* comm) {
  RunnerParallel p;
  p.world = p.tensor = comm;
  if (comm) p.layout = {comm->world(), 1, comm->rank()};
  return p;
}
}  // namespace

ModelRunner::ModelRunner(Model& model, const KVCacheOptions& kv, ThreadPool& pool, Communicator* comm)
    : ModelRunner(model, kv, pool, tensor_parallel(comm)) {}

ModelRunner::ModelRunner(Model& model, const KVCacheOptions& kv, ThreadPool& pool, const RunnerParallel& parallel)
    : model_(model), kv_(model.kv_shape(), kv), par_(parallel) {
  if (!par_.tensor) par_.tensor = par_.world;
  const ParallelLayout& L = par_.layout;
  const int world = par_.world ? par_.world->world() : 1;
  RINFER_CHECK(L.tp >= 1 && L.pp >= 1 && L.world() == world && L.rank == (par_.world ? par_.world->rank() : 0),
               "model runner: a layout of ", L.tp, " x ", L.pp, " ranks (rank ", L.rank, ") in a world of ", world);
  RINFER_CHECK(par_.micro_batches >= 1, "micro-batches must be >= 1, got ", par_.micro_batches);
  run_.exec.device = Device::Cpu;
  run_.exec.pool = &pool;
  run_.comm = par_.tensor;
  run_.expert_comm = par_.experts;
  stats_.busy_s.assign(size_t(L.pp), 0.0);
  if (world > 1 && par_.step_timeout_s > 0 && par_.on_hang)
    watchdog_ = std::make_unique<Watchdog>(par_.step_timeout_s, L.rank, par_.on_hang);
}

double PipelineStats::bubble_fraction() const {
  if (wall_s <= 0 || busy_s.empty()) return 0;
  double busy = 0;
  for (double b : busy_s) busy += b;
  return std::max(0.0, 1.0 - busy / (wall_s * double(busy_s.size())));
}

std::vector<std::pair<size_t, size_t>> ModelRunner::micro_batch_cuts(std::span<const BatchItem> batch, int n) {
  std::vector<std::pair<size_t, size_t>> cuts;
  const size_t items = batch.size();
  const size_t parts = std::min(items, size_t(std::max(1, n)));
  int64_t total = 0;
  for (const auto& item : batch) total += int64_t(item.tokens.size());
  size_t begin = 0;
  int64_t seen = 0;
  for (size_t k = 0; k < parts; ++k) {
    // Part k ends once the tokens so far reach (k + 1) / parts of them,
    // leaving a sequence for each part still to come.
    size_t end = begin;
    const int64_t goal = total * int64_t(k + 1) / int64_t(parts);
    do {
      seen += int64_t(batch[end].tokens.size());
      ++end;
    } while (end < items - (parts - k - 1) && seen < goal);
    if (k + 1 == parts) end = items;
    cuts.emplace_back(begin, end);
    begin = end;
  }
  return cuts;
}

namespace {
// A step's watchdog is disarmed however the step ends (an error propagates
// out of it: the step is over either way).
struct DisarmAtEnd {
  Watchdog* w;
  ~DisarmAtEnd() {
    if (w) w->disarm();
  }
};

// What rank 0 tells the others, first of every message: [kind, items, payload].
enum : int64_t { kForward = 1, kStop = 2 };
}  // namespace

ModelRunner::~ModelRunner() {
  try {
    release_workers();
  } catch (...) {
    // Nothing to report to here; the job's launcher sees the other ranks end.
  }
}

bool ModelRunner::leader() const { return par_.layout.rank == 0; }

void ModelRunner::release_workers() {
  if (released_ || !par_.world || par_.world->world() == 1 || !leader()) return;
  released_ = true;
  send(kStop, {});
}

// Payload: per item [tokens, start_pos, logit rows, table length], then every
// item's token ids and block table, one int64 each.
void ModelRunner::send(int64_t kind, std::span<const BatchItem> batch) {
  msg_.clear();
  for (const auto& item : batch)
    msg_.insert(msg_.end(), {int64_t(item.tokens.size()), item.start_pos, int64_t(item.logits),
                             int64_t(item.block_table.size())});
  for (const auto& item : batch) {
    msg_.insert(msg_.end(), item.tokens.begin(), item.tokens.end());
    msg_.insert(msg_.end(), item.block_table.begin(), item.block_table.end());
  }
  int64_t head[3] = {kind, int64_t(batch.size()), int64_t(msg_.size())};
  par_.world->broadcast(head, sizeof head, 0);
  if (!msg_.empty()) par_.world->broadcast(msg_.data(), int64_t(msg_.size() * sizeof(int64_t)), 0);
}

void ModelRunner::work() {
  if (leader()) return;
  for (;;) {
    int64_t head[3] = {0, 0, 0};
    par_.world->broadcast(head, sizeof head, 0);
    if (head[0] == kStop) return;
    if (watchdog_) watchdog_->arm();
    RINFER_CHECK(head[0] == kForward && head[1] >= 0 && head[2] >= 4 * head[1], "rank ", par_.layout.rank,
                 ": a malformed message from rank 0");
    msg_.resize(size_t(head[2]));
    par_.world->broadcast(msg_.data(), head[2] * int64_t(sizeof(int64_t)), 0);
    const size_t n = size_t(head[1]);
    ids_.resize(msg_.size() - 4 * n);
    for (size_t i = 4 * n; i < msg_.size(); ++i) ids_[i - 4 * n] = int32_t(msg_[i]);
    items_.resize(n);
    size_t at = 0;
    for (size_t b = 0; b < n; ++b) {
      const int64_t* d = msg_.data() + 4 * b;
      items_[b].tokens = std::span<const int32_t>(ids_.data() + at, size_t(d[0]));
      at += size_t(d[0]);
      items_[b].start_pos = d[1];
      items_[b].logits = LogitRows(d[2]);
      items_[b].block_table = std::span<const int32_t>(ids_.data() + at, size_t(d[3]));
      at += size_t(d[3]);
    }
    logits_.resize(size_t(Model::logit_rows(items_) * vocab_size()));
    run(items_, logits_.data());
  }
}

void ModelRunner::forward(std::span<const BatchItem> batch, float* logits) {
  const bool split = par_.world && par_.world->world() > 1;
  if (split) {
    RINFER_CHECK(leader(), "rank ", par_.layout.rank, " runs rank 0's batches (work()), it is not driven itself");
    if (watchdog_) watchdog_->arm();
  }
  const DisarmAtEnd disarm{watchdog_.get()};
  if (split) send(kForward, batch);
  run(batch, logits);
}

void ModelRunner::run(std::span<const BatchItem> batch, float* logits) {
  const DisarmAtEnd disarm{watchdog_.get()};
  if (par_.layout.pp == 1)
    model_.forward(batch, kv_.view(), logits, run_);
  else
    run_pipeline(batch, logits);
  if (par_.rebalancer) par_.rebalancer->after_step(model_);
}

// Messages between stages: a micro-batch's hidden states [tokens, hidden]
// (or, to rank 0, its logits [rows, vocab]), then one float per stage: its
// compute seconds in this step so far.
void ModelRunner::run_pipeline(std::span<const BatchItem> batch, float* logits) {
  using clock = std::chrono::steady_clock;
  const auto step_start = clock::now();
  const ParallelLayout& L = par_.layout;
  const int P = L.pp, s = L.stage();
  const int64_t H = config().hidden_size, V = vocab_size();
  Communicator& world = *par_.world;
  const auto cuts = micro_batch_cuts(batch, par_.micro_batches);
  std::vector<float> busy(size_t(P), 0.0f);
  double mine = 0;
  int64_t row = 0;  // of rank 0's logits
  for (const auto& [b0, b1] : cuts) {
    const auto mb = batch.subspan(b0, b1 - b0);
    int64_t T = 0;
    for (const auto& item : mb) T += int64_t(item.tokens.size());
    const int64_t rows = Model::logit_rows(mb);
    RunContext rc = run_;
    if (!L.first_stage()) {
      stage_in_.resize(size_t(T * H + P));
      world.recv(stage_in_.data(), int64_t(stage_in_.size() * sizeof(float)), L.prev_rank());
      std::copy(stage_in_.end() - P, stage_in_.end(), busy.begin());
      rc.stage_input = stage_in_.data();
    }
    float* out = nullptr;
    if (!L.last_stage()) {
      stage_out_.resize(size_t(T * H + P));
      rc.stage_output = stage_out_.data();
    } else if (leader()) {
      out = logits + row * V;
    } else {
      stage_logits_.resize(size_t(rows * V + P));
      out = stage_logits_.data();
    }
    const auto t0 = clock::now();
    model_.forward(mb, kv_.view(), out, rc);
    mine += std::chrono::duration<double>(clock::now() - t0).count();
    busy[size_t(s)] = float(mine);
    if (!L.last_stage()) {
      std::copy(busy.begin(), busy.end(), stage_out_.end() - P);
      world.send(stage_out_.data(), int64_t(stage_out_.size() * sizeof(float)), L.next_rank());
    } else if (!leader() && L.stage_leader()) {
      std::copy(busy.begin(), busy.end(), stage_logits_.end() - P);
      world.send(stage_logits_.data(), int64_t(stage_logits_.size() * sizeof(float)), 0);
    }
    row += rows;
  }
  if (!leader()) return;
  // Rank 0: the logits come back from the last stage, micro-batch by
  // micro-batch, after it has sent them all on.
  row = 0;
  for (const auto& [b0, b1] : cuts) {
    const int64_t rows = Model::logit_rows(batch.subspan(b0, b1 - b0));
    stage_logits_.resize(size_t(rows * V + P));
    world.recv(stage_logits_.data(), int64_t(stage_logits_.size() * sizeof(float)), L.logits_rank());
    std::copy(stage_logits_.begin(), stage_logits_.begin() + rows * V, logits + row * V);
    std::copy(stage_logits_.end() - P, stage_logits_.end(), busy.begin());
    row += rows;
  }
  busy[0] = float(mine);
  ++stats_.steps;
  stats_.wall_s += std::chrono::duration<double>(clock::now() - step_start).count();
  for (int i = 0; i < P; ++i) stats_.busy_s[size_t(i)] += busy[size_t(i)];
}

namespace {
[[noreturn]] void non_finite_logits(const std::string& what) {
  fail("the model computed a non-finite logit (", what, "): its weights or activations are not finite");
}
}  // namespace

void ModelRunner::distribution(float* logits, Sampler& sampler, std::span<const int32_t> history,
                               std::vector<float>& probs) {
  sampler.distribution(logits, vocab_size(), history, probs);
  double sum = 0;
  for (float p : probs) sum += p;
  if (!std::isfinite(sum) || !(sum > 0)) non_finite_logits("no distribution could be formed");
}

SampledToken ModelRunner::sample(float* logits, Sampler& sampler, std::span<const int32_t> history, int top_logprobs) {
  const int64_t V = vocab_size();
  // NaN or +inf logits (non-finite weights, an overflow) sample no token or
  // one whose logit is not a number; checked on the sampled token only, not
  // over the vocabulary each step (-inf is a masked token, never sampled).
  auto checked = [&](int32_t id) {
    if (id < 0 || !(logits[id] < INFINITY))
      non_finite_logits(id < 0 ? str("no token could be sampled") : str(logits[id], " for token ", id));
    return id;
  };
  SampledToken out;
  if (top_logprobs < 0) {
    out.id = checked(sampler.sample(logits, V, history));
    return out;
  }
  // Logprobs of the model's own distribution, before the sampler's penalty
  // and temperature change the logits in place.
  scratch_.assign(logits, logits + V);
  const float mx = *std::max_element(scratch_.begin(), scratch_.end());
  double sum = 0;
  for (float l : scratch_) sum += std::exp(double(l - mx));
  const float lse = mx + float(std::log(sum));
  idx_.resize(size_t(V));
  std::iota(idx_.begin(), idx_.end(), 0);
  const auto k = std::min<int64_t>(top_logprobs, V);
  std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), [&](int32_t a, int32_t b) {
    return scratch_[size_t(a)] > scratch_[size_t(b)] || (scratch_[size_t(a)] == scratch_[size_t(b)] && a < b);
  });
  for (int64_t j = 0; j < k; ++j) out.top.push_back({idx_[size_t(j)], scratch_[size_t(idx_[size_t(j)])] - lse});
  out.id = checked(sampler.sample(logits, V, history));
  out.logprob = scratch_[size_t(out.id)] - lse;
  return out;
}

}  // namespace rinfer
