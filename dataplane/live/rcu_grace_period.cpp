#include "rcu_grace_period.hpp"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_pause.h>
#include <rte_malloc.h>

#include <string>

namespace sluice {

Result<std::unique_ptr<RcuGracePeriod>> RcuGracePeriod::create(unsigned readers,
                                                               const cpu_set_t& worker_cpus) {
  const unsigned n = readers == 0 ? 1 : readers;
  const size_t size = rte_rcu_qsbr_get_memsize(n);
  auto* v = static_cast<rte_rcu_qsbr*>(rte_zmalloc("sluice_rcu", size, RTE_CACHE_LINE_SIZE));
  if (v == nullptr) return make_error("cannot allocate the workers' RCU state: out of memory");
  if (rte_rcu_qsbr_init(v, n) != 0) {
    rte_free(v);
    return make_error(std::string("cannot initialise the workers' RCU state: ") +
                      rte_strerror(rte_errno));
  }
  for (unsigned id = 0; id < readers; ++id) {
    if (rte_rcu_qsbr_thread_register(v, id) != 0) {
      rte_free(v);
      return make_error("cannot register worker " + std::to_string(id) + " with RCU");
    }
  }
  return std::unique_ptr<RcuGracePeriod>(new RcuGracePeriod(v, readers, worker_cpus));
}

RcuGracePeriod::~RcuGracePeriod() {
  for (unsigned id = 0; id < readers_; ++id) rte_rcu_qsbr_thread_unregister(v_, id);
  rte_free(v_);
}

void RcuGracePeriod::wait() {
  // rte_rcu_qsbr_synchronize() without its busy wait: start a grace period; where no worker
  // runs on this CPU, spin for kSpinUs (workers on their own CPUs report within a loop,
  // ~1-10 us); then sleep on grace_bell_, which the worker whose report ends the grace period
  // rings. No spin on a CPU a worker runs on: this thread (SCHED_FIFO) would keep that very
  // worker from reporting until it sleeps, and sched_yield() is no better (the scheduler lets
  // the poller run out its slice). Timed sleeps (the old way) cost a timer each, tens of us of
  // CPU on this VM, and ended tens of us after the report (loop_doorbell.hpp). A bell any
  // worker rings at its next loop (the hand-overs' doorbell_) woke this thread about twice a
  // change: first by the worker on the other CPU, which had reported, then by the one it waits
  // for.
  constexpr uint64_t kSpinUs = 20;
  const uint64_t token = rte_rcu_qsbr_start(v_);
  if (rte_rcu_qsbr_check(v_, token, false) != 0) return;
  const int cpu = sched_getcpu();
  if (cpu >= 0 && !CPU_ISSET(cpu, &worker_cpus_)) {
    const uint64_t spin_until = rte_get_timer_cycles() + rte_get_timer_hz() * kSpinUs / 1'000'000;
    while (rte_get_timer_cycles() < spin_until) {
      if (rte_rcu_qsbr_check(v_, token, false) != 0) return;
      rte_pause();
    }
  }
  uint64_t waited = waited_token_.load(std::memory_order_relaxed);
  while (waited < token &&
         !waited_token_.compare_exchange_weak(waited, token, std::memory_order_release)) {
  }
  grace_bell_.wait_until([&] { return rte_rcu_qsbr_check(v_, token, false) != 0; });
}

}  // namespace sluice
