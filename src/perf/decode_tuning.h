#pragma once
// The decode GEMVs' prefetch profile per CPU generation (DecodePrefetch,
// kernels/cpu/decode_prefetch.h): the same prefetch that pays on one core
// costs on another, so the profiles are a table chosen once per process.
#include "core/cpu_features.h"
#include "kernels/cpu/decode_prefetch.h"

namespace rinfer::perf {

using kernels::cpu::DecodePrefetch;

// A profile spec: a profile's name ("default", "zen5", "icelake"), optionally followed
// by ':' and field=value pairs separated by ',' that change its fields, e.g.
// "zen5:q4_streams=1,q4_nta=4096" (fields as DecodePrefetch's; q8_one_thread 0 or 1). The
// result keeps the whole spec as its name. Anything else is an error that
// names the profiles and fields. Profiles are interned: the reference stays
// valid for the life of the process.
const DecodePrefetch& parse_decode_prefetch(const char* spec);
// The profile for a CPU and a RINFER_DECODE_PREFETCH value (nullptr or "":
// unset). AMD family 0x1A and later (Zen 5) gets "zen5", Intel Ice Lake-SP/-D
// (family 6, model 0x6A or 0x6C) "icelake", the rest "default".
const DecodePrefetch& decode_prefetch_for(const CpuFeatures& cpu, const char* env);
// Installs this process's profile in the kernels (set_decode_prefetch):
// RINFER_DECODE_PREFETCH=<spec> if set, else decode_prefetch_for(this CPU).
// Every binary that runs kernels calls it once at start; a bad
// RINFER_DECODE_PREFETCH throws (and the next call tries again).
const DecodePrefetch& apply_decode_tuning();
// Pins the profile by spec, e.g. to test both paths on one machine or to
// A/B two settings in one process (bench_gemv_pairs --profile); nullptr
// returns to apply_decode_tuning's choice.
void force_decode_prefetch(const char* spec);

}  // namespace rinfer::perf
