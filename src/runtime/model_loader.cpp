#include "runtime/model_loader.h"

#include <filesystem>

#include "convert/hf_checkpoint.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace rinfer {

LoadedModel load_model(const std::string& path, const LoadOptions& opts, ThreadPool& pool) {
  RINFER_CHECK(!path.empty(), "--model is required");
  RINFER_CHECK(fs::exists(path), "model directory ", path, " does not exist");
  RINFER_CHECK(fs::is_directory(path), "--model must be a directory, got ", path);
  LoadedModel lm;
  lm.path = path;
  lm.name = fs::path(path).lexically_normal().filename().string();
  if (lm.name.empty() || lm.name == ".") lm.name = fs::absolute(path).parent_path().filename().string();
  if (is_model_dir(path)) {
    RINFER_CHECK(!opts.dtype.has_value(), "--dtype applies to Hugging Face directories; ", path,
                 " is already converted (convert again to change it)");
    ModelDir md = load_model_dir(path, opts.mode);
    lm.config = md.config;
    lm.dtype = md.dtype;
    lm.weights = std::move(md.weights);
  } else if (fs::exists(fs::path(path) / "config.json")) {
    HfCheckpoint hf = HfCheckpoint::open(path);
    ConvertOptions co;
    co.dtype = opts.dtype.value_or(hf.storage_dtype());
    lm.weights = std::make_unique<WeightStore>();
    lm.weights->source = path;
    MemorySink sink(*lm.weights);
    convert_tensors(hf, co, sink);
    lm.config = hf.config;
    lm.dtype = co.dtype;
    lm.from_hf = true;
  } else {
    fail(path, " is neither a rinfer model (", kModelDescFile,
         ") nor a Hugging Face checkpoint (config.json)");
  }
  lm.model = find_architecture(lm.config.architecture).create(lm.config, *lm.weights, pool);
  return lm;
}

}  // namespace rinfer
