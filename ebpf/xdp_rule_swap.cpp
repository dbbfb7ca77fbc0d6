#include "xdp_rule_swap.hpp"

#include <array>
#include <cstring>
#include <map>
#include <string>

#include "../dataplane/core/bucket_convert.hpp"
#include "../dataplane/core/rules_diff.hpp"

namespace sluice::xdp {

bool same_profiles(const sl_xdp_profiles& a, const sl_xdp_profiles& b) {
  // Plain integer structs with explicit reserved fields the compiler zeroes: bytes compare.
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

sl_bucket convert_bucket(const sl_xdp_rule& r, sl_bucket b, uint64_t now_ns) {
  if (b.seq == 0 || b.gen == r.gen) return b;
  const sl_xdp_profiles& from = r.prev;
  const sl_xdp_profiles& to = r.cur;
  sl_meter_state st{b.w0, b.w1};
  switch (Algorithm(r.algorithm)) {
    case Algorithm::token_bucket:
      b.w0 = convert_token_bucket_word(from.rate, to.rate, b.w0, now_ns);
      break;
    case Algorithm::gcra: b.w0 = convert_gcra_word(from.rate, to.rate, b.w0, now_ns); break;
    case Algorithm::srtcm:
      st = convert_srtcm_state(from.meter, to.meter, st, now_ns);
      b.w0 = st.e0, b.w1 = st.e1;
      break;
    case Algorithm::trtcm:
      st = convert_trtcm_state(from.meter, to.meter, st, now_ns);
      b.w0 = st.e0, b.w1 = st.e1;
      break;
    case Algorithm::fixed_window:
      b.w0 = convert_fixed_window_word(from.window, to.window, b.w0);
      break;
    case Algorithm::sliding_window:
      b.w0 = convert_sliding_window_word(from.window, to.window, b.w0);
      break;
    case Algorithm::leaky_bucket: break;  // never on XDP (compile_xdp_rules refuses it)
  }
  b.gen = r.gen;
  // A newer even sequence: a meter's writer that read the old words fails its claim and
  // decides again on these.
  b.seq = (b.seq | 1) + 1;
  return b;
}

RuleSwapPlan plan_rule_swap(const std::vector<Rule>& old_rules,
                            const std::vector<sl_xdp_rule>& old_entries,
                            const std::vector<Rule>& new_rules,
                            std::vector<sl_xdp_rule> new_entries) {
  RuleSwapPlan plan;
  std::map<std::string, size_t> old_by_name;
  for (size_t i = 0; i < old_rules.size() && i < old_entries.size(); ++i)
    old_by_name[old_rules[i].name] = i;
  std::array<bool, SL_XDP_STATE_SLOTS> in_use{};   // by the running set
  std::array<bool, SL_XDP_STATE_SLOTS> kept{};     // carried into the new set
  for (const sl_xdp_rule& e : old_entries) in_use[e.state] = true;

  std::vector<bool> needs_slot(new_entries.size(), true);
  for (size_t i = 0; i < new_entries.size(); ++i) {
    sl_xdp_rule& e = new_entries[i];
    e.prev = e.cur;
    e.gen = 1;
    auto it = old_by_name.find(new_rules[i].name);
    if (it == old_by_name.end() || !same_state_identity(old_rules[it->second], new_rules[i]))
      continue;
    const sl_xdp_rule& old = old_entries[it->second];
    e.state = old.state;
    kept[old.state] = true;
    needs_slot[i] = false;
    if (same_profiles(old.cur, e.cur)) {
      e.gen = old.gen;
    } else {
      e.gen = old.gen + 1;
      e.prev = old.cur;
      plan.convert_slots.push_back(e.state);
    }
  }
  uint16_t next_free = 0;
  for (size_t i = 0; i < new_entries.size(); ++i) {
    if (!needs_slot[i]) continue;
    // At most SL_XDP_MAX_RULES slots are in use and as many are asked for: one is free.
    while (in_use[next_free] || kept[next_free]) ++next_free;
    new_entries[i].state = next_free;
    plan.fresh_slots.push_back(next_free);
    kept[next_free] = true;
  }
  for (const sl_xdp_rule& e : old_entries)
    if (!kept[e.state]) plan.freed_slots.push_back(e.state);
  plan.rules = std::move(new_entries);
  return plan;
}

}  // namespace sluice::xdp
