// What changes between two rule sets, rule by rule, known by name (SPEC §4). One function
// decides it for `sluicectl config diff` (what a load would do) and for the live swap (what
// state each rule keeps), so the diff an operator reads is the one the dataplane applies.
//
// A rule keeps its state (buckets, flows, counters) across a change iff its state identity
// is unchanged: match, key (and prefix length), algorithm, cost unit (packets or bytes) and,
// for windows, the window length. Anything else (rate, burst, action, parent, max-flows,
// idle-timeout, ...) changes in place: the tokens a bucket holds are kept, capped at the new
// burst. A renamed rule is a removal plus an addition.
#pragma once

#include <string>
#include <vector>

#include "rules.hpp"

namespace sluice {

enum class RuleChangeKind { added, removed, changed, unchanged };

struct RuleChange {
  std::string name;
  RuleChangeKind kind = RuleChangeKind::unchanged;
  // Rules-file field names that differ ("rate", "burst", "match", ...), for `changed`;
  // "position" when the rule moved in the file order (first match wins, so order matters).
  std::vector<std::string> fields;
  // changed / unchanged: buckets, flows and counters carry over. added / removed: false.
  bool keeps_state = false;
};

struct RulesDiff {
  // The new set's rules in its order, then the removed ones in the old order.
  std::vector<RuleChange> rules;
  bool default_changed = false;
  // Unchanged rules counted but not listed in `rules`: a diff read from sluiced's reply, which
  // lists only the rules that change (docs/CONTROL.md), so that a one-rule change to a set of
  // thousands is answered in a line, not in tens of KB. count(unchanged) includes them.
  size_t unchanged_unlisted = 0;
  // Nothing would change (no rule added, removed or changed, same default action).
  bool empty() const;
  size_t count(RuleChangeKind kind) const;
};

// Rules are matched by name; a name is unique within a set (the loader guarantees it).
RulesDiff diff_rules(const RuleSet& from, const RuleSet& to);

// For each rule of `to`, the position in `from` of the rule of the same name, or -1. Linear
// when both list the same names in the same order (a change of fields: the usual write),
// one hash lookup per rule otherwise; names compared as views, nothing copied.
std::vector<int> positions_by_name(const RuleSet& from, const RuleSet& to);

// True if a rule changed from `a` to `b` (same name) keeps its state.
bool same_state_identity(const Rule& a, const Rule& b);

// One line per rule that changes, then a summary line, e.g.
//   + per-tenant (added)
//   ~ dns: rate, burst (buckets kept)
//   ~ web: match (new buckets)
//   - old (removed)
//   3 rules: 1 added, 2 changed, 1 removed, 0 unchanged
// or "no change" when empty().
std::string format_rules_diff(const RulesDiff& diff);

}  // namespace sluice
