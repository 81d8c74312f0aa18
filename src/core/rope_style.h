#pragma once
#include <cstdint>

namespace rinfer {

// Which values of a head RoPE rotates together.
enum class RopeStyle : uint8_t {
  RotateHalf,   // pairs (i, i + rot_dim/2): HF LLaMA, Qwen, Mistral, Baichuan-7B
  Interleaved,  // pairs (2i, 2i + 1): GLM, DeepSeek MLA rope part, llama2.c/Meta layout
};

}  // namespace rinfer
