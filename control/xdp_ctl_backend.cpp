#include "xdp_ctl_backend.hpp"

#include <net/if.h>

#include <algorithm>
#include <chrono>

#include "rule_edits.hpp"
#include "rules_loader.hpp"
#include "xdp_backend.hpp"

namespace sluice::ctl {

XdpCtlBackend::XdpCtlBackend(std::unique_ptr<xdp::XdpBackend> be) : be_(std::move(be)) {}
XdpCtlBackend::~XdpCtlBackend() = default;  // leaves the program attached (it is not ours)

Result<std::unique_ptr<Backend>> XdpCtlBackend::open(const std::string& iface) {
  if (if_nametoindex(iface.c_str()) == 0)
    return Result<std::unique_ptr<Backend>>(invalid_input("--xdp " + iface + ": no such interface"));
  auto be = xdp::XdpBackend::open(iface);
  if (!be) return Result<std::unique_ptr<Backend>>(be.error());
  return std::unique_ptr<Backend>(new XdpCtlBackend(std::move(*be)));
}

Result<CountersSnapshot> XdpCtlBackend::stats() {
  auto c = be_->counters();
  if (!c) return Result<CountersSnapshot>(c.error());
  auto flows = be_->flow_counts();
  if (!flows) return Result<CountersSnapshot>(flows.error());
  const RuleSet& rules = be_->rules();
  CountersSnapshot snap;
  for (size_t i = 0; i < rules.rules.size() && i < c->per_rule.size(); ++i)
    snap.rules.push_back(RuleSnapshot{rules.rules[i].name, c->per_rule[i],
                                      i < flows->size() ? (*flows)[i].active : 0,
                                      i < flows->size() ? (*flows)[i].evicted : 0});
  snap.default_rule.name = "default";
  snap.default_rule.traffic = c->default_rule();
  return snap;
}

Result<RuleSet> XdpCtlBackend::rules() { return be_->rules(); }

Result<AppliedChange> XdpCtlBackend::apply(Result<RuleSet> next, const WriteOptions& w) {
  if (!next) return Result<AppliedChange>(with_kind(next.error(), ErrorKind::invalid_input));
  if (w.expect_generation && *w.expect_generation != be_->generation())
    return Result<AppliedChange>(make_error("the rules changed meanwhile (generation " +
                                            std::to_string(be_->generation()) + ", expected " +
                                            std::to_string(*w.expect_generation) + ")"));
  AppliedChange change;
  change.diff = diff_rules(be_->rules(), *next);
  if (Status s = be_->set_rules(*next); !s) return Result<AppliedChange>(with_kind(s.error(), ErrorKind::invalid_input));
  change.generation = be_->generation();
  return change;
}

Result<AppliedChange> XdpCtlBackend::add_rules(const std::string& text,
                                               const std::string& filename,
                                               const std::string& before, const WriteOptions& w) {
  return apply(sluice::add_rules(be_->rules(), text, filename, before), w);
}

Result<AppliedChange> XdpCtlBackend::set_rule(
    const std::string& name, const std::map<std::string, std::optional<std::string>>& fields,
    const WriteOptions& w) {
  return apply(set_rule_fields(be_->rules(), name, fields), w);
}

Result<AppliedChange> XdpCtlBackend::delete_rule(const std::string& name, const WriteOptions& w) {
  return apply(sluice::delete_rule(be_->rules(), name), w);
}

Result<AppliedChange> XdpCtlBackend::load_config(const std::string& text,
                                                 const std::string& filename,
                                                 const WriteOptions& w) {
  return apply(load_rules_text(text, filename), w);
}

Result<RulesDiff> XdpCtlBackend::diff_config(const std::string& text,
                                             const std::string& filename) {
  auto next = load_rules_text(text, filename);
  if (!next) return Result<RulesDiff>(with_kind(next.error(), ErrorKind::invalid_input));
  // Refused as load_config() would refuse it (apply()'s kind): a dry run must not say a load
  // would change what the program then refuses to run.
  if (Status s = be_->check_rules(*next); !s)
    return Result<RulesDiff>(with_kind(s.error(), ErrorKind::invalid_input));
  return diff_rules(be_->rules(), *next);
}

// Rates over 250 ms: long enough for a flow at 10 pps to show, short for an operator.
Result<std::vector<FlowRate>> XdpCtlBackend::top_flows(const TopFlowsQuery& query) {
  const bool known_rule =
      query.rule.empty() || std::any_of(be_->rules().rules.begin(), be_->rules().rules.end(),
                                        [&](const Rule& r) { return r.name == query.rule; });
  auto top = be_->top_flows(query, std::chrono::milliseconds(250));
  if (!top)
    return Result<std::vector<FlowRate>>(
        with_kind(top.error(), known_rule ? ErrorKind::runtime : ErrorKind::invalid_input));
  return std::move(*top);
}

}  // namespace sluice::ctl
