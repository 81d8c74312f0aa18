#include "loading/model_loader.h"

#include <filesystem>

#include "convert/hf_checkpoint.h"
#include "model/llama_layout.h"
#include "model/pipeline_split.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace rinfer {

std::string LoadedModel::weight_format() const { return weight_format_name(dtype, quant); }

LoadedModel load_model(const std::string& path, const LoadOptions& opts, ThreadPool& pool) {
  RINFER_CHECK(!path.empty(), "--model is required");
  RINFER_CHECK(fs::exists(path), "model directory ", path, " does not exist");
  RINFER_CHECK(fs::is_directory(path), "--model must be a directory, got ", path);
  LoadedModel lm;
  lm.path = path;
  lm.name = fs::path(path).lexically_normal().filename().string();
  if (lm.name.empty() || lm.name == ".") lm.name = fs::absolute(path).parent_path().filename().string();
  // A pipeline stage: its layers, cut from the model's config (and, for a
  // model directory, the bytes its tensors are stored in) before any weight
  // is read, then only the tensors it needs.
  Shard shard = opts.shard;
  TensorFilter wanted, keep_mapped;
  auto plan_stage = [&](const ModelConfig& c, const std::vector<double>& layer_bytes, double head_bytes) {
    if (shard.stages == 1 && shard.ep_world == 1) return;  // the whole model
    if (shard.stages > 1) {
      RINFER_CHECK(shard.stage >= 0 && shard.stage < shard.stages, "pipeline stage ", shard.stage, " of ",
                   shard.stages);
      shard.layers = layer_bytes.empty()
                         ? split_layers(find_architecture(c.architecture), c, shard.stages)[size_t(shard.stage)]
                         : split_layers(layer_bytes, 0.0, head_bytes, shard.stages)[size_t(shard.stage)];
    }
    // The stage's layers and ends; with expert parallelism the rank's
    // experts only, or, when rebalancing may move them, every expert left
    // mapped (a rank's experts read their pages as used; one it gives up
    // hands them back, so its memory stays that of the experts it holds).
    wanted = [c, shard](const std::string& name) { return stage_wants_tensor(c, shard, name); };
    TensorFilter not_placed_here;
    if (shard.ep_world > 1 && opts.movable_experts) {
      Shard every_expert = shard;
      every_expert.experts = nullptr;
      not_placed_here = [](const std::string& name) { return name.find(".experts.") != std::string::npos; };
      wanted = [c, every_expert](const std::string& name) { return stage_wants_tensor(c, every_expert, name); };
    }
    // The first stage only looks rows of the token embeddings up: mapped,
    // the rows never read stay out of its memory.
    const bool map_embeddings = shard.stages > 1 && !shard.last_stage();
    if (map_embeddings || not_placed_here)
      keep_mapped = [map_embeddings, not_placed_here](const std::string& name) {
        return (map_embeddings && name == "model.embed_tokens.weight") || (not_placed_here && not_placed_here(name));
      };
  };
  if (is_model_dir(path)) {
    RINFER_CHECK(!opts.dtype.has_value() && !opts.quant.has_value() && !opts.lm_head_quant.has_value(),
                 "--dtype applies to Hugging Face directories; ", path,
                 " is already converted (convert again to change it)");
    // A shard maps the files: its layers then read only their rows (and copy
    // only their columns), not the whole model.
    if (shard.stages > 1 || shard.ep_world > 1) {
      const ModelConfig c = read_model_dir_config(path);
      const StoredBytes b = read_model_dir_bytes(path, c.n_layers);
      plan_stage(c, b.layers, b.head);
    }
    ModelDir md = load_model_dir(path, opts.shard.whole() ? opts.mode : WeightLoadMode::Mmap, wanted, keep_mapped);
    lm.config = md.config;
    lm.dtype = md.dtype;
    lm.quant = md.quant;
    lm.group_size = md.group_size;
    lm.weights = std::move(md.weights);
  } else if (fs::exists(fs::path(path) / "config.json")) {
    HfCheckpoint hf = HfCheckpoint::open(path);
    plan_stage(hf.config, {}, 0.0);
    ConvertOptions co;
    co.wanted = wanted;
    co.dtype = opts.dtype.value_or(opts.quant ? DType::BF16 : hf.storage_dtype());
    co.quant = opts.quant;
    co.group_size = opts.group_size;
    co.lm_head_quant = opts.lm_head_quant;
    co.pool = &pool;
    lm.weights = std::make_unique<WeightStore>();
    lm.weights->source = path;
    MemorySink sink(*lm.weights);
    convert_tensors(hf, co, sink);
    lm.config = hf.config;
    lm.dtype = co.dtype;
    lm.quant = co.quant;
    if (co.quant) lm.group_size = co.group_size > 0 ? co.group_size : default_group_size(*co.quant);
    lm.from_hf = true;
  } else {
    fail(path, " is neither a rinfer model (", kModelDescFile,
         ") nor a Hugging Face checkpoint (config.json)");
  }
  lm.model = find_architecture(lm.config.architecture).create(lm.config, *lm.weights, shard);
  lm.shard = shard;
  // A tensor-parallel shard read whole matrices' pages to copy its columns.
  if (!shard.whole()) lm.weights->drop_mapped_pages();
  return lm;
}

}  // namespace rinfer
