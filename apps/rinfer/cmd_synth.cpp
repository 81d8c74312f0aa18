// rinfer synth: random-weight HF checkpoints with real model shapes.
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "convert/synth.h"
#include "core/error.h"

namespace rinfer::cli {

Runner add_synth(CLI::App& app) {
  struct Opts {
    SynthOptions so;
    std::string dtype = "bf16";
    bool list = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("synth", "Write a Hugging Face checkpoint with random weights and real shapes");
  cmd->add_option("--arch", o->so.family,
                  "Model family of the preset (llama, qwen2, qwen2_moe, qwen3, mixtral, baichuan, chatglm, deepseek_v2, "
                  "deepseek_v3); checked against the preset");
  cmd->add_option("--preset", o->so.preset, "Preset name (see --list)");
  cmd->add_option("--out,-o", o->so.out, "Output directory (must not exist)");
  cmd->add_option("--dtype", o->dtype, "f32, f16, bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--seed", o->so.seed, "Random seed")->check(integer_in(0));
  cmd->add_flag("--list", o->list, "List the presets");
  cmd->add_option("--layers", o->so.layers, "Override the number of layers (same per-layer shapes)")
      ->check(integer_in(1));
  cmd->add_flag("--fp8", o->so.fp8,
                "Store projection matrices as FP8 e4m3 with 128x128 block scales (DeepSeek-V3 checkpoint layout)");
  return [o]() -> int {
    if (o->list) {
      for (const auto& p : synth_presets()) std::printf("%-16s %-6s %s\n", p.name.c_str(), p.family.c_str(), p.description.c_str());
      return 0;
    }
    RINFER_CHECK(!o->so.out.empty(), "--out is required");
    o->so.dtype = *dtype_from_user_name(o->dtype);
    synth_checkpoint(o->so);
    std::printf("wrote %s (preset %s, %s, random weights: the text it generates is nonsense)\n", o->so.out.c_str(),
                o->so.preset.c_str(), o->dtype.c_str());
    return 0;
  };
}

}  // namespace rinfer::cli
