// The running dataplane as a RulesTarget (rules_target.hpp): what a control server drives.
// apply() swaps a new rules snapshot in on every worker (Pipeline::apply() over the workers'
// RCU) at the workers' clock; top_flows() ranks the workers' sampled flow windows
// (flow_sampler.hpp, flow_rates.hpp), handed over at their burst boundaries; once the
// dataplane stops, both are refused.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "dataplane.hpp"
#include "pipeline.hpp"
#include "rules_target.hpp"

namespace sluice {

class LiveRulesTarget final : public RulesTarget {
 public:
  // Both must outlive this object (or stop_changes() must have been called).
  LiveRulesTarget(Pipeline& pipeline, Dataplane& dataplane)
      : pipeline_(pipeline), dataplane_(&dataplane) {}

  RuleSet rules() const override { return pipeline_.rules_copy(); }
  uint64_t generation() const override { return pipeline_.generation(); }
  Result<RulesDiff> apply(RuleSet next) override;
  Status check(const RuleSet& next) const override { return pipeline_.check(next); }
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& query) override;

  // From now on apply() refuses (before the dataplane stops: its counters are final then).
  // Logs how long the applied changes took to reach every worker (by the workers' clocks).
  void stop_changes();

 private:
  // How the snapshot applied last spread (Pipeline::swap_visibility), once it is replaced.
  void record_visibility();
  struct Visibility {
    uint32_t workers_entered = 0;
    uint64_t after_ns = 0;
  };
  static constexpr size_t kVisibilityKept = size_t{1} << 20;
  std::vector<Visibility> visibility_;  // one per applied change, the first kVisibilityKept
  uint64_t applied_generation_ = 0;     // 0: none applied here yet
  Pipeline& pipeline_;
  std::mutex mu_;
  Dataplane* dataplane_;  // null once stopped
};

}  // namespace sluice
