#include "live_rules_target.hpp"

#include <algorithm>

#include "log.hpp"

namespace sluice {

Result<RulesDiff> LiveRulesTarget::apply(RuleSet next) {
  std::lock_guard lock(mu_);
  if (dataplane_ == nullptr || dataplane_->stopped())
    return make_error("the dataplane is stopping: rules can no longer change");
  record_visibility();
  auto diff = pipeline_.apply(std::move(next), dataplane_->now_ns());
  if (diff) applied_generation_ = pipeline_.generation();
  return diff;
}

void LiveRulesTarget::record_visibility() {
  if (applied_generation_ == 0 || visibility_.size() >= kVisibilityKept) return;
  const Pipeline::SwapVisibility v = pipeline_.swap_visibility();
  if (v.generation != applied_generation_) return;
  visibility_.push_back({v.workers_entered, v.last_entered_after_ns});
  applied_generation_ = 0;
}

Result<std::vector<FlowRate>> LiveRulesTarget::top_flows(const TopFlowsQuery&) {
  return make_error("flows top is not supported by this sluiced yet (its workers keep no "
                    "per-flow rates)");
}

void LiveRulesTarget::stop_changes() {
  std::lock_guard lock(mu_);
  record_visibility();
  dataplane_ = nullptr;
  if (visibility_.empty()) return;
  // Only changes that every worker took count: one replaced before a worker's next loop
  // (changes faster than loops) never reached it, and says nothing about the delay.
  uint32_t workers = 0;
  for (const Visibility& v : visibility_) workers = std::max(workers, v.workers_entered);
  if (workers == 0) {
    live_log("rule changes: %zu applied, while no worker ran", visibility_.size());
    return;
  }
  std::vector<uint64_t> ns;
  for (const Visibility& v : visibility_)
    if (v.workers_entered == workers) ns.push_back(v.after_ns);
  std::sort(ns.begin(), ns.end());
  live_log("rule changes: %zu applied, %zu taken by all %u workers %.1f / %.1f / %.1f us "
           "(p50 / p99 / max, their clocks) after apply() was called",
           visibility_.size(), ns.size(), workers, double(ns[ns.size() / 2]) / 1e3,
           double(ns[ns.size() * 99 / 100]) / 1e3, double(ns.back()) / 1e3);
}

}  // namespace sluice
