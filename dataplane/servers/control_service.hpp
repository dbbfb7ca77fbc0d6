// What sluiced's control socket does with a request (docs/CONTROL.md), apart from sockets:
// validate it, answer the reads from the copy of the counters the control loop publishes,
// and turn each write into the next RuleSet (rule_edits.hpp, the rules loader) applied
// through RulesTarget. A request that fails anywhere gets an error reply and changes nothing.
//
// Without a RulesTarget (null) the service is read-only: it answers the rules it was started
// with, and refuses writes as unsupported.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

#include "control_messages.hpp"
#include "counters.hpp"
#include "rules.hpp"
#include "rules_target.hpp"

namespace sluice {

class ControlService {
 public:
  ControlService(RulesTarget* target, RuleSet startup_rules)
      : target_(target), startup_rules_(std::move(startup_rules)) {}

  // Attaches the running dataplane (null: read-only again). Waits for a request using the
  // previous one to finish, so a target may be destroyed once this returns with null.
  void set_target(RulesTarget* target);

  // Makes `snap` what `stats` answers. Until the first call, `stats` is an error.
  void publish(const CountersSnapshot& snap);

  // Answers quickly (from copies, never waiting for the target): hello, stats.
  static bool is_quick(const wire::Request& r) {
    return r.op == wire::Op::hello || r.op == wire::Op::stats;
  }

  // The reply body to a request body. Thread-safe; writes are applied one at a time.
  std::string handle(std::string_view body);
  std::string execute(const wire::Request& request);

 private:
  std::string write(const wire::Request& r, RulesTarget* target);
  std::string with_target(const wire::Request& r);

  std::atomic<RulesTarget*> target_;
  std::mutex target_mu_;  // held while a request uses the target
  const RuleSet startup_rules_;
  std::mutex counters_mu_;
  std::string counters_text_;  // guarded by counters_mu_
  bool published_ = false;     // guarded by counters_mu_
};

}  // namespace sluice
