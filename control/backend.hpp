// What sluicectl asks of a backend (DESIGN: one Backend interface, one implementation per
// dataplane): today the sluiced control socket (socket_backend.hpp); the XDP backend (pinned
// BPF maps) will be a second implementation. make_backend (backend_factory.hpp) chooses.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "counters.hpp"
#include "result.hpp"
#include "rules.hpp"
#include "rules_diff.hpp"
#include "rules_target.hpp"

namespace sluice::ctl {

// Every call returns a Result (result.hpp) whose error kind says which exit code it deserves:
// invalid_input for bad usage or input, runtime otherwise (the backend is unreachable, cannot
// do it, or the rules moved on meanwhile).

// What a write did: the change rule by rule, and the generation it made.
struct AppliedChange {
  RulesDiff diff;
  uint64_t generation = 0;
  // sluiced's socket: microseconds from its read of the request to every worker running the
  // change (benchmarks read it; the XDP backend's change is one map write, none is given).
  std::optional<uint64_t> applied_us;
};

// A write may carry "only if the rules are still at generation G".
struct WriteOptions {
  std::optional<uint64_t> expect_generation;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The counters of SPEC §5, as of now (at most one control tick old).
  virtual Result<CountersSnapshot> stats() = 0;
  // The rules the dataplane runs.
  virtual Result<RuleSet> rules() = 0;

  // Rules text (a rules file holding only rules:, a list of rules or one rule); at the end,
  // or before the rule `before`. `filename` names the text in error messages.
  virtual Result<AppliedChange> add_rules(const std::string& text, const std::string& filename,
                                          const std::string& before, const WriteOptions& w) = 0;
  // Rules-file fields and their new values as in a rules file; nullopt removes the field.
  virtual Result<AppliedChange> set_rule(const std::string& name,
                                         const std::map<std::string, std::optional<std::string>>& fields,
                                         const WriteOptions& w) = 0;
  virtual Result<AppliedChange> delete_rule(const std::string& name, const WriteOptions& w) = 0;
  // A whole rules file, applied atomically.
  virtual Result<AppliedChange> load_config(const std::string& text, const std::string& filename,
                                            const WriteOptions& w) = 0;
  // What load_config would change, without applying it.
  virtual Result<RulesDiff> diff_config(const std::string& text, const std::string& filename) = 0;
  virtual Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& query) = 0;
};

}  // namespace sluice::ctl
