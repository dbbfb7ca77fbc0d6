#include "dataplane.hpp"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <new>

#include "flow_key.hpp"
#include "log.hpp"
#include "rcu_grace_period.hpp"
#include "report.hpp"
#include "tsc_clock.hpp"

namespace sluice {

namespace {

// Widest timing-wheel ring we allocate per worker (8 bytes a slot: 32 MiB). 1 us slots cover
// a max-delay of ~4 s; longer max-delays get proportionally wider slots.
constexpr uint64_t kMaxWheelSlots = uint64_t{1} << 22;
constexpr uint64_t kSlotNs = 1000;

int launch_worker(void* arg) {
  static_cast<Worker*>(arg)->run();
  return 0;
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

Result<std::vector<unsigned>> pick_lcores(const DataplaneConfig& config) {
  std::vector<unsigned> lcores;
  if (!config.worker_lcores) {
    unsigned lcore;
    RTE_LCORE_FOREACH_WORKER(lcore) lcores.push_back(lcore);
    return lcores;
  }
  for (unsigned l : *config.worker_lcores) {
    if (l >= RTE_MAX_LCORE || !rte_lcore_is_enabled(l) || l == rte_get_main_lcore())
      return make_error("lcore " + std::to_string(l) + " is not an EAL worker lcore");
    lcores.push_back(l);
  }
  return lcores;
}

Result<std::vector<PortLimits>> port_limits(const DataplaneConfig& config) {
  std::vector<uint16_t> ids;
  if (config.ports) {
    ids = *config.ports;
  } else {
    uint16_t p;
    RTE_ETH_FOREACH_DEV(p) ids.push_back(p);
  }
  std::vector<PortLimits> limits;
  for (uint16_t id : ids) {
    auto l = Port::limits(id);
    if (!l) return l.error();
    limits.push_back(*l);
  }
  return limits;
}

// sluiced --help states the default data room without DPDK's headers (kDefaultMbufSize).
static_assert(RTE_MBUF_DEFAULT_BUF_SIZE == 2176, "cli_args.hpp's kDefaultMbufSize is stale");

// Enough mbufs for every descriptor ring, every worker's burst, TX buffers and wheel, and the
// per-lcore caches, plus some slack.
uint64_t mbufs_needed(const PortPlan& plan, const DataplaneConfig& c, size_t workers,
                      size_t wheel_capacity) {
  uint64_t queues = 0;
  for (uint16_t q : plan.queues) queues += q;
  uint64_t n = queues * (uint64_t(c.rx_desc) + c.tx_desc);
  for (size_t w = 0; w < workers; ++w) {
    uint64_t tx_queues = 0;
    for (const RxAssignment& a : plan.rx) tx_queues += a.worker == w;
    n += kMaxBurst + wheel_capacity + tx_queues * c.tx_buffer_capacity;
  }
  return n + uint64_t(rte_lcore_count()) * c.mempool_cache + 1024;
}

// The default pool: the need rounded up to 2^n - 1, the size the ring-backed pool uses best.
unsigned pool_size(uint64_t needed) {
  uint64_t size = 1;
  while (size - 1 < needed) size <<= 1;
  return unsigned(std::min<uint64_t>(size - 1, kMaxPoolMbufs));
}

std::string unique_pool_name() {
  static std::atomic<unsigned> next{0};
  return "sluice_mbufs_" + std::to_string(next.fetch_add(1));
}

}  // namespace

Result<std::unique_ptr<Dataplane>> Dataplane::create(Pipeline& pipeline,
                                                     const DataplaneConfig& config) {
  // Planning: what the operator asked for must make sense (invalid input).
  constexpr ErrorKind kPlanning = ErrorKind::invalid_input;
  auto lcores = pick_lcores(config);
  if (!lcores) return with_kind(lcores.error(), kPlanning);
  auto limits = port_limits(config);
  if (!limits) return with_kind(limits.error(), kPlanning);
  auto plan = plan_ports(*limits, unsigned(lcores->size()));
  if (!plan) return with_kind(plan.error(), kPlanning);
  for (const std::string& note : plan->notes) live_log("%s", note.c_str());

  // The wheels have a fixed horizon: the pipeline's shaping horizon (the start-up rules'
  // longest max-delay, at least 100 ms), so a shaping rule added live fits them; apply()
  // refuses one whose max-delay is longer. Every worker has one, shaping at start or not.
  const uint64_t max_delay_ns = pipeline.shaping_horizon_ns();
  uint64_t slot_ns = kSlotNs;
  if (max_delay_ns / slot_ns + 2 > kMaxWheelSlots) {
    slot_ns = max_delay_ns / (kMaxWheelSlots - 2) + 1;
    live_log("max-delay %llu ns: shaping with %llu ns timing-wheel slots",
             static_cast<unsigned long long>(max_delay_ns), static_cast<unsigned long long>(slot_ns));
  }
  const size_t wheel_capacity = config.wheel_capacity;
  // The pool holds mbufs for the wheels only if the start-up rules shape or --max-delay says
  // shaping rules will come: a pool twice the size for rules that may never come costs every
  // operator memory. Otherwise shaping rules added later draw their delayed packets from the
  // pool's slack (--mbufs for more; a short pool shows as rx_nombuf in the report).
  const size_t pooled_wheel =
      pipeline.max_delay_ns() == 0 && !config.pool_for_shaping ? 0 : wheel_capacity;

  const uint64_t needed = mbufs_needed(*plan, config, lcores->size(), pooled_wheel);
  if (config.mbufs > kMaxPoolMbufs)
    return invalid_input("--mbufs " + std::to_string(config.mbufs) + ": at most " +
                         std::to_string(kMaxPoolMbufs) + " mbufs fit in one pool");
  if (config.mbufs != 0 && config.mbufs < needed)
    return invalid_input("--mbufs " + std::to_string(config.mbufs) + " is too few: the descriptor "
                         "rings, bursts, TX buffers" + std::string(pooled_wheel ? ", shaper" : "") +
                         " and lcore caches of this set-up need at least " + std::to_string(needed));
  const unsigned n_mbufs = config.mbufs != 0 ? unsigned(config.mbufs) : pool_size(needed);

  // Set-up: from here on a failure is the system's (runtime errors).
  std::unique_ptr<Dataplane> dp(new Dataplane(pipeline, std::move(plan).value()));
  const PortPlan& pl = dp->plan_;

  const int socket = pl.ports.empty() ? SOCKET_ID_ANY : rte_eth_dev_socket_id(pl.ports[0]);
  auto pool = Mempool::create(unique_pool_name(), n_mbufs, config.mbuf_size, config.mempool_cache,
                              socket < 0 ? int(rte_socket_id()) : socket);
  if (!pool) return pool.error();
  dp->pool_ = std::move(pool).value();
  live_log("mbuf pool: %u mbufs (%s; %llu needed) of %u bytes each", n_mbufs,
           config.mbufs != 0 ? "--mbufs" : "sized from the rings, --mbufs N for more",
           static_cast<unsigned long long>(needed), config.mbuf_size);

  for (size_t i = 0; i < pl.ports.size(); ++i) {
    PortSetup setup{pl.queues[i], config.rx_desc, config.tx_desc, dp->pool_.get()};
    const unsigned before = dp->pool_.in_use();
    auto port = Port::open(pl.ports[i], setup);
    if (!port) return port.error();
    // What the driver took for its RX rings: counted as kept if it never gives it back.
    const unsigned taken = dp->pool_.in_use() - before;
    if (port->keeps_setup_mbufs() && taken != 0) {
      dp->mbufs_kept_ += taken;
      live_log("port %u: %s holds %u mbufs of the pool in its RX fill ring(s) until the pool "
               "is freed", port->id(), port->driver().c_str(), taken);
    }
    dp->ports_.push_back(std::move(port).value());
  }

  // One RCU reader per worker that runs: rules changes wait for them (Pipeline::apply()).
  size_t running = 0;
  for (size_t w = 0; w < lcores->size(); ++w)
    running += std::any_of(pl.rx.begin(), pl.rx.end(), [&](const RxAssignment& a) { return a.worker == w; });
  cpu_set_t worker_cpus;
  CPU_ZERO(&worker_cpus);
  for (unsigned lcore : *lcores) {
    const rte_cpuset_t set = rte_lcore_cpuset(lcore);
    CPU_OR(&worker_cpus, &worker_cpus, &set);
  }
  auto rcu = RcuGracePeriod::create(unsigned(running), worker_cpus);
  if (!rcu) return rcu.error();
  dp->rcu_ = std::move(rcu).value();
  // One shared epoch for every worker, so their now_ns are comparable (invariant TSC).
  const TscClock clock = TscClock::make(rte_get_tsc_hz(), rte_rdtsc(), monotonic_ns());
  dp->clock_ = clock;
  unsigned rcu_ids = 0;
  for (size_t w = 0; w < lcores->size(); ++w) {
    WorkerSetup ws;
    ws.lcore = (*lcores)[w];
    for (const RxAssignment& a : pl.rx) {
      if (a.worker != w) continue;
      // RX queue q of a port sends on TX queue q of its peer: one-to-one, so this TX queue
      // belongs to this worker alone.
      ws.rx.push_back({a.rx_port, a.queue, uint16_t(ws.tx.size())});
      ws.tx.push_back({a.tx_port, a.queue});
    }
    ws.burst = config.burst;
    ws.tx_buffer_capacity = config.tx_buffer_capacity;
    ws.wheel_capacity = wheel_capacity;
    ws.slot_ns = slot_ns;
    ws.horizon_ns = max_delay_ns + slot_ns;
    ws.expire_budget = config.expire_budget;
    ws.expire_interval_ns = config.expire_interval_ns;  // 0: from the running rules
    ws.expire_callers = running;
    ws.clock = clock;
    ws.flows.window_ns = config.flows_window_ns;
    ws.flows.capacity = config.flows_capacity;
    ws.flows.fixed_every = config.flows_fixed_every;
    ws.flows.seed = random_hash_seed();
    if (!ws.rx.empty()) {
      ws.rcu = dp->rcu_->qsbr();
      ws.rcu_thread_id = rcu_ids++;
      ws.doorbell = dp->rcu_->doorbell();
      ws.grace = dp->rcu_.get();
    }
    auto worker = Worker::create(pipeline, std::move(ws), &dp->stop_);
    if (!worker) return worker.error();
    dp->workers_.push_back(std::move(worker).value());
  }
  pipeline.set_grace_period(dp->rcu_.get());
  return dp;
}

Dataplane::~Dataplane() {
  close();
  workers_.clear();  // frees anything still held (nothing, after stop())
  // No worker will ever read the rules again: a later change needs no grace period.
  if (rcu_) pipeline_.set_grace_period(nullptr);
}

uint64_t Dataplane::now_ns() const { return clock_.to_ns(rte_rdtsc()); }

void Dataplane::close() {
  if (closed_) return;
  stop();
  ports_.clear();  // close: drivers release the mbufs in their rings
  closed_ = true;
  const unsigned in_use = pool_.in_use();
  mbufs_leaked_ = in_use > mbufs_kept_ ? in_use - mbufs_kept_ : 0;
  if (mbufs_leaked_ != 0) {
    live_log("%u mbuf(s) still out of the pool at shutdown (%u in use, %u of them kept by "
             "drivers)", mbufs_leaked_, in_use, mbufs_kept_);
  }
}

Status Dataplane::start() {
  if (!launched_.empty() || stopped_) return make_error("dataplane already started");
  // With one worker no bucket word is ever shared: publish with plain stores, not CAS.
  size_t running = 0;
  for (auto& w : workers_) running += w->has_queues();
  pipeline_.set_single_writer(running == 1);
  for (auto& w : workers_) {
    if (!w->has_queues()) continue;
    if (int ret = rte_eal_remote_launch(launch_worker, w.get(), w->lcore()); ret != 0) {
      stop();
      return make_error("cannot launch the worker on lcore " + std::to_string(w->lcore()) +
                        ": " + rte_strerror(-ret));
    }
    launched_.push_back(w->lcore());
  }
  live_log("%zu worker(s) running on lcore(s)%s", launched_.size(), [&] {
    std::string s;
    for (unsigned l : launched_) {
      s += ' ';
      s += std::to_string(l);  // (not " " + ...: GCC 12 -O3 warns falsely on that, PR105651)
    }
    return s;
  }().c_str());
  return Ok{};
}

void Dataplane::stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_.store(true, std::memory_order_relaxed);
  for (unsigned lcore : launched_) rte_eal_wait_lcore(lcore);  // join
  // The workers' last sends may still sit in drivers that free sent mbufs only on a later TX
  // call (net_af_xdp: ~the last burst, from its completion ring). The TX queues are ours now:
  // offer them empty bursts until only what the drivers keep is out (before stopping: a
  // stopped port's burst functions are dummies). The kernel completes an AF_XDP send
  // asynchronously, so "no progress this round" is no proof: keep asking for up to ~20 ms,
  // and stop early only at the floor or after 2 ms without progress.
  unsigned last = pool_.in_use(), idle_rounds = 0;
  for (int round = 0; round < 200 && last > mbufs_kept_ && idle_rounds < 20; ++round) {
    for (Port& p : ports_) p.reclaim_tx();
    const unsigned now = pool_.in_use();
    idle_rounds = now < last ? 0 : idle_rounds + 1;
    last = now;
    if (last > mbufs_kept_) rte_delay_us_sleep(100);
  }
  final_readings_ = read_ports();
  for (Port& p : ports_) p.stop();
}

std::vector<Dataplane::NamedReading> Dataplane::read_ports() const {
  std::vector<NamedReading> v;
  for (const Port& p : ports_) v.push_back({p.name(), p.driver(), p.read()});
  return v;
}

std::vector<Dataplane::NamedReading> Dataplane::port_readings() const {
  return stopped_ ? final_readings_ : read_ports();
}

CountersSnapshot Dataplane::snapshot() {
  std::vector<const WorkerCounters*> counters;
  const bool running = !launched_.empty() && !stopped_;
  if (!running) {
    // Not started, or joined: nothing writes the counters, read them directly.
    for (const auto& w : workers_) counters.push_back(&w->counters());
  } else {
    // Zeroes until a worker's first answer (never a read of the counters it is writing).
    if (answers_.empty()) answers_.assign(workers_.size(), pipeline_.make_counters());
    // Ask every worker first, so they answer in parallel.
    for (auto& w : workers_)
      if (w->has_queues()) w->handoff().ask();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(kHandoffPatienceUs);
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = *workers_[i];
      if (w.has_queues()) {
        // Never a spin: this thread may be on the worker's CPU (loop_doorbell.hpp).
        if (rcu_->doorbell()->wait_until([&] { return w.handoff().answered(); }, deadline)) {
          answers_[i] = w.handoff().answer();
        } else {
          live_log("worker on lcore %u did not hand over its counters within %llu ms: its "
                   "previous ones stand in", w.lcore(),
                   static_cast<unsigned long long>(kHandoffPatienceUs / 1000));
        }
      }
      counters.push_back(&answers_[i]);
    }
  }
  CountersSnapshot snap = pipeline_.snapshot(counters);
  for (const NamedReading& p : port_readings()) snap.ports.push_back(p.reading.counters);
  // Read after the rule counters, so rx_packets is never below what they matched.
  snap.dataplane = dataplane_counters(totals(), mbuf_account());
  return snap;
}

