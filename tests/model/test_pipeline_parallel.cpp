// Pipeline stages: how layers are cut into stages, how a step's batch is cut
// into micro-batches, and that a stage reads only its own layers' files.
// (Whole models through real stages, under mpirun: tests/cli/test_cli_parallel.cpp
// and tests/server/test_server_parallel.cpp.)
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "convert/model_dir.h"
#include "loading/model_loader.h"
#include "model/architecture.h"
#include "model/pipeline_split.h"
#include "runtime/model_runner.h"
#include "test_util.h"

namespace rinfer {
namespace {

namespace fs = std::filesystem;

std::vector<std::pair<int64_t, int64_t>> pairs(const std::vector<Range>& r) {
  std::vector<std::pair<int64_t, int64_t>> p;
  for (const auto& x : r) p.emplace_back(x.begin, x.end);
  return p;
}

TEST(PipelineSplit, BalancesTheLargestStage) {
  using P = std::vector<std::pair<int64_t, int64_t>>;
  // Equal layers: equal stages (the remainder to the earlier ones).
  EXPECT_EQ(pairs(split_layers(std::vector<double>(8, 1.0), 0, 0, 2)), (P{{0, 4}, {4, 8}}));
  EXPECT_EQ(pairs(split_layers(std::vector<double>(7, 1.0), 0, 0, 3)), (P{{0, 3}, {3, 5}, {5, 7}}));
  // The output layer weighs on the last stage: it takes fewer layers.
  EXPECT_EQ(pairs(split_layers(std::vector<double>(8, 1.0), 0, 4.0, 2)), (P{{0, 6}, {6, 8}}));
  // One stage per layer.
  EXPECT_EQ(pairs(split_layers({5.0, 1.0, 1.0}, 0, 0, 3)), (P{{0, 1}, {1, 2}, {2, 3}}));
  // A heavy layer in the middle.
  EXPECT_EQ(pairs(split_layers({1.0, 1.0, 6.0, 1.0, 1.0}, 0, 0, 3)), (P{{0, 2}, {2, 3}, {3, 5}}));
  EXPECT_EQ(pairs(split_layers(std::vector<double>(5, 1.0), 0, 0, 1)), (P{{0, 5}}));
  try {
    split_layers(std::vector<double>(2, 1.0), 0, 0, 3);
    FAIL() << "3 stages of 2 layers";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--pp 3: the model has 2 layers, fewer than the stages");
  }
}

TEST(PipelineSplit, ModelsSplitByTheirTensors) {
  // The tiny llama: 3 equal layers and an untied output layer.
  const auto cfg = load_model(test::testdata("golden/llama/hf").string(), {}, *std::make_unique<ThreadPool>(1)).config;
  const auto& arch = find_architecture(cfg.architecture);
  const auto two = split_layers(arch, cfg, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].begin, 0);
  EXPECT_EQ(two[1].end, cfg.n_layers);
  EXPECT_EQ(two[0].end, two[1].begin);
  // The output layer is as large as a layer here or larger: the last stage
  // gets the fewer layers.
  EXPECT_LE(two[1].size(), two[0].size());
}

std::vector<BatchItem> batch_of(const std::vector<int>& lengths, std::vector<std::vector<int32_t>>& tokens) {
  tokens.clear();
  for (int n : lengths) tokens.emplace_back(size_t(n), 1);
  std::vector<BatchItem> b;
  for (const auto& t : tokens) b.push_back({t, 0, {}, LogitRows::Last});
  return b;
}

TEST(MicroBatches, WholeSequencesInOrderAboutEqualInTokens) {
  using C = std::vector<std::pair<size_t, size_t>>;
  std::vector<std::vector<int32_t>> tokens;
  // 16 decode sequences into 4: 4 each.
  auto b = batch_of(std::vector<int>(16, 1), tokens);
  EXPECT_EQ(ModelRunner::micro_batch_cuts(b, 4), (C{{0, 4}, {4, 8}, {8, 12}, {12, 16}}));
  EXPECT_EQ(ModelRunner::micro_batch_cuts(b, 1), (C{{0, 16}}));
  // Fewer sequences than micro-batches: one each.
  b = batch_of({5, 1}, tokens);
  EXPECT_EQ(ModelRunner::micro_batch_cuts(b, 4), (C{{0, 1}, {1, 2}}));
  // A long prompt among decode steps: it is a micro-batch of its own.
  b = batch_of({1, 1, 100, 1, 1}, tokens);
  EXPECT_EQ(ModelRunner::micro_batch_cuts(b, 2), (C{{0, 3}, {3, 5}}));
  b = batch_of({100, 1, 1, 1}, tokens);
  EXPECT_EQ(ModelRunner::micro_batch_cuts(b, 3), (C{{0, 1}, {1, 2}, {2, 4}}));
}

TEST(PipelineStage, ReadsOnlyItsOwnLayersFiles) {
  test::TempDir tmp;
  const fs::path m = tmp / "m";
  const auto c = test::run_rinfer("convert --hf " + test::testdata("golden/llama/hf").string() + " --out " +
                                  m.string() + " --dtype f32");
  ASSERT_EQ(c.code, 0) << c.err;
  ThreadPool pool(1);
  const LoadedModel whole = load_model(m.string(), {}, pool);
  // A model directory is split by the bytes its files hold: equal layers
  // here, and the f32 output layer on the last stage.
  const StoredBytes bytes = read_model_dir_bytes(m.string(), whole.config.n_layers);
  ASSERT_EQ(int64_t(bytes.layers.size()), whole.config.n_layers);
  for (double b : bytes.layers) EXPECT_EQ(b, bytes.layers[0]);
  EXPECT_EQ(bytes.head, double(whole.config.vocab_size * whole.config.hidden_size * 4));
  const auto stages = split_layers(bytes.layers, 0.0, bytes.head, 2);
  // The file of the last layer goes: stage 0 does not miss it, stage 1 does.
  const auto desc = test::read_json(m / "model_desc.json");
  const std::string last = "model.layers." + std::to_string(whole.config.n_layers - 1) + ".input_layernorm.weight";
  const std::string file = desc["tensors"][last]["file"];
  fs::remove(m / file);
  LoadOptions first;
  first.shard = Shard(0, 1, 0, 2);
  const LoadedModel s0 = load_model(m.string(), first, pool);
  EXPECT_EQ(s0.shard.layers.begin, stages[0].begin);
  EXPECT_EQ(s0.shard.layers.end, stages[0].end);
  EXPECT_EQ(s0.model->kv_shape().n_layers, stages[0].size());
  LoadOptions second;
  second.shard = Shard(0, 1, 1, 2);
  try {
    load_model(m.string(), second, pool);
    FAIL() << "stage 1 loaded without its layer's file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rinfer
