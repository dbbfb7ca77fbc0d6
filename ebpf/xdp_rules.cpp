#include "xdp_rules.hpp"

#include <string>

#include "../dataplane/core/limiter_profile.hpp"
#include "../dataplane/core/rules_snapshot.hpp"

namespace sluice::xdp {
namespace {

Status compile_profiles(const Rule& r, sl_xdp_rule& out) {
  if (r.algorithm == Algorithm::leaky_bucket)
    return make_error("leaky-bucket shapes traffic, and the XDP backend cannot shape: XDP cannot "
                      "hold a packet and this kernel has no sch_fq EDT pacing; use the DPDK "
                      "backend (sluiced) for shaping rules");
  RuleProfiles p;
  if (Status s = compile_profile(r, p); !s) return s;
  out.cur.rate = p.rate;
  out.cur.meter = p.meter;
  out.cur.window = p.window;
  return Ok{};
}

}  // namespace

Result<CompiledRules> compile_xdp_rules(const RuleSet& rules, uint64_t stale_read_tolerance_ns) {
  const auto& rs = rules.rules;
  if (rs.size() > SL_XDP_MAX_RULES)
    return make_error("the XDP backend holds at most " + std::to_string(SL_XDP_MAX_RULES) +
                      " rules; this rules file has " + std::to_string(rs.size()));
  if (stale_read_tolerance_ns > kMaxDelayNs)
    return make_error("stale-read tolerance must be at most 60 s");
  CompiledRules out;
  out.bank.rule_count = uint32_t(rs.size());
  out.bank.default_action = abi::to_abi(rules.default_action);
  for (size_t i = 0; i < rs.size(); ++i) {
    const Rule& r = rs[i];
    sl_xdp_rule e{};
    if (Status s = compile_profiles(r, e); !s)
      return make_error("rule \"" + r.name + "\": " + s.error().message);
    for (sl_rate_profile* p : {&e.cur.rate, &e.cur.meter.committed, &e.cur.meter.peak})
      set_stale_read_tolerance(*p, stale_read_tolerance_ns);
    e.idle_timeout_ns = r.idle_timeout_ns;
    e.overhead_bytes = r.overhead_bytes;
    e.parent = r.parent_index;
    e.algorithm = uint8_t(r.algorithm);
    e.key_mode = uint8_t(r.key);
    e.key_prefix_len = r.key_prefix_len;
    e.cost_unit = uint8_t(r.cost_unit());
    for (int at = int(i); at >= 0; at = rs[size_t(at)].parent_index) {
      if (e.chain_len == SL_XDP_MAX_CHAIN)
        return make_error("rule \"" + r.name + "\": parent chain deeper than " +
                          std::to_string(SL_XDP_MAX_CHAIN));
      e.chain[e.chain_len++] = int16_t(at);
    }
    e.action = abi::to_abi(r.action);
    e.overflow = abi::to_abi(r.overflow.value_or(r.action));
    e.green = abi::to_abi(r.colour_actions.green);
    e.yellow = abi::to_abi(r.colour_actions.yellow);
    e.red = abi::to_abi(r.colour_actions.red);
    e.prev = e.cur;
    out.rules.push_back(e);
  }
  return out;
}

}  // namespace sluice::xdp
