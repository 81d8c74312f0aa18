#include "model/pipeline_split.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.h"

namespace rinfer {

std::vector<Range> split_layers(const std::vector<double>& w, double first_extra, double last_extra, int stages) {
  const int64_t L = int64_t(w.size());
  RINFER_CHECK(stages >= 1, "pipeline stages must be >= 1, got ", stages);
  RINFER_CHECK(L >= stages, "--pp ", stages, ": the model has ", L, " layers, fewer than the stages");
  std::vector<double> prefix(size_t(L + 1), 0.0);
  for (int64_t l = 0; l < L; ++l) prefix[size_t(l + 1)] = prefix[size_t(l)] + w[size_t(l)];
  auto cost = [&](int s, int64_t a, int64_t b) {
    return prefix[size_t(b)] - prefix[size_t(a)] + (s == 0 ? first_extra : 0.0) +
           (s == stages - 1 ? last_extra : 0.0);
  };
  // best[s][e]: the smallest (largest stage, sum of squared stages) of
  // stages 0..s over layers [0, e), compared in that order: the largest
  // stage first, then the most even cut; cut[s][e]: where stage s begins
  // then. Ties take the later cut (the earlier stages take the remainder:
  // the last one has the output layer).
  using Cost = std::pair<double, double>;
  const Cost kInf = {std::numeric_limits<double>::infinity(), 0.0};
  std::vector<std::vector<Cost>> best(size_t(stages), std::vector<Cost>(size_t(L + 1), kInf));
  std::vector<std::vector<int64_t>> cut(size_t(stages), std::vector<int64_t>(size_t(L + 1), 0));
  for (int64_t e = 1; e <= L; ++e) best[0][size_t(e)] = {cost(0, 0, e), cost(0, 0, e) * cost(0, 0, e)};
  for (int s = 1; s < stages; ++s)
    for (int64_t e = s + 1; e <= L; ++e)
      for (int64_t b = s; b < e; ++b) {
        const Cost& before = best[size_t(s - 1)][size_t(b)];
        const double c = cost(s, b, e);
        const Cost v = {std::max(before.first, c), before.second + c * c};
        if (v <= best[size_t(s)][size_t(e)]) {
          best[size_t(s)][size_t(e)] = v;
          cut[size_t(s)][size_t(e)] = b;
        }
      }
  std::vector<Range> out(static_cast<size_t>(stages));
  int64_t end = L;
  for (int s = stages - 1; s >= 0; --s) {
    const int64_t begin = s == 0 ? 0 : cut[size_t(s)][size_t(end)];
    out[size_t(s)] = {begin, end};
    end = begin;
  }
  return out;
}

std::vector<Range> split_layers(const Architecture& arch, const ModelConfig& c, int stages) {
  auto elements = [](const TensorSpec& t) {
    double n = 1;
    for (int64_t d : t.shape) n *= double(d);
    return n;
  };
  std::vector<double> layers(size_t(c.n_layers), 0.0);
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const auto& t : arch.tensor_specs(c, l)) layers[size_t(l)] += elements(t);
  double head = 0;
  for (const auto& t : arch.tensor_specs(c, kGlobalGroup))
    if (t.role == TensorRole::Matrix || (t.role == TensorRole::Embedding && c.tie_word_embeddings))
      head += elements(t);
  return split_layers(layers, 0.0, head, stages);
}

}  // namespace rinfer
