// rinfer run: generate text from a prompt (text or token ids).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "runtime/generator.h"
#include "tokenizer/chat_template.h"

namespace rinfer::cli {

namespace {
struct RunOptions {
  std::string model, prompt, prompt_ids, prompt_file;
  int64_t max_new_tokens = 128;
  float temperature = 0.8f, top_p = 0.95f, repetition_penalty = 1.0f;
  int32_t top_k = 0;
  int64_t seed = -1;
  bool json = false, ignore_eos = false;
  bool chat = false;   // --chat: wrap the prompt in the model's chat template
  std::string system;  // --system: the system message in chat mode
  std::string expert_stats;
  int64_t max_model_len = 0;
  SpeculativeCli speculative;
  RuntimeOptions rt;
};

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
}  // namespace

Runner add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  cmd->add_option("--model,-m", o->model, "rinfer model directory or Hugging Face checkpoint directory")->required();
  auto* p = cmd->add_option("--prompt,-p", o->prompt, "Prompt text (BOS added as the tokenizer config says)");
  auto* ids_opt =
      cmd->add_option("--prompt-ids", o->prompt_ids, "Prompt as comma-separated token ids, used as given")->excludes(p);
  cmd->add_option("--prompt-file", o->prompt_file, "Prompt text from a file, as --prompt")->excludes(p)->excludes(ids_opt);
  cmd->add_option("--max-new-tokens,-n", o->max_new_tokens, "Tokens to generate at most")->check(integer_in(0));
  cmd->add_option("--temperature,-t", o->temperature, "0 = greedy")->check(number_in(0, INFINITY));
  cmd->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0 = off)")->check(integer_in(0, INT32_MAX));
  cmd->add_option("--top-p", o->top_p, "Nucleus sampling mass in (0, 1]")->check(number_in(0, 1, /*min_exclusive=*/true));
  cmd->add_option("--repetition-penalty", o->repetition_penalty, "HF-style penalty (1 = off)")
      ->check(number_in(0, INFINITY, /*min_exclusive=*/true));
  cmd->add_option("--seed", o->seed, "Random seed (default: random)")->check(integer_in(0));
  cmd->add_option("--max-model-len", o->max_model_len, "Limit prompt + output tokens")->check(integer_in(0));
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at EOS");
  auto* chat = cmd->add_flag("--chat", o->chat, "Render --prompt (and --system) with the model's chat template")
                   ->excludes(ids_opt);
  cmd->add_option("--system", o->system, "System message for --chat")->needs(chat);
  cmd->add_flag("--json", o->json, "Print one JSON object (prompt_ids, output_ids, text, timings)");
  cmd->add_option("--expert-stats", o->expert_stats,
                  "MoE models: write per-layer expert activation counts (JSON) to this file");
  add_runtime_options(cmd, o->rt);
  add_prefill_chunk_option(cmd, o->rt);
  add_speculative_options(cmd, o->speculative);
  return [o, ids_opt]() -> int {
    const bool use_text = ids_opt->count() == 0;
    // Checked before loading the model: a typo fails at once.
    std::vector<int32_t> prompt;
    if (!o->prompt_file.empty()) o->prompt = read_file(o->prompt_file, "--prompt-file");
    if (!use_text) {
      prompt = parse_ids(o->prompt_ids);
      RINFER_CHECK(!prompt.empty(), "--prompt-ids: no token ids given");
    }
    o->rt.expert_stats = !o->expert_stats.empty();
    auto s = open_session(o->model, o->rt, /*need_tokenizer=*/true);
    check_weights_finite(*s, /*fatal=*/false);
    const auto& cfg = s->lm.config;
    if (use_text && o->chat) {
      // As apply_chat_template(tokenize=True): the template writes the
      // special tokens itself, so none are added when encoding.
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      if (!o->system.empty()) messages.push_back({{"role", "system"}, {"content", o->system}});
      messages.push_back({{"role", "user"}, {"content", o->prompt}});
      ChatTemplateOptions copt;
      copt.add_generation_prompt = true;
      prompt = s->tokenizer->encode(ChatTemplate::load(o->model).render(messages, copt), /*add_special=*/false);
    } else if (use_text) {
      prompt = s->tokenizer->encode(o->prompt, /*add_special=*/true);
      // An empty prompt without a tokenizer BOS: start from the model's BOS.
      if (prompt.empty() && cfg.bos_token_id >= 0) prompt.push_back(cfg.bos_token_id);
    }
    GenerateOptions go;
    go.max_new_tokens = o->max_new_tokens;
    go.max_context = o->max_model_len;
    go.speculative = o->speculative.options();
    auto draft = open_draft(o->speculative, o->rt, *s);
    if (draft) go.speculative.draft = draft->model.get();
    go.sampling.temperature = o->temperature;
    go.sampling.top_k = o->top_k;
    go.sampling.top_p = o->top_p;
    go.sampling.repetition_penalty = o->repetition_penalty;
    go.sampling.seed = o->seed >= 0 ? uint64_t(o->seed) : std::random_device{}();
    if (!o->ignore_eos) {
      go.stop_ids = cfg.eos_token_ids;
      int32_t tok_eos = s->tokenizer->eos_id();
      if (tok_eos >= 0 && std::find(go.stop_ids.begin(), go.stop_ids.end(), tok_eos) == go.stop_ids.end())
        go.stop_ids.push_back(tok_eos);
    }
    Generator gen(*s->runner);
    gen.set_prefill_chunk(o->rt.prefill_chunk);
    gen.check_request(prompt, go);  // fail before the prompt is echoed
    if (!o->expert_stats.empty())
      RINFER_CHECK(!s->lm.model->expert_counts().empty(), "--expert-stats: ", s->lm.config.architecture,
                   " has no mixture-of-experts layers");
    // Per-layer expert activation counts, for load-aware expert placement.
    auto write_expert_stats = [&] {
      if (o->expert_stats.empty()) return;
      write_expert_stats_file(o->expert_stats, *s, s->lm.model->expert_counts());
    };
    GenerateResult r;
    if (o->json) {
      r = gen.generate(prompt, go);
    } else {
      // Stream: the prompt as given, then each piece as soon as it is whole UTF-8.
      if (use_text && !o->chat) std::fputs(o->prompt.c_str(), stdout);
      StreamingDetokenizer detok(*s->tokenizer);
      if (use_text) {
        // Prime with the prompt so the first generated piece keeps its leading space.
        for (int32_t id : prompt) detok.push(id);
      }
      r = gen.generate(prompt, go, [&](int32_t id) {
        std::string piece = detok.push(id);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      });
      std::string rest = detok.flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
      std::fputc('\n', stdout);
      std::fflush(stdout);  // before the stderr summary, so the two never interleave
      std::string spec;
      if (go.speculative.num_tokens > 0)
        spec = str("; drafted ", r.n_drafted, ", accepted ", r.n_accepted, ", ",
                   r.n_decode_steps > 0 ? double(r.output_ids.size() - 1) / double(r.n_decode_steps) : 0.0,
                   " tokens per step");
      std::fprintf(stderr, "[%zu prompt tokens, %zu generated, stop: %s; TTFT %.1f ms, decode %.2f tok/s%s]\n",
                   prompt.size(), r.output_ids.size(), r.stop_reason.c_str(), r.ttft_s * 1e3,
                   r.decode_tokens_per_s(), spec.c_str());
      write_expert_stats();
      return 0;
    }
    nlohmann::json j;
    j["model"] = s->lm.name;
    j["prompt_ids"] = prompt;
    j["output_ids"] = r.output_ids;
    j["text"] = s->tokenizer->decode(r.output_ids);
    j["stop_reason"] = r.stop_reason;
    if (const ExpertRebalancer* rb = s->runner->rebalancer())
      j["expert_rebalancing"] = {{"every", rb->every()},
                                 {"rebalances", rb->rebalances()},
                                 {"experts_moved", rb->experts_moved()}};
    j["seed"] = go.sampling.seed;
    j["ttft_ms"] = r.ttft_s * 1e3;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s();
    j["decode_steps"] = r.n_decode_steps;
    if (go.speculative.num_tokens > 0)
      j["speculative"] = {{"method", o->speculative.mode},
                          {"num_speculative_tokens", go.speculative.num_tokens},
                          {"drafted", r.n_drafted},
                          {"accepted", r.n_accepted},
                          {"acceptance", r.n_drafted > 0 ? double(r.n_accepted) / double(r.n_drafted) : 0.0}};
    if (draft) j["speculative"].update({{"draft_model", draft->lm.name}, {"draft_seconds", r.draft_s}});
    std::printf("%s\n", dump(j).c_str());
    write_expert_stats();
    return 0;
  };
}

}  // namespace rinfer::cli
