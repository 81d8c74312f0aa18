#include "model/model.h"

#include "core/error.h"

namespace rinfer {

int64_t Model::logit_rows(std::span<const BatchItem> batch) {
  int64_t rows = 0;
  for (const auto& it : batch)
    rows += it.logits == LogitRows::All ? int64_t(it.tokens.size()) : it.logits == LogitRows::Last ? 1 : 0;
  return rows;
}

void Model::place_experts(const ExpertPlan&) { fail(config().architecture, ": no mixture-of-experts layers to place"); }

}  // namespace rinfer
