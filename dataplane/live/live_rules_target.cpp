#include "live_rules_target.hpp"

#include "flow_rates.hpp"

namespace sluice {

Result<RulesDiff> LiveRulesTarget::apply(RuleSet next) {
  std::lock_guard lock(mu_);
  if (dataplane_ == nullptr || dataplane_->stopped())
    return make_error("the dataplane is stopping: rules can no longer change");
  return pipeline_.apply(std::move(next), dataplane_->now_ns());
}

Result<std::vector<FlowRate>> LiveRulesTarget::top_flows(const TopFlowsQuery& query) {
  std::lock_guard lock(mu_);
  if (dataplane_ == nullptr || dataplane_->stopped())
    return make_error("the dataplane is stopping: its flows are no longer sampled");
  // The windows first: a rule applied after they were taken has no flows in them yet, and a
  // rule removed since is no longer listed.
  const std::vector<FlowWindow> windows = dataplane_->flow_windows();
  return rank_flows(windows, pipeline_.rule_identities(), query);
}

void LiveRulesTarget::stop_changes() {
  std::lock_guard lock(mu_);
  dataplane_ = nullptr;
}

}  // namespace sluice
