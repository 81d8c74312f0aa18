#pragma once
// Where a tensor's bytes live and where an op runs. Only the host CPU has a
// backend today; the op interface (src/ops) dispatches on this, so a second
// backend is a new case there, not a change in the model code.
#include <cstdint>

namespace rinfer {

enum class Device : uint8_t { Cpu };

inline const char* device_name(Device d) {
  switch (d) {
    case Device::Cpu:
      return "cpu";
  }
  return "unknown";
}

}  // namespace rinfer
