#include "common.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

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
        return ok ? "" : str("must be a number ", range, ", got \"", s, "\"");
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
                  "Tensor-parallel ranks: run under mpirun -np TP, each rank holding its shard of every layer "
                  "(heads, MLP width, vocabulary); default 1")
      ->check(integer_in(1, 1024));
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

std::unique_ptr<Session> open_session(const std::string& model_path, const RuntimeOptions& o, bool need_tokenizer,
                                      const KvSizer& kv_tokens) {
  auto s = std::make_unique<Session>();
  Communicator* comm = nullptr;
  LoadOptions lo;
  int threads = o.threads;
  if (o.tp > 1 || mpi::env_world_size() > 1) {
    RINFER_CHECK(mpi::launched(), "--tp ", o.tp, " needs mpirun -np ", o.tp, " (it runs one rank per process)");
    RINFER_CHECK(mpi::env_world_size() == o.tp, "--tp ", o.tp, " but mpirun started ", mpi::env_world_size(),
                 " ranks (run mpirun -np ", o.tp, ")");
    comm = &mpi::world();
    lo.shard = {comm->rank(), comm->world()};
    // The host's cores shared by its ranks, unless --threads says otherwise.
    if (threads == 0) threads = std::max(1, ThreadPool::hardware_threads() / std::max(1, mpi::env_local_size()));
  }
  s->pool = std::make_unique<ThreadPool>(threads);
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
  s->lm = load_model(model_path, lo, *s->pool);
  const auto& cfg = s->lm.config;
  int64_t tokens = o.kv_cache_tokens > 0 ? o.kv_cache_tokens : std::min<int64_t>(cfg.max_position_embeddings, 4096);
  KVCacheOptions ko;
  ko.block_size = o.block_size;
  ko.dtype = o.kv_cache_dtype == "auto"   ? s->lm.dtype
             : o.kv_cache_dtype == "int8" ? DType::I8
                                          : *dtype_from_user_name(o.kv_cache_dtype);
  if (kv_tokens) {
    // Rank 0 decides (a rank's own shard would size its cache differently).
    tokens = !comm || comm->rank() == 0 ? kv_tokens(s->lm, ko.dtype) : 0;
    if (comm) comm->broadcast(&tokens, sizeof tokens, 0);
  }
  ko.n_blocks = KVCache::blocks_for_tokens(tokens, o.block_size);
  s->runner = std::make_unique<ModelRunner>(*s->lm.model, ko, *s->pool, comm);
  if (!s->runner->leader()) {
    s->runner->work();
    std::fflush(stdout);
    std::exit(0);
  }
  if (need_tokenizer) s->tokenizer = Tokenizer::load(model_path);
  return s;
}

std::string kv_dtype_name(DType dt) { return dt == DType::I8 ? "int8" : std::string(dtype_user_name(dt)); }

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    if (i >= s.size()) break;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
    RINFER_CHECK(ec == std::errc() && p != s.data() + i, "--prompt-ids: expected comma-separated integers, got \"", s,
                 "\"");
    RINFER_CHECK(v >= 0 && v <= INT32_MAX, "--prompt-ids: token id ", v, " is out of range");
    ids.push_back(int32_t(v));
    i = size_t(p - s.data());
    RINFER_CHECK(i >= s.size() || s[i] == ',' || s[i] == ' ', "--prompt-ids: expected comma-separated integers, got \"",
                 s, "\"");
  }
  return ids;
}

}  // namespace rinfer::cli
