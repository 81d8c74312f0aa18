#pragma once
// How a model's decoder layers are cut into pipeline stages: contiguous
// ranges, one per stage, balanced by the weights each stage holds (the
// stage's layers, the token embeddings on the first stage and the output
// layer on the last), since weight bytes are what a decode step reads and
// what a rank must fit.
#include <vector>

#include "model/architecture.h"
#include "model/shard.h"

namespace rinfer {

// `stages` ranges covering [0, c.n_layers) in order, each non-empty, the
// largest stage's weights as small as a contiguous cut allows; a one-line
// error when there are fewer layers than stages.
std::vector<Range> split_layers(const Architecture& arch, const ModelConfig& c, int stages);

// The same from per-layer weights and the ends' (for tests and planning).
std::vector<Range> split_layers(const std::vector<double>& layer_weights, double first_extra, double last_extra,
                                int stages);

}  // namespace rinfer
