// The live dataplane: the mbuf pool, the ports and one worker per lcore, owned together.
// Member order is shutdown order (DESIGN: "destruction order is the shutdown order"): the
// destructor stops and joins the workers, frees what they hold, stops and closes the ports,
// then frees the pool. The EAL itself is owned by the caller (Eal) and must outlive this.
//
// Shutdown in steps, so the caller can report in between: stop() (workers joined, sent mbufs
// reclaimed, final port counters, ports stopped), then close() (ports closed: drivers give
// their mbufs back; the pool is checked for leaks), then destruction.
//
// Lcores: the main lcore runs control (statistics, signals, link state); every other lcore
// given to EAL runs one worker. The core Pipeline (rules, buckets, flow tables) is shared by
// all workers and owned by the caller; it too must outlive the Dataplane. The Dataplane gives
// the Pipeline its workers' grace period (RCU), so Pipeline::apply() may change the rules
// while the workers run.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "counters.hpp"
#include "mempool.hpp"
#include "pipeline.hpp"
#include "port.hpp"
#include "port_plan.hpp"
#include "rcu_grace_period.hpp"
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
  // The default pool holds mbufs for the wheels even when no start-up rule shapes: the
  // operator said shaping rules will come (sluiced --max-delay).
  bool pool_for_shaping = false;
  size_t expire_budget = 64;         // flow slots per expire_idle() call (~1 us of work)
  uint64_t expire_interval_ns = 0;   // per worker; 0: Pipeline::expire_interval_ns()
  unsigned mempool_cache = 256;
  // mbufs in the pool. 0: sized from the above (every descriptor ring, burst, TX buffer, the
  // wheel, the caches; ~8k for one port and one worker). Otherwise exactly this many, at least
  // that need (less is a usage error) and at most kMaxPoolMbufs.
  uint64_t mbufs = 0;
  // Data room of each mbuf, headroom included (rte_pktmbuf_pool_create's data_room_size).
  uint32_t mbuf_size = RTE_MBUF_DEFAULT_BUF_SIZE;
  // `flows top`: each worker's sampling window and heavy-hitter counters (flow_sampler.hpp);
  // fixed_every 0 adapts the sampling to the rate. The seed is drawn per worker.
  uint64_t flows_window_ns = 1'000'000'000;
  size_t flows_capacity = 256;
  uint32_t flows_fixed_every = 0;
};

// A ring-backed mempool of n mbufs needs a ring of 2^k > n slots; rte_ring's largest is 2^30.
constexpr uint64_t kMaxPoolMbufs = (uint64_t{1} << 30) - 1;

// Where the pool's mbufs are. Once closed, `in_use` is what never came back: `kept_by_drivers`
// of it is held by drivers that return nothing at close (Port::keeps_setup_mbufs: what they
// took at set-up), anything beyond (`leaked`) is a bug.
struct MbufAccount {
  unsigned total = 0;            // pool size
  unsigned in_use = 0;           // out of the pool (and of every lcore cache) now
  unsigned kept_by_drivers = 0;
  unsigned leaked = 0;           // in_use - kept_by_drivers once closed (0 before)
};

// What happened outside the rules, for the operator (live REPORT.json "dataplane", the
// --stats-interval table): worker totals and per worker, per-port errors, the pool.
struct PortReport {
  std::string name, driver;
  PortErrors errors;
};
struct WorkerReport {
  unsigned lcore = 0;
  WorkerStats stats;
};
struct DataplaneReport {
  WorkerStats totals;
  std::vector<WorkerReport> workers;  // the workers that run (have RX queues)
  std::vector<PortReport> ports;
  MbufAccount mbufs;
};

class Dataplane {
 public:
  // How long snapshot() waits for a running worker's counters. A worker answers between two
  // bursts (microseconds); only a descheduled vCPU takes longer.
  static constexpr uint64_t kHandoffPatienceUs = 200'000;

