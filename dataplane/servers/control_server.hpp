// sluiced's control socket (SPEC §1, §4: `--control SOCK`): a Unix stream socket, mode 0600,
// served by a thread of its own with the protocol of control_protocol.hpp.
//
// The server never touches the dataplane: the control loop publishes the counters every tick
// and the server answers from that copy (as the telemetry commands do), so a slow or hostile
// client can delay other clients, never a packet. Read-only for now: rules change only by
// restarting sluiced with another --config.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "counters.hpp"
#include "result.hpp"
#include "stream_server.hpp"

namespace sluice {

class ControlServer {
 public:
  // Listens at `path`, replacing a stale socket file (one nobody listens on) and creating its
  // directory (mode 0700) if only that last level is missing. Errors: the
  // path is too long for a socket, exists and is not a socket, another process listens
  // there, or its directory does not take the socket. `rules_yaml`: the running rules.
  static Result<std::unique_ptr<ControlServer>> start(const std::string& path,
                                                      std::string rules_yaml);
  // Stops serving (a request being answered is finished) and removes the socket file.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Makes `snap` what `stats` answers. Until the first call, `stats` answers an error.
  void publish(const CountersSnapshot& snap);

  // The reply to one request line (without its '\n'). Exposed for tests.
  std::string answer(std::string_view request) const;

 private:
  ControlServer(std::string path, std::string rules_yaml)
      : path_(std::move(path)), rules_yaml_(std::move(rules_yaml)) {}
  void serve_one(int fd) const;

  const std::string path_;
  const std::string rules_yaml_;
  mutable std::mutex mu_;
  std::string counters_text_;  // encode_counters() of the last publish(); guarded by mu_
  bool published_ = false;     // guarded by mu_
  std::unique_ptr<StreamServer> server_;  // last: stops before what it serves goes
};

}  // namespace sluice
