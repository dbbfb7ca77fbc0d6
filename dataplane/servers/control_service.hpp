// What sluiced's control socket does with a request (docs/CONTROL.md), apart from sockets:
// validate it, answer the reads from the counters the control loop takes when asked
// (CountersSource; `stats` is encoded when requested, once per snapshot),
// and turn each write into the next RuleSet (rule_edits.hpp, the rules loader) applied
// through RulesTarget. A request that fails anywhere gets an error reply and changes nothing.
//
// Without a RulesTarget (null) the service is read-only: it answers the rules it was started
// with, and refuses writes and `flows.top` as `runtime` errors that say why: sluiced serves its
// socket before its dataplane is up (starting: try again) and after its workers have stopped
// (stopping), and attaches its target in between.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "control_messages.hpp"
#include "counters.hpp"
#include "counters_source.hpp"
#include "rules.hpp"
#include "rules_target.hpp"

namespace sluice {

class ControlService {
 public:
  ControlService(RulesTarget* target, RuleSet startup_rules)
      : target_(target), had_target_(target != nullptr),
        startup_rules_(std::move(startup_rules)) {}

  // Attaches the running dataplane (null: read-only again). Waits for a request using the
  // previous one to finish, so a target may be destroyed once this returns with null.
  void set_target(RulesTarget* target);

  // `stats` answers counters at most this old (docs/CONTROL.md), waiting at most
  // kCountersPatience for fresh ones: it is answered on the event loop's thread, which must
  // not hold other clients longer (100 ms, ControlLoop).
  static constexpr std::chrono::milliseconds kCountersMaxAge{20};
  static constexpr std::chrono::milliseconds kCountersPatience{50};

  // Makes `snap` what `stats` answers (on the service's current source). Until the first
  // snapshot, `stats` is an error.
  void publish(const CountersSnapshot& snap) { counters()->publish(snap); }
  // Where `stats` takes its counters from: by default a source of its own that publish()
  // fills; sluiced hands the one its control loop serves on demand.
  void set_counters(std::shared_ptr<CountersSource> source);

  // Answers quickly (from copies, never waiting for the target): hello, stats.
  static bool is_quick(const wire::Request& r) {
    return r.op == wire::Op::hello || r.op == wire::Op::stats;
  }

  // The reply body to a request body. Thread-safe; writes are applied one at a time.
  std::string handle(std::string_view body);
  // `received_ns` (steady clock, 0: not known): when the request's last byte was read. A
  // write's reply then says how long after it every worker ran the change (`applied_us`).
  std::string execute(const wire::Request& request, uint64_t received_ns = 0);

 private:
  std::string write(const wire::Request& r, RulesTarget* target, uint64_t received_ns);
  std::string with_target(const wire::Request& r, uint64_t received_ns);

  // Why there is no target now (target_ null): none was ever attached, or it was detached.
  std::string no_target_reason(const wire::Request& r) const;

  std::atomic<RulesTarget*> target_;
  std::atomic<bool> had_target_;  // a target was attached once (then null means stopping)
  std::mutex target_mu_;  // held while a request uses the target
  const RuleSet startup_rules_;
  std::shared_ptr<CountersSource> counters() const;
  std::string stats_reply(uint64_t id);

  mutable std::mutex counters_mu_;
  std::shared_ptr<CountersSource> counters_ = std::make_shared<CountersSource>();  // guarded
  // `stats`'s encoding of the snapshot numbered encoded_seq_ (0: none yet): one encoding per
  // snapshot however many ask.
  std::mutex encoded_mu_;
  std::shared_ptr<CountersSource> encoded_from_;  // guarded by encoded_mu_
  uint64_t encoded_seq_ = 0;                      // guarded by encoded_mu_
  std::string counters_text_;                     // guarded by encoded_mu_
};

}  // namespace sluice
