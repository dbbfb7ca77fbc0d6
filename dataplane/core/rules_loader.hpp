// Reads and writes rules files (SPEC §2). Loading validates everything the pipeline relies on
// (fields per algorithm, units, hierarchy) and calls check_rule_limits for each rule, so a
// RuleSet that loads can be compiled: anything Pipeline::create refuses for a rule (its profile,
// its parent chain, its flow-table size) is refused here first, with its line. Errors are
// "FILE:LINE: message" (or "FILE: message" for the file as a whole); any error rejects the
// whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "result.hpp"
#include "rules.hpp"

namespace sluice {

// What one load may cost (docs/SEMANTICS.md, "Rules file limits"); past any of them the file
// is rejected, at the line where it went past when there is one. Chosen well above what a
// rules file needs (the examples are ~1 KiB, 4 levels deep, at most 8 fields in a rule), and
// so that no input can make the loader hang or take much memory: the worst 16 MiB files we
// found (2^21 nodes, 65,536 rules) take ~1 s and ~270 MB (docs/SEMANTICS.md).
constexpr size_t kMaxRulesFileBytes = size_t{16} << 20;  // whole rules files go over sockets too
constexpr size_t kMaxRules = 65536;                      // items of the "rules" list
constexpr size_t kMaxNestingDepth = 16;                  // maps and lists open at once
constexpr size_t kMaxValueBytes = 256;                   // of any key or value
constexpr size_t kMaxMapFields = 64;                     // keys of any one map
constexpr size_t kMaxYamlNodes = size_t{1} << 21;        // keys, values and items in a file

// Reads `path`; an unreadable file is "PATH: cannot open: <strerror>".
Result<RuleSet> load_rules_file(const std::string& path);

// Parses rules text; `name` is only used to prefix messages. Never throws; for any input it
// returns a RuleSet or an error (the fuzz target's entry point).
Result<RuleSet> load_rules_text(std::string_view text, std::string_view name);

// The loader in two halves, for rule sets edited in memory (`sluicectl rule add/set/del`,
// dataplane/servers/rule_edits.hpp), which re-read only the rules that change:
//  - load_rules_text_unlinked: every check of load_rules_text but those across rules' parents
//    (names are still unique within the text), parent_index left -1, so that a rule may name
//    one that is not in the text; *parent_lines gets each rule's "parent" line (0: none).
//  - link_rules: the checks across rules, on the structs: every parent known (parent_index
//    resolved), hierarchy shapes, no cycle, chains at most kMaxParentChain deep.
//    `error(i, message)` makes the error about rule i's parent field (load_rules_text:
//    "FILE:LINE: message" at its line).
// load_rules_text is the first followed by the second.
Result<RuleSet> load_rules_text_unlinked(std::string_view text, std::string_view name,
                                         std::vector<int>* parent_lines);
Status link_rules(RuleSet& set, const std::function<Error(size_t, const std::string&)>& error);

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
