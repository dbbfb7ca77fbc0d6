#include "live_rules_target.hpp"

namespace sluice {

Result<RulesDiff> LiveRulesTarget::apply(RuleSet next) {
  std::lock_guard lock(mu_);
  if (dataplane_ == nullptr || dataplane_->stopped())
    return make_error("the dataplane is stopping: rules can no longer change");
  return pipeline_.apply(std::move(next), dataplane_->now_ns());
}

Result<std::vector<FlowRate>> LiveRulesTarget::top_flows(const TopFlowsQuery&) {
  return make_error("flows top is not supported by this sluiced yet (its workers keep no "
                    "per-flow rates)");
}

void LiveRulesTarget::stop_changes() {
  std::lock_guard lock(mu_);
  dataplane_ = nullptr;
}

}  // namespace sluice
