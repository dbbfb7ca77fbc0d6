// One worker per lcore (SPEC §1): polls its RX queues, reads the clock once per burst, runs the
// core pipeline on every packet, and sends what passes on the TX queue of the peer port. Packets
// a shaping rule delays wait in this worker's timing wheel until their departure time; packets
// the device cannot take yet wait in a per-TX-queue buffer (back-pressure) and are retried.
//
// Everything here belongs to one lcore (DPDK l3fwd's lcore_conf): the object is cache-aligned
// and shares nothing mutable with other workers except, inside the pipeline, bucket words and
// flow tables (CAS). Nothing allocates after create(), but when a rules change adds counter
// slots (once per change, at a burst boundary).
//
// Rules changes: each loop the worker reports a quiescent state to the dataplane's RCU
// (rte_rcu_qsbr), then loads the running rules snapshot (Pipeline::enter()) and runs every
// burst of that loop against it, so a packet is classified against exactly one rule set and
// a replaced snapshot is freed only once every worker has passed a quiescent state.
#pragma once

#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "burst_frames.hpp"
#include "counters.hpp"
#include "counters_handoff.hpp"
#include "flow_sampler.hpp"
#include "loop_doorbell.hpp"
#include "pipeline.hpp"
#include "rcu_grace_period.hpp"
#include "result.hpp"
#include "timing_wheel.hpp"
#include "tsc_clock.hpp"
#include "tx_buffer.hpp"

namespace sluice {

// The largest RX burst a worker asks for.
constexpr uint16_t kMaxBurst = 64;
static_assert(kMaxBurst <= Pipeline::kMaxBurst);

struct WorkerRx {
  uint16_t port = 0;
  uint16_t queue = 0;
  uint16_t tx = 0;  // index into WorkerSetup::tx: where this queue's packets leave
};

struct WorkerTx {
  uint16_t port = 0;
  uint16_t queue = 0;
};

struct WorkerSetup {
  unsigned lcore = 0;
  std::vector<WorkerRx> rx;
  std::vector<WorkerTx> tx;
  uint16_t burst = 32;                // <= kMaxBurst
  size_t tx_buffer_capacity = 1024;   // mbufs per TX queue waiting for the device
  size_t wheel_capacity = 8192;       // delayed mbufs held at once (0: no shaping rules)
  uint64_t slot_ns = 1000;            // timing-wheel slot width
  uint64_t horizon_ns = 1000;         // pipeline max_delay_ns() + slot_ns
  size_t expire_budget = 64;          // flow slots visited per expire_idle() call
  // Time between expire_idle() calls; 0: Pipeline::expire_interval_ns() of the running rules
  // for expire_callers workers (recomputed when the rules change).
  uint64_t expire_interval_ns = 10'000;
  size_t expire_callers = 1;
  rte_rcu_qsbr* rcu = nullptr;        // quiescent-state reports (null: rules never change)
  unsigned rcu_thread_id = 0;         // this worker's id in rcu, registered by the dataplane
  // Rung at the top of every loop when armed: by then the RCU report and the hand-overs of
  // the previous loop are done (null: nobody waits for this worker).
  LoopDoorbell* doorbell = nullptr;
  // Told of every quiescent report, so that a rules change's wait ends with the report that
  // ends its grace period (null with rcu).
  RcuGracePeriod* grace = nullptr;
  TscClock clock;                     // shared epoch: every worker's now_ns is comparable
  FlowSamplerOptions flows;           // `flows top`: window, sketch size, seed
};

// Counters of what happened outside the pipeline's rules, per worker. Written by the worker
// only (relaxed load + store, no read-modify-write on the hot path), read by the control thread.
struct WorkerStats {
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;         // TX buffer full (device back-pressure outlasted the buffer)
  uint64_t shaper_overflow = 0;    // delayed packet refused by a full timing wheel
  uint64_t shutdown_dropped = 0;   // held (delayed or unsent) at shutdown and freed
  uint64_t flows_expired = 0;      // idle flows freed by this worker's expire_idle() calls

