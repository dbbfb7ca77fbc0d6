// The Backend of the XDP program on one interface (ebpf/xdp_backend.hpp), through the maps
// pinned under /sys/fs/bpf/sluice/IFACE: the second implementation of backend.hpp, chosen by
// make_backend for `--xdp IFACE`. Edits are the control server's own pure functions
// (rule_edits.hpp) applied here, then one double-buffered switch (XdpProgram::set_rules), so
// a rule keeps its buckets exactly as on sluiced. Each sluicectl run opens the pins afresh.
#pragma once

#include <memory>
#include <string>

#include "backend.hpp"

namespace sluice::xdp {
class XdpBackend;
}

namespace sluice::ctl {

class XdpCtlBackend final : public Backend {
 public:
  // Refused (exit 1) when sluice is not attached to `iface`, with the message saying so.
  static Result<std::unique_ptr<Backend>> open(const std::string& iface);
  ~XdpCtlBackend() override;

  Result<CountersSnapshot> stats() override;
  Result<RuleSet> rules() override;
  Result<AppliedChange> add_rules(const std::string& text, const std::string& filename,
                                  const std::string& before, const WriteOptions& w) override;
  Result<AppliedChange> set_rule(const std::string& name,
                                 const std::map<std::string, std::optional<std::string>>& fields,
                                 const WriteOptions& w) override;
  Result<AppliedChange> delete_rule(const std::string& name, const WriteOptions& w) override;
  Result<AppliedChange> load_config(const std::string& text, const std::string& filename,
                                    const WriteOptions& w) override;
  Result<RulesDiff> diff_config(const std::string& text, const std::string& filename) override;
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& query) override;

 private:
  explicit XdpCtlBackend(std::unique_ptr<xdp::XdpBackend> be);
  // Runs `next` (or the edit's error, an input error: exit 2) if the generation still matches.
  Result<AppliedChange> apply(Result<RuleSet> next, const WriteOptions& w);
  std::unique_ptr<xdp::XdpBackend> be_;
};

}  // namespace sluice::ctl
