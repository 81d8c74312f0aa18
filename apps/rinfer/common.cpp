#include "common.h"

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "parallel/mpi.h"

namespace rinfer::cli {

CLI::Validator integer_in(int64_t min, int64_t max) {
  const std::string range =
      max == INT64_MAX ? str("an integer >= ", min) : str("an integer in [", min, ", ", max, "]");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || v < min || v > max)
          return str("must be ", range, ", got \"", s, "\"");
        return "";
      },
      max == INT64_MAX ? str(">= ", min) : str("in [", min, ", ", max, "]"));
}

CLI::Validator number_in(double min, double max, bool min_exclusive) {
  const std::string range = std::isinf(max) ? str(min_exclusive ? "> " : ">= ", min)
                                            : str("in ", min_exclusive ? "(" : "[", min, ", ", max, "]");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
        const bool ok = !s.empty() && end == s.c_str() + s.size() && std::isfinite(v) &&
                        (min_exclusive ? v > min : v >= min) && v <= max;
        if (!ok) return str("must be a number ", range, ", got \"", s, "\"");
        // The options are floats or doubles; none is meant to be this large,
        // and a float would hold it as inf.
        if (std::fabs(v) > double(FLT_MAX)) return str("must be at most ", double(FLT_MAX), ", got \"", s, "\"");
        return "";
      },
      range);
}

void add_runtime_options(CLI::App* cmd, RuntimeOptions& o) {
  // More threads than hardware threads only make the workers wait on each
  // other (a decode step is hundreds of short parallel jobs).
  const int hw = ThreadPool::hardware_threads();
  cmd->add_option("--threads", o.threads, str("Threads, at most ", hw, " here (default 0: all hardware threads)"))
      ->check(integer_in(0, hw));
  cmd->add_option("--kv-cache-tokens", o.kv_cache_tokens,
                  "KV cache capacity in tokens, preallocated (default: min(max positions, 4096))")
      ->check(integer_in(0));
  cmd->add_option("--kv-cache-dtype", o.kv_cache_dtype,
                  "KV cache dtype: auto (follows the weights; bf16 for int8/int4 weights), f32, f16, bf16, int8 "
                  "(per-token, per-head scales; not for MLA models)")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16", "int8"}));
  cmd->add_option("--block-size", o.block_size, "KV cache block size in tokens")->check(integer_in(1, INT32_MAX));
  cmd->add_option("--dtype", o.dtype,
                  "For a Hugging Face --model: convert weights in memory to auto|f32|f16|bf16|int8|int4")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16", "int8", "int4"}));
  cmd->add_option("--group-size", o.group_size,
                  "For a Hugging Face --model with --dtype int8|int4: quantization group size 32|64|128 (default: 128 "
                  "int8, 32 int4)")
      ->check(CLI::IsMember({"32", "64", "128"}));
  cmd->add_option("--lm-head", o.lm_head,
                  "For a Hugging Face --model with --dtype int8|int4: quantize the output layer too, int8|int4 (as "
                  "convert --lm-head)")
      ->check(CLI::IsMember({"int8", "int4"}));
  cmd->add_option("--tp", o.tp,
                  "Tensor-parallel ranks: run under mpirun -np TP*PP, each rank holding its shard of every layer "
                  "of its stage (heads, MLP width, vocabulary); default 1")
      ->check(integer_in(1, 1024));
  cmd->add_option("--pp", o.pp,
                  "Pipeline stages: run under mpirun -np TP*PP, each stage holding a contiguous range of the "
                  "layers (balanced by weights); default 1")
      ->check(integer_in(1, 1024));
  cmd->add_option("--ep", o.ep,
                  "Expert-parallel ranks: run under mpirun -np EP, each rank holding its share of every MoE "
                  "layer's experts (the rest of the model on every rank); default 1")
      ->check(integer_in(1, 1024));
  cmd->add_option("--expert-placement", o.expert_placement,
                  "With --ep: which rank holds which experts (rinfer plan-experts --out); default: contiguous ranges");
  cmd->add_option("--redundant-experts", o.redundant_experts,
                  "With --ep and no --expert-placement: this many extra physical experts (replicas) per MoE layer, "
                  "over all ranks; default 0")
      ->check(integer_in(0, 1 << 20));
  cmd->add_option("--rebalance-every", o.rebalance_every,
                  "With --ep: every this many forward steps, plan each MoE layer's experts again from recent loads "
                  "and move the experts that change rank (without replicas the outputs do not change); 0: never "
                  "(default)")
      ->check(integer_in(0));
  cmd->add_option("--step-timeout", o.step_timeout_s,
                  "Under mpirun: end every rank when one forward step takes longer than this many seconds (a rank "
                  "stopped answering); 0: wait forever (default 300)")
      ->check(number_in(0, 1e9));
  cmd->add_option("--weights", o.weights,
                  "copy: read weights into anonymous memory (fast decode, default); mmap: map the files")
      ->check(CLI::IsMember({"copy", "mmap"}));
}

