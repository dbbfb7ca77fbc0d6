// sluiced's metrics endpoint (SPEC §5: `--metrics HOST:PORT`): HTTP on a TCP address the
// operator names (nothing listens on the network otherwise, SPEC §4), serving the counters
// in the Prometheus text format at /metrics (counters_prometheus.hpp). Like the control
// socket, it answers from the copy the control loop publishes every tick.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "counters.hpp"
#include "result.hpp"
#include "stream_server.hpp"

namespace sluice {

class MetricsServer {
 public:
  // `address`: HOST:PORT, HOST a name or an IPv4 address, or [IPv6]:PORT; PORT 0 picks a
  // free one (see port()). Errors: a malformed address, a host that does not resolve, an
  // address that cannot be bound (in use, not local).
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address);
  ~MetricsServer() = default;

  void publish(const CountersSnapshot& snap);
  uint16_t port() const { return port_; }

  // The whole HTTP response to a request whose head is `head`. Exposed for tests.
  std::string respond(std::string_view head) const;

 private:
  explicit MetricsServer(uint16_t port) : port_(port) {}
  void serve_one(int fd) const;

  const uint16_t port_;
  mutable std::mutex mu_;
  CountersSnapshot snapshot_;  // guarded by mu_
  bool published_ = false;     // guarded by mu_
  std::unique_ptr<StreamServer> server_;  // last: stops before what it serves goes
};

}  // namespace sluice
