// A core Pipeline as a RulesTarget (rules_target.hpp), for unit tests and the control
// protocol's tests: changes apply at the time an injected clock gives. Workers of the
// pipeline, if any, run under the pipeline's GracePeriod (Pipeline::set_grace_period).
#pragma once

#include <functional>

#include "pipeline.hpp"
#include "rules_target.hpp"

namespace sluice {

class PipelineRulesTarget final : public RulesTarget {
 public:
  PipelineRulesTarget(Pipeline& pipeline, std::function<uint64_t()> now_ns)
      : pipeline_(pipeline), now_ns_(std::move(now_ns)) {}

  RuleSet rules() const override { return pipeline_.rules_copy(); }
  uint64_t generation() const override { return pipeline_.generation(); }
  Result<RulesDiff> apply(RuleSet next) override { return pipeline_.apply(std::move(next), now_ns_()); }
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery&) override {
    return make_error("flows top is not supported yet (the pipeline keeps no per-flow rates)");
  }

 private:
  Pipeline& pipeline_;
  std::function<uint64_t()> now_ns_;
};

}  // namespace sluice