void add_prefill_chunk_option(CLI::App* cmd, RuntimeOptions& o) {
  cmd->add_option("--prefill-chunk", o.prefill_chunk,
                  str("Prompt tokens per forward pass: longer prompts are prefilled in chunks, which bounds the "
                      "activation memory (default ", Generator::kDefaultPrefillChunk, "; 0: the whole prompt at once)"))
      ->check(integer_in(0));
}

std::string read_file(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  RINFER_CHECK(in, option, ": cannot read ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  RINFER_CHECK(!in.bad(), option, ": cannot read ", path);
  return ss.str();
}

void add_speculative_options(CLI::App* cmd, SpeculativeCli& o) {
  cmd->add_option("--speculative", o.mode,
                  "Speculative decoding: ngram (drafts from earlier text of the sequence, i.e. prompt lookup) or "
                  "draft (drafts from --draft-model); greedy output is the one without it, sampled output has its "
                  "distribution")
      ->check(CLI::IsMember({"ngram", "draft"}));
  cmd->add_option("--draft-model", o.draft_model,
                  "With --speculative draft: a smaller model with the same tokenizer (rinfer or HF directory; loaded "
                  "with --dtype as the model unless --draft-dtype says otherwise)");
  cmd->add_option("--draft-dtype", o.draft_dtype,
                  "HF --draft-model directories: convert it to this in memory (f32|f16|bf16|int8|int4)");
  cmd->add_option("--num-speculative-tokens", o.num_tokens,
                  "With --speculative: tokens drafted per step at most (default 3; up to 3 the logits are bitwise "
                  "those without speculation)")
      ->check(integer_in(1, 16));
  cmd->add_option("--ngram-max", o.ngram_max, "With --speculative ngram: longest n-gram looked up (default 3)")
      ->check(integer_in(1, 64));
}

SpeculativeOptions SpeculativeCli::options() const {
  SpeculativeOptions s;
  s.num_tokens = mode.empty() ? 0 : num_tokens;
  s.ngram_max = ngram_max;
  return s;
}

namespace {

[[noreturn]] void end_hung_job(int rank, double limit_s) {
  std::fprintf(stderr,
               "rinfer: error: rank %d: a forward step took longer than %g s (--step-timeout); a rank stopped "
               "answering, ending the job\n",
               rank, limit_s);
  std::fflush(stderr);
  mpi::abort_job(1);
}

// 64-bit FNV-1a of a file's bytes; 0 when it cannot be read.
uint64_t file_fingerprint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return 0;
  uint64_t h = 1469598103934665603ull;
  char buf[1 << 16];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    for (std::streamsize i = 0; i < f.gcount(); ++i) h = (h ^ uint8_t(buf[i])) * 1099511628211ull;
    if (!f) break;
  }
  return h == 0 ? 1 : h;
}

// Every rank must load the same model: rank 0 collects each rank's
// fingerprint of its description (model_desc.json, or an HF config.json)
// and names the first rank that differs; the others then end quietly.
void check_same_model(const std::string& path, Communicator& world) {
  namespace fs = std::filesystem;
  uint64_t mine = 0;
  if (fs::is_directory(path)) {
    const fs::path desc = fs::path(path) / kModelDescFile;
    mine = file_fingerprint((fs::exists(desc) ? desc : fs::path(path) / "config.json").string());
  }
  int64_t verdict = 0;  // 0: all agree; r + 1: rank r sees another model (or none)
  std::string why;
  if (world.rank() == 0) {
    for (int r = 1; r < world.world() && verdict == 0; ++r) {
      uint64_t theirs = 0;
      world.recv(&theirs, sizeof theirs, r);
      if (theirs == mine) continue;
      verdict = r + 1;
      why = theirs == 0 ? str("rank ", r, " has no model at ", path)
                        : str("rank ", r, " sees another model at ", path, " than rank 0 (", kModelDescFile,
                              " or config.json differs)");
    }
    if (verdict == 0 && mine == 0) {
      verdict = 1;
      why = str("rank 0 has no model at ", path);
    }
  } else {
    world.send(&mine, sizeof mine, 0);
  }
  world.broadcast(&verdict, sizeof verdict, 0);
  if (verdict == 0) return;
  if (world.rank() != 0) {
    std::fflush(stdout);
    std::exit(1);
  }
  fail(why);
}

