#pragma once
// Workspace: scratch activations shared by all layers of one model. Each
// slot grows to the largest size asked for and is then reused, so a forward
// pass allocates nothing once the largest batch has been seen.
#include <cstddef>
#include <vector>

#include "core/buffer.h"

namespace rinfer {

class Workspace {
 public:
  enum Slot { kX, kH, kOut, kSel, kQ, kK, kV, kAttn, kScores, kGate, kUp, kRouter, kExpertIn, kExpertOut, kShared, kMla0,
              kMla1, kMla2, kMla3, kAngles, kExpertSend, kExpertGathered, kNumSlots };
  float* get(Slot slot, size_t n_floats) {
    Buffer& b = slots_[slot];
    if (b.size() < n_floats * sizeof(float)) b = Buffer(n_floats * sizeof(float));
    return b.as<float>();
  }

 private:
  Buffer slots_[kNumSlots];
};

}  // namespace rinfer