  WorkerStats& operator+=(const WorkerStats& o);
};

class alignas(RTE_CACHE_LINE_SIZE) Worker {
 public:
  // Errors: the wheel or buffers could not be allocated, a burst above kMaxBurst.
  static Result<std::unique_ptr<Worker>> create(Pipeline& pipeline, WorkerSetup setup,
                                                const std::atomic<bool>* stop);
  ~Worker();  // frees any mbuf still held: the mempool must still exist
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The lcore loop: runs until *stop, then frees what is still held (see shutdown()).
  void run();

  unsigned lcore() const { return setup_.lcore; }
  bool has_queues() const { return !setup_.rx.empty(); }
  // The rule counters, read directly: only while the worker does not run (before start(),
  // after it is joined). While it runs, read them through handoff().
  const WorkerCounters& counters() const { return counters_; }
  CountersHandoff& handoff() { return handoff_; }
  // Its busiest flows (sampled): while it runs, through ask() / answered() / answer().
  FlowSampler& flows() { return flows_; }
  WorkerStats stats() const;
  size_t held() const { return wheel_.size(); }

 private:
  struct TxQueue {
    WorkerTx where;
    TxBuffer<rte_mbuf*> buffer;
  };
  struct HeldPacket {
    rte_mbuf* mbuf = nullptr;
    uint16_t tx = 0;  // index into tx_
  };
  // One cache line of counters the control thread reads, apart from the hot fields.
  struct alignas(RTE_CACHE_LINE_SIZE) AtomicStats {
    std::atomic<uint64_t> rx_packets{0}, tx_packets{0}, tx_dropped{0}, shaper_overflow{0},
        shutdown_dropped{0}, flows_expired{0};
  };

  Worker(Pipeline& pipeline, WorkerSetup setup, const std::atomic<bool>* stop,
         std::vector<TxQueue> tx, TimingWheel<HeldPacket> wheel);

  void handle_burst(const RulesSnapshot& rules, const WorkerRx& rxq, rte_mbuf** pkts, uint16_t n,
                    uint64_t now_ns);
  // The loop's rules: enters the running snapshot; on a change, the expiry interval follows.
  const RulesSnapshot& enter_rules(uint64_t now_ns);
  void release_due(uint64_t now_ns);
  // Buffers m for TX queue q; false (caller drops and counts) only if the device would not
  // take enough of the buffer to make room.
  bool enqueue(TxQueue& q, rte_mbuf* m);
  // Sends forwarded packets in order; the ones neither sent nor buffered go to dropped[].
  void send(TxQueue& q, rte_mbuf** pkts, uint16_t n, rte_mbuf** dropped, uint16_t& n_dropped);
  void flush(TxQueue& q);
  // One rte_eth_tx_burst, counted; returns how many the device took.
  uint16_t transmit(TxQueue& q, rte_mbuf** pkts, uint16_t n);
  void flush_tx();
  // After the loop: held packets were due later, so a stopped shaper drops them; unsent ones
  // get one last try if try_send (the ports are still started). Everything else is freed, so
  // the pool is full once the ports stop. Idempotent.
  void shutdown(bool try_send);

  Pipeline& pipeline_;
  const std::atomic<bool>* stop_;
  WorkerSetup setup_;
  TscClock clock_;
  WorkerCounters counters_;
  CountersHandoff handoff_;
  FlowSampler flows_;
  std::vector<TxQueue> tx_;
  TimingWheel<HeldPacket> wheel_;
  BurstFrames burst_frames_;  // the frames the pipeline reads whole (general stages, chains)
  // One burst's verdicts, every element written before it is read. A member, not a local: as
  // a local its default member initialisers cleared all kMaxBurst entries on every burst.
  Verdict verdicts_[kMaxBurst];
  uint64_t rules_generation_ = ~uint64_t{0};
  uint64_t expire_interval_ns_ = 0;
  AtomicStats stats_;
};

}  // namespace sluice
