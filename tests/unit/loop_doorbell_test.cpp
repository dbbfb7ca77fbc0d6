// LoopDoorbell (dataplane/core/loop_doorbell.hpp): a waiter sleeps until a busy-polling worker
// rings at the top of its loop. These tests count how often the waiter is woken to ask its
// condition again: each wake-up of a control thread preempts a worker on the benchmark's CPUs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "loop_doorbell.hpp"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

// A worker that loops until told to stop, calling `ring` once per loop, as Worker::run does.
template <class Ring>
std::thread looping_worker(std::atomic<bool>& stop, Ring ring) {
  return std::thread([&stop, ring] {
    while (!stop.load(std::memory_order_relaxed)) ring();
  });
}

// The grace period's bell: a worker that has reported while the grace period is not over
// (another worker has not) does not wake the waiter. Only the 5 ms backstop does, once per
// 5 ms at most; an ungated ring (ring_if_armed) wakes it at nearly every loop of the worker.
TEST(LoopDoorbell, AGatedRingWakesTheWaiterOnlyOnceItsConditionHolds) {
  LoopDoorbell bell;
  std::atomic<bool> over{false}, stop{false};
  std::atomic<int> asks{0};
  std::thread worker = looping_worker(stop, [&] {
    bell.ring_if_armed_and([&] { return over.load(std::memory_order_acquire); });
  });
  std::thread waiter([&] {
    EXPECT_TRUE(bell.wait_until([&] {
      asks.fetch_add(1, std::memory_order_relaxed);
      return over.load(std::memory_order_acquire);
    }));
  });
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  const int asked_before = asks.load();
  const auto slept_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  over.store(true, std::memory_order_release);
  waiter.join();  // rung by the worker's next loop (or the backstop, at worst)
  stop.store(true);
  worker.join();
  EXPECT_GE(asked_before, 1);
  // One ask when it armed, one per backstop since, and one more for the sleep's start.
  EXPECT_LE(asked_before, slept_ms / 5 + 3) << "woken while the condition did not hold, in "
                                            << slept_ms << " ms";
}

// A deadline ends the wait even when nobody rings.
TEST(LoopDoorbell, WaitUntilGivesUpAtItsDeadline) {
  LoopDoorbell bell;
  const auto start = Clock::now();
  EXPECT_FALSE(bell.wait_until([] { return false; }, start + std::chrono::milliseconds(20)));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(20));
}

}  // namespace
}  // namespace sluice
