// The running dataplane as a RulesTarget (rules_target.hpp): what a control server drives.
// apply() swaps a new rules snapshot in on every worker (Pipeline::apply() over the workers'
// RCU) at the workers' clock; once the dataplane stops, changes are refused.
#pragma once

#include <mutex>

#include "dataplane.hpp"
#include "pipeline.hpp"
#include "rules_target.hpp"

namespace sluice {

class LiveRulesTarget final : public RulesTarget {
 public:
  // Both must outlive this object (or stop_changes() must have been called).
  LiveRulesTarget(Pipeline& pipeline, const Dataplane& dataplane)
      : pipeline_(pipeline), dataplane_(&dataplane) {}

  RuleSet rules() const override { return pipeline_.rules_copy(); }
  uint64_t generation() const override { return pipeline_.generation(); }
  Result<RulesDiff> apply(RuleSet next) override;
  // Not yet: the workers keep no per-flow rates.
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& query) override;

  // From now on apply() refuses (before the dataplane stops: its counters are final then).
  void stop_changes();

 private:
  Pipeline& pipeline_;
  std::mutex mu_;
  const Dataplane* dataplane_;  // null once stopped
};

}  // namespace sluice
