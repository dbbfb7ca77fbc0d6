// What the XDP backend refuses of a rule set before it writes anything, found without a
// program: rules it cannot run (compile_xdp_rules), a rules text too large for sl_rules_text,
// a table above kMaxFlowTableEntries flows, and tables needing more memory than there is (a
// BPF array is kernel memory, all of it taken at creation). XdpProgram applies it to the
// rules of a change that take a fresh slot; `sluicectl --xdp IFACE config check FILE` to a
// whole file, as a first attach would, so that a file it calls ok is one the backend loads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "../dataplane/core/memory_budget.hpp"
#include "../dataplane/core/result.hpp"
#include "../dataplane/core/rules.hpp"

namespace sluice::xdp {

// The rules text the program keeps (sl_rules_text) holds `yaml` (dump_rules_yaml of a set).
Status check_xdp_rules_text(const std::string& yaml);

// Adds rule r's table to `need` (nothing for key none): its max-flows, or default_max_flows,
// at the XDP table's bytes per flow. Refuses a table larger than one array may be.
Status add_xdp_flow_table(FlowMemory& need, const Rule& r, uint64_t default_max_flows);

// The whole set as a first attach would take it: every check above, every keyed rule's table
// new, their sum held to `available` (none: not checked). The tables' memory when it passes.
Result<FlowMemory> check_xdp_rule_set(const RuleSet& rules, uint64_t default_max_flows,
                                      std::optional<uint64_t> available);

}  // namespace sluice::xdp
