// The Backend of a running sluiced, over its control socket (control_protocol.hpp).
#pragma once

#include <string>

#include "backend.hpp"

namespace sluice::ctl {

class SocketBackend final : public Backend {
 public:
  explicit SocketBackend(std::string path) : path_(std::move(path)) {}
  Result<CountersSnapshot> stats() override;
  Result<RuleSet> rules() override;

 private:
  // Sends one request line and returns the reply's body (or the server's error).
  Result<std::string> ask(std::string_view request) const;
  std::string path_;
};

}  // namespace sluice::ctl
