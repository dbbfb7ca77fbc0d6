// sluiced's metrics endpoint (SPEC §5: `--metrics HOST:PORT`): HTTP on a TCP address the
// operator names (nothing listens on the network otherwise, SPEC §4), serving the counters
// in the Prometheus text format at /metrics (counters_prometheus.hpp). Like the control
// socket, it answers from the counters the control loop takes when asked (CountersSource:
// at most kCountersMaxAge old), encoded when scraped, once per snapshot.
//
// Served by cpp-httplib (Debian libcpp-httplib-dev). It, like civetweb, gives each
// connection a thread for as long as it is open, so a fixed pool is exhausted by as many idle
// or stalled clients as it has threads; we give it a task queue of our own that starts a
// thread per connection (small stacks) up to max_connections, so idle, trickling and
// never-reading clients hold only their own thread until their timeout, and every other
// scrape is answered at once. Why httplib over civetweb: the task queue is a supported hook,
// timeouts are per connection with sub-second resolution, and it is plain C++.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "counters.hpp"
#include "counters_source.hpp"
#include "result.hpp"

namespace httplib {
class Server;
}

namespace sluice {

struct MetricsLimits {
  size_t max_connections = 1024;  // open at once; more wait for a thread
  int read_timeout_ms = 2000;     // per read of a request
  int write_timeout_ms = 2000;    // per write of a reply: a client that never reads is dropped
  int keep_alive_timeout_ms = 2000;  // idle between requests
};

class MetricsServer {
 public:
  // `address`: HOST:PORT, HOST a name or an IPv4 address, or [IPv6]:PORT; PORT 0 picks a
  // free one (see port()). Errors: a malformed address, a host that does not resolve, an
  // address that cannot be bound (in use, not local).
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address,
                                                      MetricsLimits limits = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  static constexpr std::chrono::milliseconds kCountersMaxAge{20};
  // A scrape has its own thread: it may wait out a snapshot that waits for a worker.
  static constexpr std::chrono::milliseconds kCountersPatience{250};

  // Makes `snap` what /metrics answers (on the current source).
  void publish(const CountersSnapshot& snap);
  // Answers from `source` (sluiced: the one its control loop serves on demand).
  void use_counters(std::shared_ptr<CountersSource> source);
  uint16_t port() const { return port_; }
  // Connections served now, each on a thread of its own (at most max_connections).
  size_t connections() const { return serving_->load(); }

 private:
  MetricsServer() = default;

  uint16_t port_ = 0;
  // What /metrics answers; shared with the handler, which may outlive this (see ~).
  struct Published {
    std::mutex mu;
    std::shared_ptr<CountersSource> source = std::make_shared<CountersSource>();  // guarded by mu
    // The exposition of snapshot `seq` of `from` (0: none yet).
    std::shared_ptr<CountersSource> from;  // guarded by mu
    uint64_t seq = 0;                      // guarded by mu
    std::shared_ptr<const std::string> body;  // guarded by mu
    // The snapshot a scrape is encoding now, so that scrapes of it arriving together wait for
    // that text instead of encoding it again (ten of megabytes each kept the CPUs busy past
    // the shutdown wait); a scrape of another snapshot does not wait.
    std::shared_ptr<CountersSource> encoding_from;  // guarded by mu
    uint64_t encoding_seq = 0;                      // guarded by mu
    std::condition_variable encoded;
  };
  std::shared_ptr<Published> published_ = std::make_shared<Published>();
  std::shared_ptr<std::atomic<bool>> abandoned_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<size_t>> serving_ = std::make_shared<std::atomic<size_t>>(0);
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
};

}  // namespace sluice
