// rinfer export-gguf: HF checkpoint -> llama.cpp GGUF (for same-machine
// comparisons with llama.cpp: scripts/bench_llamacpp.sh).
#include <cstdio>

#include "commands.h"
#include "convert/gguf_export.h"
#include "core/error.h"

namespace rinfer::cli {

Runner add_export_gguf(CLI::App& app) {
  struct Opts {
    std::string hf, out, type = "q8_0", output_type;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "export-gguf", "Write a Hugging Face checkpoint as a llama.cpp GGUF file (LLaMA, Mistral, Qwen2 families)");
  cmd->add_option("--hf", o->hf, "Hugging Face checkpoint directory (config.json, safetensors, tokenizer.model)")
      ->required();
  cmd->add_option("--out,-o", o->out, "Output .gguf file (must not exist)")->required();
  cmd->add_option("--type", o->type,
                  "Matrix type: f32, f16, q8_0 or q4_0 (ggml's block-32 formats; matrices whose rows are not a "
                  "multiple of 32 stay f16; norms and biases f32)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
  cmd->add_option("--output-type", o->output_type, "Type of the output layer (lm_head); default: --type")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
  cmd->add_flag("--quiet,-q", o->quiet, "No progress line");
  return [o]() -> int {
    GgufExportOptions eo;
    eo.type = *gguf_type_from_name(o->type);
    if (!o->output_type.empty()) eo.output_type = gguf_type_from_name(o->output_type);
    eo.progress = !o->quiet;
    const GgufExportStats st = export_gguf(o->hf, o->out, eo);
    if (st.f16_fallbacks)
      std::fprintf(stderr, "note: %lld matrices stay f16 (rows not a multiple of 32)\n",
                   static_cast<long long>(st.f16_fallbacks));
    std::printf("exported %s -> %s: %.1f MB (%s%s%s), %.1f MB of weights read per decoded token (%llu bytes), %.1f s\n",
                o->hf.c_str(), o->out.c_str(), double(st.bytes_out) / 1e6, o->type.c_str(),
                o->output_type.empty() ? "" : ", output ", o->output_type.c_str(), double(st.bytes_per_token) / 1e6,
                static_cast<unsigned long long>(st.bytes_per_token), st.seconds);
    return 0;
  };
}

}  // namespace rinfer::cli
