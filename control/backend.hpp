// What sluicectl asks of a backend (DESIGN: one Backend interface, one implementation per
// dataplane). Today: the sluiced control socket. The XDP backend (pinned maps) is not built.
#pragma once

#include "counters.hpp"
#include "result.hpp"
#include "rules.hpp"

namespace sluice::ctl {

class Backend {
 public:
  virtual ~Backend() = default;
  // The counters of SPEC §5, as of now (at most one control tick old).
  virtual Result<CountersSnapshot> stats() = 0;
  // The rules the dataplane runs.
  virtual Result<RuleSet> rules() = 0;
};

}  // namespace sluice::ctl
