// sluiced's control socket (SPEC §1, §4: `--control SOCK`): a Unix stream socket, mode 0600,
// speaking the control protocol v2 (docs/CONTROL.md) to many clients at once.
//
// One event-loop thread owns every connection, with non-blocking sockets: it reads what has
// arrived, answers the quick requests (hello, stats) at once and hands the others (rules,
// diffs, writes, flows) to one worker thread, which applies writes one at a time. So a
// client that stalls, trickles a byte a second, never reads its reply or sends garbage holds
// nothing but its own connection, which the deadlines below end; it delays no other client
// and never a packet. Memory is bounded: one frame of at most 16 MiB per connection, at most
// max_pending_bytes announced across them all, at most max_connections connections.
//
// Only the user who started sluiced (and root) may connect: a peer of another uid is refused
// (SO_PEERCRED), even if the socket's mode were changed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "control_loop.hpp"
#include "control_service.hpp"
#include "counters.hpp"
#include "result.hpp"
#include "rules.hpp"
#include "rules_target.hpp"

namespace sluice {

class ControlServer {
 public:
  // Listens at `path`, replacing a stale socket file (one nobody listens on) and creating its
  // directory (mode 0700) if only that last level is missing. Errors: the path is too long
  // for a socket, exists and is not a socket, another process listens there, or its
  // directory does not take the socket. `target`: the running dataplane's rules (null: a
  // read-only server answering `startup_rules`).
  static Result<std::unique_ptr<ControlServer>> start(const std::string& path,
                                                      RuleSet startup_rules,
                                                      RulesTarget* target = nullptr,
                                                      ControlLimits limits = {});
  // Stops serving (a write being applied is finished) and removes the socket file.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Makes `snap` what `stats` answers. Until the first call, `stats` answers an error.
  void publish(const CountersSnapshot& snap);
  // Answers `stats` from `source` (sluiced: the one its control loop serves on demand).
  void use_counters(std::shared_ptr<CountersSource> source) { service_->set_counters(std::move(source)); }

  // Attaches the running dataplane's rules once it exists (the server starts before the EAL);
  // null detaches it, waiting for a request using it. Until attached: read-only.
  void set_target(RulesTarget* target) { service_->set_target(target); }

  // Where the requests handed to the worker thread spent their time (ControlLoop::timings).
  std::vector<RequestTiming> request_timings() const;

  // Connections open now (for tests and the soak).
  size_t connections() const;

 private:
  ControlServer(std::string path, std::unique_ptr<ControlService> service);

  const std::string path_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<ControlLoop> loop_;  // last: stops before what it serves goes
};

}  // namespace sluice
