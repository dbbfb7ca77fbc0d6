// A rule change on a running XDP program, planned: which state slot each new rule uses, which
// buckets are converted to new profiles, which slots start over and which are freed
// (sluice_abi.h "Rule changes"). Pure: the loader (xdp_program.cpp) carries the plan out.
// The same rules_diff.hpp identity the DPDK backend uses decides what a rule keeps.
#pragma once

#include <cstdint>
#include <vector>

#include "../dataplane/abi/sluice_abi.hpp"
#include "../dataplane/core/rules.hpp"

namespace sluice::xdp {

struct RuleSwapPlan {
  std::vector<sl_xdp_rule> rules;      // the new bank's entries: state, gen, cur, prev set
  std::vector<uint16_t> fresh_slots;   // new rules: their buckets, flows and counters start over
  std::vector<uint16_t> convert_slots; // kept rules with new profiles: buckets to convert
  std::vector<uint16_t> freed_slots;   // removed rules: their flows are dropped
};

// old_rules/old_entries: the rule set running now and its entries (empty before the first
// set); new_entries: compile_xdp_rules(new_rules).rules, in the same order as new_rules.
RuleSwapPlan plan_rule_swap(const std::vector<Rule>& old_rules,
                            const std::vector<sl_xdp_rule>& old_entries,
                            const std::vector<Rule>& new_rules,
                            std::vector<sl_xdp_rule> new_entries);

// Bucket b of rule r, written under r.prev, as it reads under r.cur at now_ns: the tokens held,
// capped at the new burst (bucket_convert.hpp, the DPDK backend's conversion), tagged r.gen.
// A never-initialised bucket (seq 0) or one already of r.gen is returned as it is.
sl_bucket convert_bucket(const sl_xdp_rule& r, sl_bucket b, uint64_t now_ns);

// True if two profile sets are the same numbers (then a kept rule's buckets need no change).
bool same_profiles(const sl_xdp_profiles& a, const sl_xdp_profiles& b);

}  // namespace sluice::xdp
