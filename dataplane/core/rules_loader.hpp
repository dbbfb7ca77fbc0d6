// Reads and writes rules files (SPEC §2). Loading validates everything the pipeline relies on
// (fields per algorithm, units, hierarchy) and calls check_rule_limits for each rule, so a
// RuleSet that loads can be compiled. Errors are "FILE:LINE: message"; any error rejects the
// whole file.
#pragma once

#include <cstdint>
#include <string>

#include "result.hpp"
#include "rules.hpp"

namespace sluice {

// Reads `path`; an unreadable file is "PATH: cannot open: <strerror>".
Result<RuleSet> load_rules_file(const std::string& path);

// Parses rules text; `filename` is only used to prefix messages.
Result<RuleSet> load_rules_text(const std::string& text, const std::string& filename);

// Writes a rules file that loads back to an equal RuleSet (every field except Rule::line,
// which becomes the line in the new text). Rates are written as pps or bit/s.
std::string dump_rules_yaml(const RuleSet& rules);
// One rule as it appears under `rules:` in such a file ("  - name: ...").
std::string dump_rule_yaml(const Rule& rule);

// Spellings shared with the CLI's listings; each is what the rules file accepts.
const char* algorithm_name(Algorithm a);                 // "token-bucket", ...
std::string key_name(KeyMode mode, uint8_t prefix_len);  // "src-ip", "src-prefix/24", ...
std::string format_action(const Action& a);              // "drop", "pass", "mark-dscp:46"
std::string format_cidr(const Cidr& c);                  // "192.0.2.0/24", "2001:db8::/32"
std::string format_duration(uint64_t ns);                // largest exact unit: "5ms", "90s", "1h"

}  // namespace sluice
