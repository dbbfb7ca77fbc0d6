// `sluicectl flows top` on the XDP backend: the per-flow packet and byte counts the program
// keeps in its rules' flow tables (sluice_abi.h struct sl_bucket), read twice, give each flow's rate
// over the interval between the reads. Pure: XdpProgram::sample_flows reads the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../dataplane/abi/sluice_abi.h"
#include "../dataplane/core/result.hpp"
#include "../dataplane/core/rules.hpp"
#include "../dataplane/core/rules_target.hpp"

namespace sluice::xdp {

struct FlowCount {
  uint32_t state = 0;  // the state slot of the rule whose table holds the flow
  sl_flow_key key;
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t last_seen_ns = 0;
};

// The flow tables at one time: every flow's counts, and the program's clock when read.
struct FlowSample {
  uint64_t now_ns = 0;
  std::vector<FlowCount> flows;
};

// The key as an operator reads it: "192.0.2.7", "10.0.0.0/8", "10.0.0.1 > 10.0.0.2",
// "udp 10.0.0.1:5353 > 10.0.0.2:53" (by the key mode in its first word).
std::string format_flow_key(const sl_flow_key& key);

// The `query.count` flows busiest between `before` and `after` (packets, or bits with
// query.by_bytes, per second), of the rules' state slots (`entries[i]` is `rules[i]`'s entry),
// only `query.rule`'s when it names one; ties in key order. A flow new since `before` counts
// from zero; one idle over the interval is not listed. Refused: an unknown rule name, or no
// time between the samples.
// Per rule (`entries[i]`), its flows in `sample` not idle past the rule's idle timeout: the
// flows the core would still hold once its sweep has freed the idle ones (the program's sweep
// runs as new flows arrive, so an expired flow may stay in its table a while).
std::vector<uint64_t> active_flows(const std::vector<sl_xdp_rule>& entries,
                                   const FlowSample& sample);

Result<std::vector<FlowRate>> rank_flows(const std::vector<Rule>& rules,
                                         const std::vector<sl_xdp_rule>& entries,
                                         const FlowSample& before, const FlowSample& after,
                                         const TopFlowsQuery& query);

}  // namespace sluice::xdp