// --dtype, --group-size, --lm-head, --weights.
void set_weight_options(const RuntimeOptions& o, LoadOptions& lo) {
  if (o.dtype != "auto") {
    const auto wf = parse_weight_format(o.dtype);
    RINFER_CHECK(wf.has_value(), "unknown --dtype ", o.dtype);
    if (wf->quant)
      lo.quant = wf->quant;
    else
      lo.dtype = wf->dtype;
  }
  RINFER_CHECK(o.group_size == 0 || lo.quant.has_value(), "--group-size needs --dtype int8 or int4");
  lo.group_size = o.group_size;
  if (!o.lm_head.empty()) {
    RINFER_CHECK(lo.quant.has_value(), "--lm-head needs --dtype int8 or int4");
    lo.lm_head_quant = parse_weight_format(o.lm_head)->quant;
  }
  lo.mode = o.weights == "mmap" ? WeightLoadMode::Mmap : WeightLoadMode::Copy;
}

KVCacheOptions kv_options(const RuntimeOptions& o, DType model_dtype, int64_t tokens) {
  KVCacheOptions ko;
  ko.block_size = o.block_size;
  ko.dtype = o.kv_cache_dtype == "auto"   ? model_dtype
             : o.kv_cache_dtype == "int8" ? DType::I8
                                          : *dtype_from_user_name(o.kv_cache_dtype);
  ko.n_blocks = KVCache::blocks_for_tokens(tokens, o.block_size);
  return ko;
}

}  // namespace

