// The live dataplane: the mbuf pool, the ports and one worker per lcore, owned together.
// Member order is shutdown order (DESIGN: "destruction order is the shutdown order"): the
// destructor stops and joins the workers, frees what they hold, stops and closes the ports,
// then frees the pool. The EAL itself is owned by the caller (Eal) and must outlive this.
//
// Lcores: the main lcore runs control (statistics, signals, link state); every other lcore
// given to EAL runs one worker. The core Pipeline (rules, buckets, flow tables) is shared by
// all workers and owned by the caller; it too must outlive the Dataplane.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "counters.hpp"
#include "live_failure.hpp"
#include "mempool.hpp"
#include "pipeline.hpp"
#include "port.hpp"
#include "port_plan.hpp"
#include "result.hpp"
#include "worker.hpp"

namespace sluice {

struct DataplaneConfig {
  std::optional<std::vector<uint16_t>> ports;          // nullopt: every port EAL found
  std::optional<std::vector<unsigned>> worker_lcores;  // nullopt: every worker lcore
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  uint16_t burst = 32;
  size_t tx_buffer_capacity = 1024;  // per worker and TX queue
  size_t wheel_capacity = 8192;      // delayed packets per worker (if any rule shapes)
  size_t expire_budget = 64;         // flow slots per expire_idle() call (~1 us of work)
  uint64_t expire_interval_ns = 10'000;
  unsigned mempool_cache = 256;
};

class Dataplane {
 public:
  // Plans ports and queues, creates the pool, starts the ports and builds the workers (not yet
  // running). Usage errors (*failure = usage): no ports, odd port count, no worker lcore, an
  // unknown port or lcore. Runtime errors: pool, queue set-up, device start, memory.
  static Result<std::unique_ptr<Dataplane>> create(Pipeline& pipeline, const DataplaneConfig& config,
                                                   LiveFailure* failure);
  ~Dataplane();
  Dataplane(const Dataplane&) = delete;
  Dataplane& operator=(const Dataplane&) = delete;

  // Launches one worker per lcore that has RX queues.
  Status start();
  // Stops and joins the workers, frees what they held, records the final port counters and
  // stops the ports. Idempotent; the destructor calls it.
  void stop();

  // Rule counters summed over workers, and port counters (final ones once stopped). While
  // running, rule counters are read without synchronisation (they are per-worker plain
  // words; a value may be a burst old, never torn on x86-64).
  CountersSnapshot snapshot() const;
  WorkerStats totals() const;
  std::vector<WorkerStats> per_worker() const;
  const PortPlan& plan() const { return plan_; }
  // Logs ports whose link changed since the last call. Control thread.
  void log_link_changes();
  // mbufs out of the pool: after stop() with nothing left in the devices, 0.
  unsigned mbufs_in_use() const { return pool_.in_use(); }
  unsigned mbufs_total() const { return pool_.size(); }
  rte_mempool* mempool() const { return pool_.get(); }

 private:
  Dataplane(Pipeline& pipeline, PortPlan plan) : pipeline_(pipeline), plan_(std::move(plan)) {}

  Pipeline& pipeline_;
  PortPlan plan_;
  // Destroyed in reverse: workers, then ports, then the pool.
  Mempool pool_;
  std::vector<Port> ports_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<unsigned> launched_;  // lcores running a worker
  bool stopped_ = false;
  std::vector<PortSnapshot> final_ports_;
  // Polled by every worker each loop; written once. Own line: nothing else shares it.
  alignas(64) std::atomic<bool> stop_{false};
};

}  // namespace sluice
