// `flows top` from the workers' sampled windows (flow_sampler.hpp): the same (rule state,
// key) seen by several workers adds up; only flows of rules running now are listed (a rule
// removed, renamed or given a new match since has another state identity); ordered by
// packets or bits per second, each window's counts over its own duration; cut to the count.
// `key: none` rules have no flows: they are not listed, and a query for one by name is an
// error that says so (their rate is in `sluicectl stats`).
#pragma once

#include <vector>

#include "flow_sampler.hpp"
#include "pipeline.hpp"
#include "result.hpp"
#include "rules_target.hpp"

namespace sluice {

Result<std::vector<FlowRate>> rank_flows(const std::vector<FlowWindow>& windows,
                                         const std::vector<Pipeline::RuleIdentity>& running,
                                         const TopFlowsQuery& query);

}  // namespace sluice
