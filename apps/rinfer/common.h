#pragma once
// Shared pieces of the rinfer subcommands: runtime options, opening a model
// with its KV cache, thread pool and tokenizer, small parsers.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/thread_pool.h"
#include "runtime/draft_model.h"
#include "runtime/expert_rebalancer.h"
#include "runtime/generator.h"
#include "runtime/kv_cache.h"
#include "loading/model_loader.h"
#include "parallel/communicator.h"
#include "tokenizer/tokenizer.h"

namespace rinfer::cli {

struct RuntimeOptions {
  int threads = 0;              // 0: all cores
  int64_t kv_cache_tokens = 0;  // 0: min(max_position_embeddings, 4096)
  std::string kv_cache_dtype = "auto";
  int block_size = 16;
  std::string dtype = "auto";   // HF directories: convert to this in memory (f32|f16|bf16|int8|int4)
  int64_t group_size = 0;       // HF directories with int8/int4: quantization group (0: default)
  std::string lm_head;          // HF directories with int8/int4: "int8"|"int4" quantizes lm_head too (convert --lm-head)
  std::string weights = "copy";
  int64_t prefill_chunk = Generator::kDefaultPrefillChunk;  // prompt tokens per forward call (0: all)
  int tp = 1;  // tensor-parallel ranks per pipeline stage (under mpirun)
  int pp = 1;  // pipeline stages (under mpirun)
  int ep = 1;  // expert-parallel ranks (under mpirun)
  std::string expert_placement;  // with --ep: rinfer plan-experts' file ("" : experts in contiguous ranges)
  int redundant_experts = 0;     // with --ep and no placement file: replicas per MoE layer
  int64_t rebalance_every = 0;   // with --ep: plan the experts again every this many steps (0: never)
  bool expert_stats = false;     // run|serve --expert-stats (set by the command)
  int micro_batches = 1;  // serve with pipeline stages: micro-batches per step
  double step_timeout_s = 300;  // several ranks: a step longer than this ends the job
};

void add_runtime_options(CLI::App* cmd, RuntimeOptions& o);
// --prefill-chunk, for the commands that run a Generator (run, bench,
// validate); serve has its per-step token budget (--max-batch-tokens).
void add_prefill_chunk_option(CLI::App* cmd, RuntimeOptions& o);
// The whole file an option names; "OPTION: cannot read PATH" when it cannot.
std::string read_file(const std::string& path, const char* option);

// --speculative ngram|draft, --draft-model, --draft-dtype,
// --num-speculative-tokens, --ngram-max (run, bench; serve: ngram only).
struct SpeculativeCli {
  std::string mode;  // empty: off
  std::string draft_model;
  std::string draft_dtype;  // HF draft directories: as --dtype (empty: the model's --dtype)
  int64_t num_tokens = 3, ngram_max = 3;
  SpeculativeOptions options() const;  // without the draft model (open_draft)
};
void add_speculative_options(CLI::App* cmd, SpeculativeCli& o);

// Option checks with plain one-line messages ("must be an integer >= 0, got
// \"-3\""). CLI11's NonNegativeNumber & co. print their bound as a 300-digit
// number, call "abc" out of range, and let nan and integer overflow through.
CLI::Validator integer_in(int64_t min, int64_t max = INT64_MAX);
CLI::Validator number_in(double min, double max, bool min_exclusive = false);

struct Session {
  KVCache& kv() { return runner->kv(); }
  std::unique_ptr<Communicator> stage_comm;  // a pipeline stage's tensor-parallel ranks (--tp and --pp, or --ep)
  std::unique_ptr<Communicator> expert_comm;  // --ep with --tp/--pp: a stage's ranks that hold the same width part
  std::unique_ptr<ExpertRebalancer> rebalancer;  // --rebalance-every
  std::unique_ptr<ThreadPool> pool;
  LoadedModel lm;
  std::unique_ptr<ModelRunner> runner;  // runs lm.model on pool, with its KV cache
  std::unique_ptr<Tokenizer> tokenizer;  // null when the model has none and none was needed
};

// With --tp T and --pp P (under mpirun -np T*P) every rank loads its shard
// (parallel/layout.h); rank 0 returns the session the command drives, the
// other ranks serve rank 0's batches inside this call and then end the
// process (exit 0). Before loading, the ranks check that they see the same
// model (a missing directory or another model_desc.json on some rank is an
// error on rank 0).
// kv_tokens, when given, sizes the KV cache (in tokens) from the loaded model
// and the cache dtype instead of --kv-cache-tokens; with several ranks rank
// 0's answer holds for all (their block ids must match).
using KvSizer = std::function<int64_t(const LoadedModel& lm, DType kv_dtype)>;
std::unique_ptr<Session> open_session(const std::string& model_path, const RuntimeOptions& o, bool need_tokenizer,
                                      const KvSizer& kv_tokens = {});

// The draft model of --speculative draft, on the target's threads.
struct DraftSession {
  LoadedModel lm;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<DraftModel> model;
};
// Null without --speculative draft; checks --draft-model's tokenizer against
// the target's (which must be loaded).
std::unique_ptr<DraftSession> open_draft(const SpeculativeCli& spec, const RuntimeOptions& o, Session& target);

// Weights that hold NaN or infinity (WeightStore::non_finite_tensors):
// fatal, a one-line error naming them; otherwise a warning on stderr.
void check_weights_finite(const Session& s, bool fatal);

// rinfer run|serve --expert-stats: per MoE layer, the tokens routed to
// each expert (what rinfer plan-experts reads), written atomically.
void write_expert_stats_file(const std::string& path, const Session& s,
                             const std::vector<std::vector<uint64_t>>& counts);

// ", tp 2 x pp 2 ranks, 4 micro-batches" for a split model; "" for one process.
std::string parallel_summary(const RuntimeOptions& o);

// "int8" for DType::I8 (the --kv-cache-dtype spelling), else dtype_user_name.
std::string kv_dtype_name(DType dt);

// "1,415,2501" -> ids; errors on anything else.
std::vector<int32_t> parse_ids(const std::string& s);

}  // namespace rinfer::cli
