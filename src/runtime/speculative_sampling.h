#pragma once
// The acceptance rule of speculative sampling (Leviathan et al. 2023; Chen
// et al. 2023) for a draft token x drawn from the draft's distribution q
// where the target's is p: accept x with probability min(1, p(x) / q(x));
// otherwise draw from the residual max(0, p - q), renormalized. The token
// that comes out is distributed exactly as p, whatever q is.
//
// A deterministic draft (prompt lookup, a greedy draft model) is the case of
// a one-hot q: the rule then reduces to drawing from p and accepting when
// the draw is x, which the Generator does with the plain sampler (so the
// output is token for token the one without speculation).
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampler.h"

namespace rinfer {

// The token for one verified position: `draft` when accepted, else a draw
// from the residual (never `draft` then). p: the target's probabilities
// (Sampler::distribution); q: the draft's, over the draft's vocabulary
// (which may be shorter or longer than p: tokens outside one have
// probability 0 there). scratch: reused storage for the residual.
int32_t accept_or_resample(std::span<const float> p, int32_t draft, std::span<const float> q, Sampler& sampler,
                           std::vector<float>& scratch);

}  // namespace rinfer
