// The core's GracePeriod on DPDK's quiescent-state-based RCU (lib/rcu, rte_rcu_qsbr): one
// reader thread id per worker. A worker goes online when its loop starts, reports quiescent
// between loops, and goes offline when it stops (worker.cpp); wait() is
// rte_rcu_qsbr_synchronize: it returns once every online worker has reported since.
#pragma once

#include <rte_rcu_qsbr.h>
#include <sched.h>

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
  // What wait() sleeps on: every worker rings it at the top of its loop (WorkerSetup), and
  // other waiters for a worker's loop (the counters and flows hand-overs) may share it.
  LoopDoorbell* doorbell() { return &doorbell_; }
  void wait() override;

 private:
  RcuGracePeriod(rte_rcu_qsbr* v, unsigned readers, const cpu_set_t& worker_cpus)
      : v_(v), readers_(readers), worker_cpus_(worker_cpus) {}
  rte_rcu_qsbr* v_;
  unsigned readers_;
  cpu_set_t worker_cpus_;
  LoopDoorbell doorbell_;
};

}  // namespace sluice
