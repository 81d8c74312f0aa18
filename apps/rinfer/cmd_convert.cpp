// rinfer convert: HF checkpoint -> rinfer model directory, one layer at a time.
#include <cstdio>

#include "commands.h"
#include "convert/converter.h"
#include "core/error.h"
#include "core/process_stats.h"

namespace rinfer::cli {

Runner add_convert(CLI::App& app) {
  struct Opts {
    std::string hf, out, dtype = "bf16";
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("convert", "Convert a Hugging Face checkpoint into a rinfer model directory");
  cmd->add_option("--hf", o->hf, "Hugging Face checkpoint directory (config.json + safetensors)")->required();
  cmd->add_option("--out,-o", o->out, "Output directory (must not exist)")->required();
  cmd->add_option("--dtype", o->dtype, "Weight dtype: f32, f16, bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_flag("--quiet,-q", o->quiet, "No progress line");
  return [o]() -> int {
    ConvertOptions co;
    co.dtype = *dtype_from_user_name(o->dtype);
    co.progress = !o->quiet;
    ConvertStats st = convert_to_dir(o->hf, o->out, co);
    if (!st.unused_hf_tensors.empty())
      std::fprintf(stderr, "note: %zu checkpoint tensors are not used by this architecture (first: %s)\n",
                   st.unused_hf_tensors.size(), st.unused_hf_tensors.front().c_str());
    std::printf("converted %s -> %s: %.1f MB in, %.1f MB out (%s), %.1f s, peak RSS %.1f MB\n", o->hf.c_str(),
                o->out.c_str(), double(st.bytes_in) / 1e6, double(st.bytes_out) / 1e6, o->dtype.c_str(), st.seconds,
                double(peak_rss_bytes()) / 1e6);
    return 0;
  };
}

}  // namespace rinfer::cli