std::unique_ptr<Session> open_session(const std::string& model_path, const RuntimeOptions& o, bool need_tokenizer,
                                      const KvSizer& kv_tokens) {
  auto s = std::make_unique<Session>();
  Communicator* comm = nullptr;
  RunnerParallel par;
  LoadOptions lo;
  int threads = o.threads;
  const int ranks = o.tp * o.pp * o.ep;
  RINFER_CHECK(o.expert_placement.empty() || o.ep > 1, "--expert-placement needs --ep");
  RINFER_CHECK(o.redundant_experts == 0 || o.ep > 1, "--redundant-experts needs --ep");
  RINFER_CHECK(o.redundant_experts == 0 || o.expert_placement.empty(),
               "--redundant-experts with --expert-placement: the placement file already says how many replicas");
  RINFER_CHECK(o.rebalance_every == 0 || o.ep > 1, "--rebalance-every needs --ep");
  RINFER_CHECK(!o.expert_stats || o.pp == 1, "--expert-stats with --pp: rank 0 holds only the first stage's layers "
                                             "(collect the loads without --pp)");
  if (ranks > 1 || mpi::env_world_size() > 1) {
    const std::string layout = o.ep > 1    ? (o.tp * o.pp > 1 ? str(o.tp > 1 ? str("--tp ", o.tp, " ") : "",
                                                                    o.pp > 1 ? str("--pp ", o.pp, " ") : "", "--ep ",
                                                                    o.ep, " (", ranks, " ranks)")
                                                              : str("--ep ", o.ep))
                               : o.pp == 1 ? str("--tp ", o.tp)
                               : o.tp == 1 ? str("--pp ", o.pp)
                                           : str("--tp ", o.tp, " --pp ", o.pp, " (", ranks, " ranks)");
    RINFER_CHECK(mpi::launched(), layout, " needs mpirun -np ", ranks, " (it runs one rank per process)");
    RINFER_CHECK(mpi::env_world_size() == ranks, layout, " but mpirun started ", mpi::env_world_size(),
                 " ranks (run mpirun -np ", ranks, ")");
    comm = &mpi::world();
    check_same_model(model_path, *comm);
    par.world = comm;
    par.layout = {o.tp, o.pp, comm->rank(), o.ep};
    par.micro_batches = o.micro_batches;
    par.step_timeout_s = o.step_timeout_s;
    par.on_hang = end_hung_job;
    // A stage's tensor-parallel ranks reduce among themselves only; the
    // expert-parallel ranks gather their MoE layers' outputs.
    if (o.ep > 1 && o.tp * o.pp > 1) {
      // Within a stage, ranks with the same expert-parallel rank split
      // attention and their experts' width; ranks with the same width part
      // hold different experts.
      const ParallelLayout& L = par.layout;
      s->stage_comm = mpi::split(L.stage() * o.ep + L.ep_rank(), L.tp_rank());
      s->expert_comm = mpi::split(L.stage() * o.tp + L.tp_rank(), L.ep_rank());
      par.tensor = s->stage_comm.get();
      par.experts = s->expert_comm.get();
    } else if (o.ep > 1) {
      par.tensor = &single_process();
      par.experts = comm;
    } else if (o.pp == 1) {
      par.tensor = comm;
    } else if (o.tp == 1) {
      par.tensor = &single_process();
    } else {
      s->stage_comm = mpi::split(par.layout.stage(), par.layout.tp_rank());
      par.tensor = s->stage_comm.get();
    }
    lo.shard = {par.layout.tp_rank(), o.tp, par.layout.stage(), o.pp};
    if (o.ep > 1) {
      lo.shard.ep_rank = par.layout.ep_rank();
      lo.shard.ep_world = o.ep;
      lo.shard.experts = std::make_shared<const ExpertPlan>(o.expert_placement.empty()
                                                                ? ExpertPlan{"", o.ep, o.redundant_experts, {}}
                                                                : ExpertPlan::load(o.expert_placement, o.ep));
    }
    // The host's cores shared by its ranks, unless --threads says otherwise.
    if (threads == 0) threads = std::max(1, ThreadPool::hardware_threads() / std::max(1, mpi::env_local_size()));
  }
  s->pool = std::make_unique<ThreadPool>(threads);
  set_weight_options(o, lo);
  lo.movable_experts = o.rebalance_every > 0;
  s->lm = load_model(model_path, lo, *s->pool);
  RINFER_CHECK(o.ep == 1 || !s->lm.model->expert_counts().empty(), "--ep: ", s->lm.config.architecture,
               " has no mixture-of-experts layers");
  if (o.rebalance_every > 0) {
    s->rebalancer = std::make_unique<ExpertRebalancer>(*s->lm.model, *lo.shard.experts, o.rebalance_every);
    par.rebalancer = s->rebalancer.get();
  }
  const auto& cfg = s->lm.config;
  int64_t tokens = o.kv_cache_tokens > 0 ? o.kv_cache_tokens : std::min<int64_t>(cfg.max_position_embeddings, 4096);
  if (kv_tokens) {
    // Rank 0 decides (a rank's own shard would size its cache differently).
    tokens = !comm || comm->rank() == 0 ? kv_tokens(s->lm, kv_options(o, s->lm.dtype, 0).dtype) : 0;
    if (comm) comm->broadcast(&tokens, sizeof tokens, 0);
  }
  const KVCacheOptions ko = kv_options(o, s->lm.dtype, tokens);
  s->runner = std::make_unique<ModelRunner>(*s->lm.model, ko, *s->pool, par);
  if (!s->runner->leader()) {
    s->runner->work();
    std::fflush(stdout);
    std::exit(0);
  }
  if (need_tokenizer) s->tokenizer = Tokenizer::load(model_path);
  return s;
}

std::unique_ptr<DraftSession> open_draft(const SpeculativeCli& spec, const RuntimeOptions& o, Session& target) {
  if (spec.mode != "draft") {
    RINFER_CHECK(spec.draft_model.empty(), "--draft-model needs --speculative draft");
    RINFER_CHECK(spec.draft_dtype.empty(), "--draft-dtype needs --speculative draft");
    return nullptr;
  }
  RINFER_CHECK(!spec.draft_model.empty(), "--speculative draft needs --draft-model DIR");
  RINFER_CHECK(spec.draft_dtype.empty() || parse_weight_format(spec.draft_dtype).has_value(), "unknown --draft-dtype ",
               spec.draft_dtype);
  auto d = std::make_unique<DraftSession>();
  // One process: under mpirun the draft runs on rank 0 beside the target's
  // ranks; it shares the target's threads (the two never run at once).
  RuntimeOptions dopt = o;
  if (!spec.draft_dtype.empty()) {
    dopt.dtype = spec.draft_dtype;
    dopt.group_size = 0;
    dopt.lm_head.clear();
  }
  LoadOptions lo;
  set_weight_options(dopt, lo);
  d->lm = load_model(spec.draft_model, lo, *target.pool);
  d->tokenizer = Tokenizer::load(spec.draft_model);
  // Same tokenizer: the ids must mean the same text.
  const Tokenizer& a = *target.tokenizer;
  const Tokenizer& b = *d->tokenizer;
  RINFER_CHECK(a.vocab_size() == b.vocab_size(), "--draft-model: its tokenizer has ", b.vocab_size(),
               " tokens, the model's ", a.vocab_size(), " (speculation needs the same tokenizer)");
  for (int32_t id = 0; id < a.vocab_size(); ++id)
    RINFER_CHECK(a.id_to_piece(id) == b.id_to_piece(id) && a.is_special(id) == b.is_special(id),
                 "--draft-model: its tokenizer differs from the model's at token ", id, " (\"", b.id_to_piece(id),
                 "\" vs \"", a.id_to_piece(id), "\"; speculation needs the same tokenizer)");
  // As long a context as the target's cache holds.
  const int64_t tokens = std::min(target.kv().capacity_tokens(), d->lm.config.max_position_embeddings);
  d->runner = std::make_unique<ModelRunner>(*d->lm.model, kv_options(o, d->lm.dtype, tokens), *target.pool);
  d->model = std::make_unique<DraftModel>(*d->runner);
  return d;
}

