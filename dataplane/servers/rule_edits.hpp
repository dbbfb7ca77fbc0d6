// The edits `sluicectl rule add/set/del` make to a running rule set, as pure functions: each
// builds the next RuleSet from the current one and validates the whole of it with the rules
// loader (so an edit is held to exactly what a rules file is: names, units, parents, cycles),
// or says what is wrong and changes nothing. Errors in text the client sent carry its
// file:line; errors that only the combination shows name the rule.
//
// How: the running rules are dumped as a rules file (dump_rule_yaml) and the client's rules
// appended to the same `rules:` list, line for line, so the loader's line numbers map back to
// the client's file. A new rule may thus name a running rule as its parent.
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
