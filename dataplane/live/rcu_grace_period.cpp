#include "rcu_grace_period.hpp"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_pause.h>
#include <rte_malloc.h>
#include <time.h>

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
  // rte_rcu_qsbr_synchronize() with a bounded busy wait: start a grace period, check it
  // spinning for kSpinUs (workers on their own CPUs report within a burst loop, ~1-10 us),
  // then sleep kSleepNs between checks. No spin at all on a CPU a worker runs on: the
  // control thread (SCHED_FIFO) would keep that very worker from reporting until it sleeps.
  // Where the control thread shares a CPU with a busy-polling worker (2 workers on 2 CPUs),
  // spinning would keep the very worker it waits for off that CPU, and sched_yield() is no better: the scheduler (CFS, EEVDF) lets the
  // poller run out its whole slice (ms) before the yielder comes back. A sleeper that wakes
  // preempts the poller instead, so the wait ends within a sleep of the last report. The
  // sleeps double from kSleepNs to kMaxSleepNs: a worker descheduled by other load (ms) is
  // waited for with a few dozen wake-ups, not one every 10 us (each one, at SCHED_FIFO,
  // preempts the other worker), at the cost of at most kMaxSleepNs more wait.
  constexpr uint64_t kSpinUs = 20;
  // 20 us, not less: a nanosleep costs ~50 us of CPU on this VM, and a 10 us one never
  // leaves the CPU (sleep_backoff.hpp).
  constexpr long kSleepNs = 20'000;
  constexpr long kMaxSleepNs = 160'000;
  const uint64_t token = rte_rcu_qsbr_start(v_);
  const int cpu = sched_getcpu();
  const bool shares_a_worker_cpu = cpu < 0 || CPU_ISSET(cpu, &worker_cpus_);
  const uint64_t spin_until =
      shares_a_worker_cpu ? 0 : rte_get_timer_cycles() + rte_get_timer_hz() * kSpinUs / 1'000'000;
  long sleep_ns = kSleepNs;
  while (rte_rcu_qsbr_check(v_, token, false) == 0) {
    if (rte_get_timer_cycles() < spin_until) {
      rte_pause();
    } else {
      const timespec nap{0, sleep_ns};
      nanosleep(&nap, nullptr);
      if (sleep_ns < kMaxSleepNs) sleep_ns *= 2;
    }
  }
}

}  // namespace sluice
