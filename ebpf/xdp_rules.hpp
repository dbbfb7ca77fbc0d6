// Compiles a RuleSet into the XDP program's rule entries (sluice_abi.h sl_xdp_rule), with the
// core's own profile builder, so both backends run the same numbers through bucket_math.h.
#pragma once

#include <cstdint>
#include <vector>

#include "../dataplane/abi/sluice_abi.hpp"
#include "../dataplane/core/result.hpp"
#include "../dataplane/core/rules.hpp"

namespace sluice::xdp {

struct CompiledRules {
  std::vector<sl_xdp_rule> rules;  // file order; state slots and generations not yet given
  sl_xdp_bank bank{};              // rule count and default action (field mask not yet given)
};

// Refuses what the XDP backend cannot enforce, with the message the operator sees: more than
// SL_XDP_MAX_RULES rules, and shaping (leaky-bucket), which needs the DPDK backend.
// stale_read_tolerance_ns as PipelineOptions::stale_read_tolerance_ns.
Result<CompiledRules> compile_xdp_rules(const RuleSet& rules,
                                        uint64_t stale_read_tolerance_ns = SL_STEP_TOLERANCE_NS);

}  // namespace sluice::xdp