  // Plans ports and queues, creates the pool, starts the ports and builds the workers (not yet
  // running). invalid_input errors: no ports, odd port count, no worker lcore, an unknown
  // port or lcore, --mbufs. Runtime errors: pool, queue set-up, device start, memory.
  static Result<std::unique_ptr<Dataplane>> create(Pipeline& pipeline, const DataplaneConfig& config);
  ~Dataplane();
  Dataplane(const Dataplane&) = delete;
  Dataplane& operator=(const Dataplane&) = delete;

  // Launches one worker per lcore that has RX queues.
  Status start();
  // Stops and joins the workers, frees what they held, lets the drivers free what they sent,
  // records the final port counters and stops the ports. Idempotent; close() calls it.
  void stop();
  // stop(), then closes the ports (their drivers give back the mbufs they hold) and checks
  // that every mbuf is back in the pool except what drivers keep (logged if not).
  // Idempotent; the destructor calls it. Counters and report() stay readable.
  void close();

  // Rule counters summed over workers, and port counters (final ones once stopped). While
  // the workers run, each hands over its counters as they stood at its next burst boundary
  // (CountersHandoff), so every packet is counted in all its outcomes or in none: matched ==
  // passed + dropped and bytes agree with packets in any snapshot. A worker that does not
  // answer within kHandoffPatienceUs is represented by its previous answer (logged).
  // Also the totals outside the rules (CountersSnapshot::dataplane, read after the rule
  // counters). Control thread only.
  CountersSnapshot snapshot();
  WorkerStats totals() const;
  // Each running worker's last complete window of sampled flows (FlowSampler), handed over
  // at its next burst boundary; a worker that does not answer within kHandoffPatienceUs is
  // left out (logged). Before start() and after stop(): none. One caller at a time (any
  // thread but a worker's; LiveRulesTarget serialises).
  std::vector<FlowWindow> flow_windows();
  std::vector<WorkerStats> per_worker() const;
  // Worker statistics, port errors (final ones once stopped) and the pool's account.
  DataplaneReport report() const;
  MbufAccount mbuf_account() const;
  const PortPlan& plan() const { return plan_; }
  // Logs ports whose link changed since the last call. Control thread.
  void log_link_changes();
  // mbufs out of the pool: after stop() with nothing left in the devices, 0 (after close(),
  // but for what drivers keep: see MbufAccount).
  unsigned mbufs_in_use() const { return pool_.in_use(); }
  unsigned mbufs_total() const { return pool_.size(); }
  rte_mempool* mempool() const { return pool_.get(); }
  // The workers' clock (one epoch for all of them), e.g. for Pipeline::apply().
  uint64_t now_ns() const;
  bool stopped() const { return stopped_; }

 private:
  Dataplane(Pipeline& pipeline, PortPlan plan) : pipeline_(pipeline), plan_(std::move(plan)) {}

  Pipeline& pipeline_;
  PortPlan plan_;
  TscClock clock_;
  // The workers' RCU: outlives them (destroyed after workers_).
  std::unique_ptr<RcuGracePeriod> rcu_;
  // Destroyed in reverse: workers, then ports, then the pool.
  Mempool pool_;
  std::vector<Port> ports_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<unsigned> launched_;  // lcores running a worker
  // Each worker's last answer to snapshot(): what stands for it if it misses the next one.
  std::vector<WorkerCounters> answers_;
  bool stopped_ = false;
  bool closed_ = false;
  unsigned mbufs_kept_ = 0;  // taken at set-up by ports whose driver keeps them (see Port)
  unsigned mbufs_leaked_ = 0;
  // Each port's name, driver and last reading: live until stop(), then frozen as stop() read
  // them (the ports are closed later, and their counters go with them).
  struct NamedReading {
    std::string name, driver;
    Port::Reading reading;
  };
  std::vector<NamedReading> read_ports() const;
  std::vector<NamedReading> port_readings() const;
  std::vector<NamedReading> final_readings_;
  // Polled by every worker each loop; written once. Own line: nothing else shares it.
  alignas(64) std::atomic<bool> stop_{false};
};

}  // namespace sluice
