#include "runtime/speculative_sampling.h"

#include <algorithm>

#include "core/error.h"

namespace rinfer {

int32_t accept_or_resample(std::span<const float> p, int32_t draft, std::span<const float> q, Sampler& sampler,
                           std::vector<float>& scratch) {
  RINFER_CHECK(draft >= 0 && size_t(draft) < q.size() && q[size_t(draft)] > 0,
               "speculative sampling: draft token ", draft, " has no probability under the draft's distribution");
  const double px = size_t(draft) < p.size() ? double(p[size_t(draft)]) : 0.0;
  const double qx = double(q[size_t(draft)]);
  // u < p/q, written without the division (px >= qx always accepts).
  if (sampler.uniform() * qx < px) return draft;
  scratch.resize(p.size());
  for (size_t i = 0; i < p.size(); ++i) scratch[i] = std::max(0.0f, p[i] - (i < q.size() ? q[i] : 0.0f));
  const int32_t id = sampler.draw(scratch);
  // A residual of zero mass needs p == q, where x is never rejected; float
  // rounding aside, fall back to p itself.
  return id >= 0 ? id : sampler.draw(p);
}

}  // namespace rinfer
