// How a control thread waits for busy-polling workers to pass a point of their loop (an RCU
// quiescent report, a counters hand-over) without a timer: it arms the bell, checks, and
// sleeps on it; a worker that finds it armed at the top of its loop rings it, once.
//
// Why not timed sleeps (sleep_backoff.hpp): each one arms a timer, and on this VM a sleep costs
// tens of us of CPU and wakes tens of us late, several times per rule change. The waiter
// usually shares a CPU with the very worker it waits for (2 workers on 2 CPUs), so that worker
// runs as soon as the waiter sleeps and rings it within one loop (~1-10 us): one futex wake,
// no timer. The worker's cost when nobody waits is one relaxed load per loop of a line written
// only by arm(), which every worker keeps shared in its cache.
//
// No lost wake-up, without a fence on the worker's path: a worker whose load of the bell was
// ordered before its own report finds the bell still armed at its next loop (the bell stays
// armed until rung) and rings then. A worker that stops looping rings once more after it goes
// offline (ring_after_last_loop), with a fence. The waiter's sleeps end after kBackstop at
// the latest, only a backstop.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace sluice {

class LoopDoorbell {
 public:
  // Worker, at the top of every loop (after its reports of the previous one).
  void ring_if_armed() {
    if (armed_.load(std::memory_order_relaxed) != 0) [[unlikely]]
      ring();
  }
  // Worker, at the top of every loop: as ring_if_armed(), but rings only once `ready()` holds
  // as well. For a waiter whose condition takes every worker's report (a grace period): a
  // worker that has reported while another has not would wake it only for it to sleep again,
  // and on the benchmark's 2 CPUs that wake-up preempts the very worker it waits for. Still no
  // lost wake-up: the bell stays armed until rung, every worker asks ready() again at each
  // loop while it is, and the last report makes ready() hold for all later asks.
  template <class Ready>
  void ring_if_armed_and(Ready ready) {
    // acquire: ready() reads what the waiter wrote before it armed (the token it waits for).
    if (armed_.load(std::memory_order_acquire) != 0) [[unlikely]]
      if (ready()) ring();
  }
  // Worker, after its last loop (and its offline report).
  void ring_after_last_loop() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    ring();
  }

  // Waiter: returns true once done() (something the workers do in their loop) holds, false
  // if it still does not at `deadline`. Arms the bell before each check (a seq_cst store
  // orders the two), then sleeps until a worker rings it.
  template <class Done>
  bool wait_until(Done done, std::chrono::steady_clock::time_point deadline =
                                 std::chrono::steady_clock::time_point::max()) {
    for (;;) {
      armed_.store(1, std::memory_order_seq_cst);
      if (done()) return true;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      sleep_while_armed(std::min<std::chrono::nanoseconds>(deadline - now, kBackstop));
    }
  }

 private:
  static constexpr std::chrono::nanoseconds kBackstop = std::chrono::milliseconds(5);

  // Sleeps until a worker rings (or has rung since the arm), or `timeout` passes.
  void sleep_while_armed(std::chrono::nanoseconds timeout) {
    const auto ns = timeout.count();
    const timespec ts{ns / 1'000'000'000, ns % 1'000'000'000};
    // FUTEX_WAIT returns at once if the bell is no longer armed (a worker rang since).
    syscall(SYS_futex, futex_word(), FUTEX_WAIT_PRIVATE, 1, &ts, nullptr, 0);
  }

  void ring() {
    if (armed_.exchange(0, std::memory_order_acq_rel) != 0)
      syscall(SYS_futex, futex_word(), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }
  // The futex is the atomic's own 32-bit word (std::atomic<uint32_t> is lock-free and has the
  // size and representation of its value on every target we build for).
  uint32_t* futex_word() { return reinterpret_cast<uint32_t*>(&armed_); }

  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  static_assert(std::atomic<uint32_t>::is_always_lock_free);
  alignas(64) std::atomic<uint32_t> armed_{0};  // a line of its own: workers read it per loop
};

}  // namespace sluice
