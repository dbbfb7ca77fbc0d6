// The Backend of a running sluiced, over its control socket: one connection per call, one
// request and its reply in the control protocol v2 (docs/CONTROL.md).
#pragma once

#include <string>

#include "backend.hpp"
#include "control_messages.hpp"

namespace sluice::ctl {

class SocketBackend final : public Backend {
 public:
  explicit SocketBackend(std::string path) : path_(std::move(path)) {}
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
  // Sends `request` and returns the result object of its reply, or the server's error with
  // the exit class its kind deserves.
  Result<nlohmann::json> ask(wire::Request request, int timeout_ms) const;
  Result<AppliedChange> write(wire::Request request, const WriteOptions& w) const;
  std::string path_;
};

}  // namespace sluice::ctl