std::vector<FlowWindow> Dataplane::flow_windows() {
  std::vector<FlowWindow> windows;
  // Read once: stop() is another thread's, and a worker joined answers nothing.
  if (launched_.empty() || stop_.load(std::memory_order_relaxed)) return windows;
  for (auto& w : workers_)
    if (w->has_queues()) w->flows().ask();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(kHandoffPatienceUs);
  for (auto& w : workers_) {
    if (!w->has_queues()) continue;
    if (rcu_->doorbell()->wait_until([&] { return w->flows().answered(); }, deadline)) {
      windows.push_back(w->flows().answer());
    } else {
      live_log("worker on lcore %u did not hand over its flows within %llu ms: left out",
               w->lcore(), static_cast<unsigned long long>(kHandoffPatienceUs / 1000));
    }
  }
  return windows;
}

WorkerStats Dataplane::totals() const {
  WorkerStats t;
  for (const auto& w : workers_) t += w->stats();
  return t;
}

MbufAccount Dataplane::mbuf_account() const {
  MbufAccount a;
  a.total = pool_.size();
  a.in_use = pool_.in_use();
  a.kept_by_drivers = mbufs_kept_;
  a.leaked = mbufs_leaked_;
  return a;
}

DataplaneReport Dataplane::report() const {
  DataplaneReport r;
  for (const auto& w : workers_) {
    if (!w->has_queues()) continue;
    r.workers.push_back({w->lcore(), w->stats()});
    r.totals += r.workers.back().stats;
  }
  for (const NamedReading& p : port_readings())
    r.ports.push_back({p.name, p.driver, p.reading.errors});
  r.mbufs = mbuf_account();
  return r;
}

std::vector<WorkerStats> Dataplane::per_worker() const {
  std::vector<WorkerStats> v;
  for (const auto& w : workers_) v.push_back(w->stats());
  return v;
}

void Dataplane::log_link_changes() {
  for (Port& p : ports_) p.log_link_change();
}

}  // namespace sluice