void check_weights_finite(const Session& s, bool fatal) {
  const auto bad = s.lm.weights->non_finite_tensors();
  if (bad.empty()) return;
  std::string what;
  for (size_t i = 0; i < bad.size() && i < 3; ++i)
    what += str(i ? ", " : "", bad[i].name, " (", bad[i].count, " values, the first at element ", bad[i].first, ")");
  if (bad.size() > 3) what += str(" and ", bad.size() - 3, " more tensors");
  const std::string msg = str("weights hold NaN or infinity: ", what, "; the model would compute garbage");
  if (fatal) fail(msg);
  std::fprintf(stderr, "rinfer: warning: %s\n", msg.c_str());
}

void write_expert_stats_file(const std::string& path, const Session& s,
                             const std::vector<std::vector<uint64_t>>& counts) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < counts.size(); ++l)
    if (!counts[l].empty()) layers.push_back({{"layer", l}, {"counts", counts[l]}});
  const nlohmann::json j = {{"model", s.lm.name}, {"architecture", s.lm.config.architecture}, {"layers", layers}};
  write_file_atomic(path, j.dump() + "\n");
}

std::string parallel_summary(const RuntimeOptions& o) {
  if (o.ep > 1)
    return str(o.tp * o.pp > 1 ? str(", tp ", o.tp, " x pp ", o.pp, " x ep ", o.ep, " ranks") : str(", ep ", o.ep, " ranks"),
               !o.expert_placement.empty() ? ", planned placement"
               : o.redundant_experts > 0   ? str(", ", o.redundant_experts, " redundant experts")
                                           : "",
               o.rebalance_every > 0 ? str(", rebalanced every ", o.rebalance_every, " steps") : "");
  if (o.tp * o.pp == 1) return "";
  std::string s = str(", tp ", o.tp, " x pp ", o.pp, " ranks");
  if (o.pp > 1) s += str(", ", o.micro_batches, " micro-batch", o.micro_batches > 1 ? "es" : "");
  return s;
}

std::string kv_dtype_name(DType dt) { return dt == DType::I8 ? "int8" : std::string(dtype_user_name(dt)); }

std::vector<int32_t> parse_ids(const std::string& s) {
  // Ids separated by one comma (spaces around it allowed) or by spaces; an
  // empty field ("1,,2", "1,", ",1") is a mistake, not a separator.
  std::vector<int32_t> ids;
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < s.size() && s[i] == ' ') ++i;
  };
  skip_spaces();
  while (i < s.size()) {
    RINFER_CHECK(s[i] != ',', "--prompt-ids: an empty id in \"", s, "\" (ids are separated by one comma)");
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
    RINFER_CHECK(ec == std::errc() && p != s.data() + i, "--prompt-ids: expected comma-separated integers, got \"", s,
                 "\"");
    RINFER_CHECK(v >= 0 && v <= INT32_MAX, "--prompt-ids: token id ", v, " is out of range");
    ids.push_back(int32_t(v));
    i = size_t(p - s.data());
    RINFER_CHECK(i >= s.size() || s[i] == ',' || s[i] == ' ', "--prompt-ids: expected comma-separated integers, got \"",
                 s, "\"");
    skip_spaces();
    if (i < s.size() && s[i] == ',') {
      ++i;
      skip_spaces();
      RINFER_CHECK(i < s.size(), "--prompt-ids: an empty id in \"", s, "\" (ids are separated by one comma)");
    }
  }
  return ids;
}

}  // namespace rinfer::cli
