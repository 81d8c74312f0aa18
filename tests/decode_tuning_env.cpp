// The tests of the areas that run kernels (tests/CMakeLists.txt: _tuned_areas)
// run with this CPU's decode prefetch profile installed, as every rinfer
// binary does at start (perf::apply_decode_tuning).
#include <gtest/gtest.h>

#include "perf/decode_tuning.h"

namespace {
struct DecodeTuning : ::testing::Environment {
  void SetUp() override { rinfer::perf::apply_decode_tuning(); }
};
[[maybe_unused]] ::testing::Environment* const kDecodeTuning = ::testing::AddGlobalTestEnvironment(new DecodeTuning);
}  // namespace
