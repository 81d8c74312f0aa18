// rinfer convert: HF checkpoint -> rinfer model directory, one layer at a time.
#include <cstdio>

#include "commands.h"
#include "convert/converter.h"
#include "core/error.h"
#include "core/process_stats.h"

namespace rinfer::cli {

Runner add_convert(CLI::App& app) {
  struct Opts {
    std::string hf, out, dtype = "bf16", bf16_layout = "blocked", lm_head;
    int64_t group_size = 0;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("convert", "Convert a Hugging Face checkpoint into a rinfer model directory");
  cmd->add_option("--hf", o->hf, "Hugging Face checkpoint directory (config.json + safetensors)")->required();
  cmd->add_option("--out,-o", o->out, "Output directory (must not exist)")->required();
  cmd->add_option("--dtype", o->dtype,
                  "Weight dtype: f32, f16, bf16, or int8 / int4 (symmetric per-group quantized matrices; embeddings, "
                  "lm_head and MLA kv_b_proj stay bf16, norms and routers f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "int8", "int4"}));
  cmd->add_option("--group-size", o->group_size,
                  "int8/int4: weights per scale, 32, 64 or 128 (default 128 for int8, 32 for int4, halved per tensor "
                  "down to 32 when K is not a multiple; a given value is strict: such tensors stay bf16)")
      ->check(CLI::IsMember({"32", "64", "128"}));
  cmd->add_option("--lm-head", o->lm_head,
                  "With --dtype int8/int4: quantize the output layer too, int8 (group 128) or int4 (group 32); "
                  "default: it stays bf16. Tied to the token embeddings: the table stays bf16 for the lookup and "
                  "the quantized copy is added")
      ->check(CLI::IsMember({"int8", "int4"}));
  cmd->add_option("--bf16-layout", o->bf16_layout,
                  "How BF16 projection matrices are stored: blocked (8 x 32 tiles, one sequential stream for decode; "
                  "default) or rows (plain [N, K])")
      ->check(CLI::IsMember({"blocked", "rows"}));
  cmd->add_flag("--quiet,-q", o->quiet, "No progress line");
  return [o]() -> int {
    ConvertOptions co;
    const auto wf = parse_weight_format(o->dtype);
    RINFER_CHECK(wf.has_value(), "unknown --dtype ", o->dtype);
    co.dtype = wf->dtype;
    co.quant = wf->quant;
    RINFER_CHECK(o->group_size == 0 || co.quant.has_value(), "--group-size needs --dtype int8 or int4");
    co.group_size = o->group_size;
    if (!o->lm_head.empty()) {
      RINFER_CHECK(co.quant.has_value(), "--lm-head needs --dtype int8 or int4");
      co.lm_head_quant = parse_weight_format(o->lm_head)->quant;
    }
    co.bf16_blocked = o->bf16_layout == "blocked";
    co.progress = !o->quiet;
    ConvertStats st = convert_to_dir(o->hf, o->out, co);
    if (co.quant && !st.float_matrices.empty())
      std::fprintf(stderr, "note: %zu matrices stay %s (lm_head, kv_b_proj, or K not a multiple of the group size; "
                   "first: %s)\n", st.float_matrices.size(), dtype_user_name(co.dtype).data(),
                   st.float_matrices.front().c_str());
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
