#include "xdp_rules_check.hpp"

#include "../dataplane/abi/sluice_abi.h"
#include "../dataplane/core/rules_loader.hpp"
#include "xdp_flow_tables.hpp"
#include "xdp_rules.hpp"

namespace sluice::xdp {

Status check_xdp_rules_text(const std::string& yaml) {
  if (yaml.size() > SL_XDP_RULES_TEXT_MAX)
    return make_error("the rules file is too large for the XDP backend (over 1 MiB as YAML)");
  return Ok{};
}

Status add_xdp_flow_table(FlowMemory& need, const Rule& r, uint64_t default_max_flows) {
  if (r.key == KeyMode::none) return Ok{};
  const uint64_t flows = r.max_flows ? r.max_flows : default_max_flows;
  if (flows > kMaxFlowTableEntries)
    return invalid_input("rule \"" + r.name + "\": max-flows " + std::to_string(flows) +
                         " is above what an XDP flow table holds (" +
                         std::to_string(kMaxFlowTableEntries) + " flows, " +
                         format_memory_size(flow_table_bytes(kMaxFlowTableEntries)) + ")");
  need.flows += flows;
  need.bytes += flow_table_bytes(flows);
  return Ok{};
}

Result<FlowMemory> check_xdp_rule_set(const RuleSet& rules, uint64_t default_max_flows,
                                      std::optional<uint64_t> available) {
  if (auto compiled = compile_xdp_rules(rules); !compiled) return compiled.error();
  if (Status s = check_xdp_rules_text(dump_rules_yaml(rules)); !s) return s.error();
  FlowMemory need;
  for (const Rule& r : rules.rules)
    if (Status s = add_xdp_flow_table(need, r, default_max_flows); !s) return s.error();
  if (available && need.bytes != 0)
    if (Status s = check_flow_memory(need, *available, ""); !s) return s.error();
  return need;
}

}  // namespace sluice::xdp
