// A core Pipeline as a RulesTarget (rules_target.hpp), for unit tests and the control
// protocol's tests: changes apply at the time an injected clock gives. Workers of the
// pipeline, if any, run under the pipeline's GracePeriod (Pipeline::set_grace_period).
// `flows top` reads a FlowSampler the caller feeds on the same thread (observe() per burst,
// tick() between them); without one it is refused.
#pragma once

#include <functional>

#include "flow_rates.hpp"
#include "flow_sampler.hpp"
#include "pipeline.hpp"
#include "rules_target.hpp"

namespace sluice {

class PipelineRulesTarget final : public RulesTarget {
 public:
  PipelineRulesTarget(Pipeline& pipeline, std::function<uint64_t()> now_ns,
                      const FlowSampler* flows = nullptr)
      : pipeline_(pipeline), now_ns_(std::move(now_ns)), flows_(flows) {}

  RuleSet rules() const override { return pipeline_.rules_copy(); }
  uint64_t generation() const override { return pipeline_.generation(); }
  Result<RulesDiff> apply(RuleSet next) override { return pipeline_.apply(std::move(next), now_ns_()); }
  Status check(const RuleSet& next) const override { return pipeline_.check(next); }
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& query) override {
    if (flows_ == nullptr)
      return make_error("flows top is not available here (nothing samples this pipeline's flows)");
    return rank_flows({flows_->last_window(now_ns_())}, pipeline_.rule_identities(), query);
  }

 private:
  Pipeline& pipeline_;
  std::function<uint64_t()> now_ns_;
  const FlowSampler* flows_;
};

}  // namespace sluice
