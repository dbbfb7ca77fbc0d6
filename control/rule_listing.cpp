#include "rule_listing.hpp"

#include <vector>

#include "rate.hpp"
#include "rules_loader.hpp"
#include "rules_values.hpp"
#include "text_table.hpp"

namespace sluice::ctl {

namespace {

std::string match_text(const Match& m) {
  std::vector<std::string> parts;
  if (m.src) parts.push_back("src " + format_cidr(*m.src));
  if (m.dst) parts.push_back("dst " + format_cidr(*m.dst));
  if (m.proto) parts.push_back(std::string("proto ") + rules_internal::proto_name(*m.proto));
  if (m.src_port) parts.push_back("src-port " + rules_internal::format_ports(*m.src_port));
  if (m.dst_port) parts.push_back("dst-port " + rules_internal::format_ports(*m.dst_port));
  if (m.vlan) parts.push_back("vlan " + std::to_string(*m.vlan));
  if (m.dscp) parts.push_back("dscp " + std::to_string(unsigned(*m.dscp)));
  if (m.port) parts.push_back("port " + std::to_string(*m.port));
  if (parts.empty()) return "any";
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string limit_text(const Rule& r) {
  if (r.is_window()) {
    const std::string unit = r.limit_unit == CostUnit::packets ? " packets" : " bytes";
    return std::to_string(r.limit) + unit + " per " + format_duration(r.window_ns);
  }
  std::string out = format_rate(r.rate) + ", burst " + std::to_string(r.burst) +
                    (r.rate.unit == CostUnit::packets ? "" : "B");
  if (r.algorithm == Algorithm::trtcm) out += ", peak " + format_rate(r.peak_rate);
  if (r.algorithm == Algorithm::leaky_bucket) out += ", max-delay " + format_duration(r.max_delay_ns);
  return out;
}

std::string action_text(const Rule& r) {
  if (!r.is_meter()) return format_action(r.action);
  return "green " + format_action(r.colour_actions.green) + ", yellow " +
         format_action(r.colour_actions.yellow) + ", red " + format_action(r.colour_actions.red);
}

}  // namespace

std::string rule_listing(const RuleSet& rules) {
  std::vector<std::vector<std::string>> rows = {
      {"rule", "match", "key", "algorithm", "limit", "action", "parent"}};
  for (const Rule& r : rules.rules) {
    rows.push_back({r.name, match_text(r.match), key_name(r.key, r.key_prefix_len),
                    algorithm_name(r.algorithm), limit_text(r), action_text(r),
                    r.parent.empty() ? "-" : r.parent});
  }
  rows.push_back({"default", "the rest", "-", "-", "-", format_action(rules.default_action), "-"});
  return align_columns(rows, /*left_columns=*/7);
}

}  // namespace sluice::ctl
