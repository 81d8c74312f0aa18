#pragma once
// What the layers of one forward pass share: the tokens of the batch, the KV
// cache's layers, where the ops run (ExecContext) and who holds the other
// shards (Communicator).
#include <cstdint>
#include <span>

#include "model/model.h"
#include "model/workspace.h"
#include "ops/exec_context.h"
#include "ops/ops.h"
#include "parallel/communicator.h"

namespace rinfer {

class RotaryEmbedding;

// Each token's rotary angles (RotaryEmbedding::angles) in one forward pass:
// the first layer that rotates fills them, the others reuse them (the layers
// share one RotaryEmbedding).
struct TokenAngles {
  const RotaryEmbedding* owner = nullptr;  // whose angles cs holds; null: none yet
  float* cs = nullptr;                     // [n_tokens][owner->rot_dim()]
};

struct ForwardContext {
  ExecContext exec;
  Communicator* comm = &single_process();
  Communicator* expert_comm = &single_process();  // the expert-parallel ranks (MoE layers)
  std::span<const BatchItem> batch;
  // Each token's position (pos), index into batch (seq) and block table, the
  // number of tokens and the longest context.
  ops::TokenBatch tokens;
  const KvView* kv = nullptr;
  Workspace* ws = nullptr;
  TokenAngles* angles = nullptr;  // the pass's; null: every call of token_angles takes them anew
};

// ctx's tokens' angles of `rope` ([n_tokens][rope.rot_dim()]), taken now
// (over the pool) unless ctx.angles holds them already.
const float* token_angles(const ForwardContext& ctx, const RotaryEmbedding& rope);

}  // namespace rinfer
