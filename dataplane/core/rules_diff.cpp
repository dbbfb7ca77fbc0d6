#include "rules_diff.hpp"

#include <string_view>
#include <unordered_map>

namespace sluice {
namespace {

// The rules-file fields of `a` and `b` that differ, by the names the file uses.
std::vector<std::string> changed_fields(const Rule& a, const Rule& b) {
  std::vector<std::string> f;
  auto check = [&](bool differs, const char* name) {
    if (differs) f.emplace_back(name);
  };
  check(!(a.match == b.match), "match");
  check(a.key != b.key || a.key_prefix_len != b.key_prefix_len, "key");
  check(a.algorithm != b.algorithm, "algorithm");
  check(!(a.rate == b.rate), "rate");
  check(a.burst != b.burst, "burst");
  check(a.excess_burst != b.excess_burst, "excess-burst");
  check(!(a.peak_rate == b.peak_rate), "peak-rate");
  check(a.peak_burst != b.peak_burst, "peak-burst");
  check(a.window_ns != b.window_ns, "window");
  check(a.limit != b.limit || a.limit_unit != b.limit_unit, "limit");
  check(a.max_delay_ns != b.max_delay_ns, "max-delay");
  check(a.overhead_bytes != b.overhead_bytes, "overhead");
  check(!(a.action == b.action), "action");
  check(!(a.colour_actions == b.colour_actions), "actions");
  check(a.overflow != b.overflow, "overflow");
  check(a.parent != b.parent, "parent");
  check(a.max_flows != b.max_flows, "max-flows");
  check(a.idle_timeout_ns != b.idle_timeout_ns, "idle-timeout");
  return f;
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : ", ") + w;
  return s;
}

}  // namespace

bool same_state_identity(const Rule& a, const Rule& b) {
  return a.match == b.match && a.key == b.key && a.key_prefix_len == b.key_prefix_len &&
         a.algorithm == b.algorithm && a.cost_unit() == b.cost_unit() &&
         (!a.is_window() || a.window_ns == b.window_ns);
}

bool RulesDiff::empty() const {
  if (default_changed) return false;
  for (const RuleChange& c : rules)
    if (c.kind != RuleChangeKind::unchanged) return false;
  return true;
}

size_t RulesDiff::count(RuleChangeKind kind) const {
  size_t n = kind == RuleChangeKind::unchanged ? unchanged_unlisted : 0;
  for (const RuleChange& c : rules) n += c.kind == kind;
  return n;
}

std::vector<int> positions_by_name(const RuleSet& from, const RuleSet& to) {
  std::vector<int> at(to.rules.size(), -1);
  size_t same = 0;
  while (same < to.rules.size() && same < from.rules.size() &&
         to.rules[same].name == from.rules[same].name) {
    at[same] = int(same);
    ++same;
  }
  if (same == to.rules.size()) return at;
  std::unordered_map<std::string_view, int> old_at;
  old_at.reserve(from.rules.size() - same);
  for (size_t i = same; i < from.rules.size(); ++i) old_at.emplace(from.rules[i].name, int(i));
  for (size_t i = same; i < to.rules.size(); ++i)
    if (auto it = old_at.find(to.rules[i].name); it != old_at.end()) at[i] = it->second;
  return at;
}

RulesDiff diff_rules(const RuleSet& from, const RuleSet& to) {
  const std::vector<int> old_at = positions_by_name(from, to);
  std::vector<int> new_at(from.rules.size(), -1);  // the inverse: -1 for removed rules
  for (size_t i = 0; i < old_at.size(); ++i)
    if (old_at[i] >= 0) new_at[size_t(old_at[i])] = int(i);

  RulesDiff d;
  d.default_changed = !(from.default_action == to.default_action);
  // "position": the rule's rank among the rules both sets have, so adding or removing another
  // rule does not by itself mark every later rule as moved.
  std::vector<size_t> kept_old_rank(from.rules.size());
  size_t rank = 0;
  for (size_t i = 0; i < from.rules.size(); ++i)
    if (new_at[i] >= 0) kept_old_rank[i] = rank++;
  rank = 0;
  d.rules.reserve(to.rules.size());
  for (size_t i = 0; i < to.rules.size(); ++i) {
    const Rule& n = to.rules[i];
    RuleChange c;
    c.name = n.name;
    if (old_at[i] < 0) {
      c.kind = RuleChangeKind::added;
    } else {
      const size_t j = size_t(old_at[i]);
      const Rule& o = from.rules[j];
      c.fields = changed_fields(o, n);
      if (kept_old_rank[j] != rank++) c.fields.emplace_back("position");
      c.kind = c.fields.empty() ? RuleChangeKind::unchanged : RuleChangeKind::changed;
      c.keeps_state = same_state_identity(o, n);
    }
    d.rules.push_back(std::move(c));
  }
  for (size_t j = 0; j < from.rules.size(); ++j) {
    if (new_at[j] >= 0) continue;
    RuleChange c;
    c.name = from.rules[j].name;
    c.kind = RuleChangeKind::removed;
    d.rules.push_back(std::move(c));
  }
  return d;
}

std::string format_rules_diff(const RulesDiff& d) {
  if (d.empty()) return "no change\n";
  std::string s;
  if (d.default_changed) s += "~ default: action\n";
  for (const RuleChange& c : d.rules) {
    switch (c.kind) {
      case RuleChangeKind::added: s += "+ " + c.name + " (added)\n"; break;
      case RuleChangeKind::removed: s += "- " + c.name + " (removed)\n"; break;
      case RuleChangeKind::changed:
        s += "~ " + c.name + ": " + join(c.fields) +
             (c.keeps_state ? " (buckets kept)\n" : " (new buckets)\n");
        break;
      case RuleChangeKind::unchanged: break;
    }
  }
  const size_t total = d.rules.size() + d.unchanged_unlisted - d.count(RuleChangeKind::removed);
  s += std::to_string(total) + (total == 1 ? " rule: " : " rules: ") +
       std::to_string(d.count(RuleChangeKind::added)) + " added, " +
       std::to_string(d.count(RuleChangeKind::changed)) + " changed, " +
       std::to_string(d.count(RuleChangeKind::removed)) + " removed, " +
       std::to_string(d.count(RuleChangeKind::unchanged)) + " unchanged\n";
  return s;
}

}  // namespace sluice
