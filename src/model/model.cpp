#include "model/model.h"

namespace rinfer {

int64_t Model::logit_rows(std::span<const BatchItem> batch) {
  int64_t rows = 0;
  for (const auto& it : batch) rows += it.all_logits ? int64_t(it.tokens.size()) : 1;
  return rows;
}

}  // namespace rinfer
