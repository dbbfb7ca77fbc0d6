// What a control server asks of a running dataplane: the rules it runs, a new rule set to
// run instead, and its busiest flows. The DPDK dataplane implements it (snapshot swap on
// every worker); a control server (socket, tests) only calls it. One interface, so the
// protocol code needs no DPDK and its tests can drive a real core pipeline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "result.hpp"
#include "rules.hpp"
#include "rules_diff.hpp"

namespace sluice {

// One flow's recent rate, for `sluicectl flows top`.
struct FlowRate {
  std::string rule;  // the rule whose bucket it is
  std::string key;   // the key as an operator reads it ("192.0.2.7", "10.0.0.1:5353 > ...")
  double packets_per_sec = 0;
  double bits_per_sec = 0;
};

struct TopFlowsQuery {
  size_t count = 10;
  std::string rule;       // empty: every keyed rule
  bool by_bytes = false;  // order by bit/s instead of packets/s
};

class RulesTarget {
 public:
  virtual ~RulesTarget() = default;

  // The rule set running now, and its generation: a number that grows by one with every
  // applied change, so a client can ask for a change "only if nothing changed since G".
  virtual RuleSet rules() const = 0;
  virtual uint64_t generation() const = 0;

  // Runs `next` instead of the current rules on every worker, atomically: when this returns,
  // every worker classifies with `next` and no packet is classified against a mix; rules
  // that keep their state identity (rules_diff.hpp) keep their buckets, flows and counters.
  // An error (e.g. a shaping horizon the workers cannot hold, memory) changes nothing.
  // `next` must be a validated RuleSet (the loader's output). Thread-safe; serialised.
  virtual Result<RulesDiff> apply(RuleSet next) = 0;

  // The error apply(next) would return now, found without changing or allocating anything
  // (a dry run: `config diff` says a change would be refused before anyone loads it).
  virtual Status check(const RuleSet& next) const = 0;

  // The `count` busiest flows now. Must not stop or slow a worker.
  virtual Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& query) = 0;
};

}  // namespace sluice
