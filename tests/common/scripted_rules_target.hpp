// A RulesTarget for tests of the control server and sluicectl, with scripted flows: it
// compiles every rule set it is given into a real core Pipeline (so an apply fails where the
// dataplane's would, on rules the pipeline cannot compile) and keeps it, with the generation.
// It does not carry bucket state across a swap: the core's PipelineRulesTarget and the live
// dataplane's LiveRulesTarget do.
// top_flows reports the flows the test declared with add_flow, ordered and cut as asked, so
// tests can check what travels through the protocol.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "pipeline.hpp"
#include "rules_target.hpp"

namespace sluice::test {

class ScriptedRulesTarget final : public RulesTarget {
 public:
  static std::unique_ptr<ScriptedRulesTarget> create(RuleSet rules) {
    auto t = std::unique_ptr<ScriptedRulesTarget>(new ScriptedRulesTarget());
    auto applied = t->apply(std::move(rules));
    if (!applied) return nullptr;
    t->generation_ = 1;
    return t;
  }

  static PipelineOptions options() {
    PipelineOptions opts;
    opts.default_max_flows = 1024;
    opts.hash_seed = 1;
    return opts;
  }

  RuleSet rules() const override {
    std::lock_guard lock(mu_);
    return rules_;
  }
  uint64_t generation() const override { return generation_.load(); }

  Result<RulesDiff> apply(RuleSet next) override {
    std::lock_guard lock(mu_);
    auto pipeline = Pipeline::create(next, options());
    if (!pipeline) return pipeline.error();
    RulesDiff diff = diff_rules(rules_, next);
    pipeline_ = std::move(pipeline).value();
    rules_ = std::move(next);
    ++generation_;
    ++applies_;
    return diff;
  }

  // What apply() would refuse: the rules that make no pipeline.
  Status check(const RuleSet& next) const override {
    auto pipeline = Pipeline::create(next, options());
    if (!pipeline) return pipeline.error();
    return Ok{};
  }

  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& q) override {
    std::lock_guard lock(mu_);
    std::vector<FlowRate> out;
    for (const FlowRate& f : flows_)
      if (q.rule.empty() || f.rule == q.rule) out.push_back(f);
    std::sort(out.begin(), out.end(), [&](const FlowRate& a, const FlowRate& b) {
      return q.by_bytes ? a.bits_per_sec > b.bits_per_sec : a.packets_per_sec > b.packets_per_sec;
    });
    if (out.size() > q.count) out.resize(q.count);
    return out;
  }

  void add_flow(FlowRate f) {
    std::lock_guard lock(mu_);
    flows_.push_back(std::move(f));
  }
  int applies() const { return applies_.load(); }
  const Pipeline* pipeline() const { return pipeline_.get(); }

 private:
  ScriptedRulesTarget() = default;
  mutable std::mutex mu_;
  RuleSet rules_;
  std::unique_ptr<Pipeline> pipeline_;
  std::vector<FlowRate> flows_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> applies_{0};
};

}  // namespace sluice::test
