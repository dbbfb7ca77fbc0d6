// The core's GracePeriod on DPDK's quiescent-state-based RCU (lib/rcu, rte_rcu_qsbr): one
// reader thread id per worker. A worker goes online when its loop starts, reports quiescent
// between loops, and goes offline when it stops (worker.cpp); wait() is
// rte_rcu_qsbr_synchronize: it returns once every online worker has reported since.
#pragma once

#include <rte_rcu_qsbr.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "grace_period.hpp"
#include "loop_doorbell.hpp"
#include "result.hpp"

namespace sluice {

class RcuGracePeriod final : public GracePeriod {
 public:
  // Registers thread ids 0 .. readers-1. `worker_cpus`: the CPUs the readers may run on.
  // Errors: memory, an EAL that is not up.
  static Result<std::unique_ptr<RcuGracePeriod>> create(unsigned readers, const cpu_set_t& worker_cpus);
  ~RcuGracePeriod() override;
  RcuGracePeriod(const RcuGracePeriod&) = delete;
  RcuGracePeriod& operator=(const RcuGracePeriod&) = delete;

  rte_rcu_qsbr* qsbr() const { return v_; }
  // What the counters and flows hand-overs sleep on: every worker rings it at the top of its
  // loop when armed (WorkerSetup).
  LoopDoorbell* doorbell() { return &doorbell_; }
  void wait() override;

  // Worker, at the top of every loop after its quiescent report: wakes wait() once the grace
  // period it waits for is over, and not before (LoopDoorbell::ring_if_armed_and).
  void ring_if_done() {
    grace_bell_.ring_if_armed_and([this] {
      return rte_rcu_qsbr_check(v_, waited_token_.load(std::memory_order_acquire), false) != 0;
    });
  }
  // Worker, after its offline report.
  void ring_after_last_loop() { grace_bell_.ring_after_last_loop(); }

 private:
  RcuGracePeriod(rte_rcu_qsbr* v, unsigned readers, const cpu_set_t& worker_cpus)
      : v_(v), readers_(readers), worker_cpus_(worker_cpus) {}
  rte_rcu_qsbr* v_;
  unsigned readers_;
  cpu_set_t worker_cpus_;
  LoopDoorbell doorbell_;
  // wait()'s own bell, rung only when its grace period is over, and the token it waits for
  // (the highest of concurrent waiters': a later token's end is an earlier one's too).
  LoopDoorbell grace_bell_;
  alignas(64) std::atomic<uint64_t> waited_token_{0};
};

}  // namespace sluice
