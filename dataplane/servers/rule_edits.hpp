// The edits `sluicectl rule add/set/del` make to a running rule set, as pure functions: each
// builds the next RuleSet from the current one, held to exactly what a rules file is (names,
// units, parents, cycles), or says what is wrong and changes nothing. Errors in text the
// client sent carry its file:line; errors that only the combination shows name the rule.
//
// How: only what changes goes through the rules loader (the client's rules, or the one edited
// rule written out with dump_rule_yaml and its fields replaced), without the loader's checks
// across rules (load_rules_text_unlinked); those then run on the structs of the whole next set
// (names against the running rules, link_rules for parents, cycles and chain depth). A change
// of one rule among 1,000 thus reads one rule, not the file. A new rule may name a running
// rule as its parent.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "result.hpp"
#include "rules.hpp"

namespace sluice {

// `text`: a rules file holding only `rules:`, a list of rules, or a single rule mapping.
// Added at the end, or before the rule named `before`.
Result<RuleSet> add_rules(const RuleSet& current, const std::string& text,
                          const std::string& filename, const std::string& before);

// Sets rules-file fields of rule `name` ("rate": "2000pps", "burst": "100", "action": "drop";
// a value as in a rules file, on one line); nullopt removes a field (e.g. "parent").
Result<RuleSet> set_rule_fields(const RuleSet& current, const std::string& name,
                                const std::map<std::string, std::optional<std::string>>& fields);

// Refused while another rule names `name` as its parent.
Result<RuleSet> delete_rule(const RuleSet& current, const std::string& name);

}  // namespace sluice
