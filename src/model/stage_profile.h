#pragma once
// Where a forward pass spends its time, by transformer stage (q/k/v
// projections, attention, gate/up, the output layer, ...), for
// `rinfer bench --profile`: which part of a decode step runs below the
// memory roofline, and which part is not a matmul at all.
//
// Off by default; then a scope costs one relaxed atomic load. On, it reads
// the (vDSO, TSC) clock twice per stage, about 12 stages per layer: a few
// microseconds per step, against milliseconds. Stages are timed on the
// thread that calls Model::forward (each stage's pool job runs inside its
// scope), and a forward call is filed under Prefill when any sequence of
// the batch brings more than one new token, else under Decode. Scopes do
// not nest: a block times its own parts (an MoE layer its router and its
// gather/scatter; the experts' matmuls count as gate/up and down).
#include <array>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/clock.h"
#include "core/thread_pool.h"

namespace rinfer::profile {

enum class Stage : uint8_t {
  Embed,      // token embedding lookup
  Norm,       // the pre-attention and pre-FFN norms
  Qkv,        // attention input projections (MLA: q_a/q_b/kv_a and the absorbed q)
  AttnPrep,   // q/k norms, RoPE, writing K/V into the cache
  Attention,  // scores, softmax and values over the cached context
  AttnOut,    // the output projection (MLA: the v expansion too)
  Residual,   // x += sub-layer output
  Router,     // MoE gate logits and top-k routing
  GateUp,     // FFN gate and up projections (dense and expert)
  Activation, // silu(gate) * up
  Down,       // FFN down projection (dense and expert)
  MoeCombine, // MoE: gathering expert inputs, weighting and summing outputs
  LmHead,     // final norm and the output layer
  kCount
};
const char* stage_name(Stage s);

enum class Phase : uint8_t { Prefill, Decode, kCount };
const char* phase_name(Phase p);

struct StageTotals {
  uint64_t ns = 0;
  uint64_t calls = 0;
  uint64_t bytes = 0;  // weight (and for Attention, KV cache) bytes the stage read
  uint64_t macs = 0;   // multiply-adds of the matmul kernels (ops::matmul_macs)
  // Thread time the stage kept busy, summed over the pool's threads: the
  // caller's time in the stage less its waits for the workers, plus the
  // workers' time in the stage's jobs (ThreadPool::Stats). Against
  // ns * threads: how much of the pool the stage used.
  uint64_t busy_ns = 0;
};
struct PhaseTotals {
  uint64_t forwards = 0;  // Model::forward calls
  uint64_t forward_ns = 0;
  // The collectives between tensor-parallel ranks (all-reduce, all-gather),
  // inside the stages above: their time (the wait for the slowest rank
  // included), count and bytes sent per rank.
  uint64_t comm_ns = 0, comm_calls = 0, comm_bytes = 0;
  std::array<StageTotals, size_t(Stage::kCount)> stages{};
};

void set_enabled(bool on);  // process-wide; also resets the totals
void set_recording(bool on);  // pause / resume without resetting them
inline std::atomic<bool> g_enabled{false};
inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void reset();
PhaseTotals totals(Phase p);

// The phase the scopes of the current forward call are filed under.
void set_phase(Phase p);
void add(Stage s, uint64_t ns, uint64_t bytes, uint64_t macs, uint64_t busy_ns);
uint64_t macs_now();  // ops::matmul_macs()
void add_forward(uint64_t ns);
void add_comm(uint64_t ns, uint64_t bytes);

// Times its lifetime as stage s, when profiling is on. `bytes`, what the
// stage reads, is a number or a callable returning it; a callable is only
// called when profiling is on, so the per-token path does not compute it.
class Scope {
 public:
  explicit Scope(Stage s) : Scope(s, uint64_t(0)) {}
  template <typename Bytes>
  Scope(Stage s, Bytes&& bytes) : s_(s) {
    if (!enabled()) return;
    if constexpr (std::is_invocable_v<Bytes>)
      bytes_ = uint64_t(bytes());
    else
      bytes_ = uint64_t(bytes);
    macs0_ = macs_now();
    pool0_ = ThreadPool::stats();
    t0_ = steady_now_ns();
  }
  ~Scope() {
    if (!t0_) return;
    const uint64_t ns = steady_now_ns() - t0_;
    const ThreadPool::Stats p = ThreadPool::stats();
    const uint64_t wait = p.caller_wait_ns - pool0_.caller_wait_ns;
    add(s_, ns, bytes_, macs_now() - macs0_, (ns > wait ? ns - wait : 0) + (p.worker_busy_ns - pool0_.worker_busy_ns));
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Stage s_;
  uint64_t bytes_ = 0, macs0_ = 0, t0_ = 0;
  ThreadPool::Stats pool0_;
};

// Times a collective (inside whatever stage scope is open) as communication.
class CommScope {
 public:
  explicit CommScope(uint64_t bytes) : bytes_(bytes), t0_(enabled() ? steady_now_ns() : 0) {}
  ~CommScope() {
    if (t0_) add_comm(steady_now_ns() - t0_, bytes_);
  }
  CommScope(const CommScope&) = delete;
  CommScope& operator=(const CommScope&) = delete;

 private:
  uint64_t bytes_, t0_;
};

// Times a whole forward call (the denominator of the stage shares).
class ForwardScope {
 public:
  explicit ForwardScope(Phase p) : t0_(enabled() ? steady_now_ns() : 0) {
    if (t0_) set_phase(p);
  }
  ~ForwardScope() {
    if (t0_) add_forward(steady_now_ns() - t0_);
  }
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

 private:
  uint64_t t0_;
};

}  // namespace rinfer::profile
