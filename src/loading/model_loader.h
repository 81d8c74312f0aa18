#pragma once
// Opens whatever --model points to: a converted rinfer directory
// (model_desc.json) or a Hugging Face checkpoint directory, converted in
// memory on the fly. Returns the runnable model and its tokenizer location.
#include <memory>
#include <optional>
#include <string>

#include "convert/model_dir.h"
#include "model/model.h"
#include "model/shard.h"

namespace rinfer {

struct LoadOptions {
  std::optional<DType> dtype;  // HF directories only; default: the checkpoint's own dtype
  // HF directories only: quantize matrices in memory (dtype is then the float
  // dtype of the rest, default bf16) with this group size (0: default).
  std::optional<QuantType> quant;
  int64_t group_size = 0;
  std::optional<QuantType> lm_head_quant;  // HF directories only: ConvertOptions::lm_head_quant
  WeightLoadMode mode = WeightLoadMode::Copy;
  // Which part of the model to build (default: all of it). Tensor parallel
  // (world > 1): a model directory is then mapped, whatever `mode` says, so
  // that a rank reads only its shard's bytes. Pipeline (stages > 1): the
  // loader cuts the layers (split_layers) and reads only the stage's tensors.
  Shard shard;
  // Expert parallelism with rebalancing: every expert stays readable, since
  // a rank may gain any of them. A model directory keeps every expert
  // mapped (pages read as used, handed back when the rank gives one up); a
  // Hugging Face directory converts them all.
  bool movable_experts = false;
};

struct LoadedModel {
  std::string path;
  std::string name;          // directory name, for reports
  bool from_hf = false;
  DType dtype = DType::F32;  // dtype of the (unquantized) weight matrices and embeddings
  std::optional<QuantType> quant;  // quantized matrices (int8 / int4)
  int64_t group_size = 0;                        // their (largest) group size
  std::string weight_format() const;             // "int8", "int4", or the dtype's name
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
  std::unique_ptr<Model> model;
  Shard shard;  // what model holds (a pipeline stage's layers filled in)
};

LoadedModel load_model(const std::string& path, const LoadOptions& opts, ThreadPool& pool);

}  // namespace rinfer
