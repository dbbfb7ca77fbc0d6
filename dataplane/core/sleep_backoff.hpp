// Waiting for a thread that may need this thread's CPU: sleeps that double, from 20 us to
// 1 ms. A fixed short sleep is no wait at all on a VM like this one, where a nanosleep costs
// ~50 us of CPU (its timer): a 10 us sleep returns before the thread ever leaves its CPU, so
// at SCHED_FIFO it is a spin that keeps the busy-polling worker it waits for off that CPU
// (measured: 100% of a CPU at 10 us, 69% at 20 us, 31% at 100 us). Doubling gives the worker
// the CPU within a few sleeps, and a long wait costs a few dozen wake-ups, not thousands.
#pragma once

#include <chrono>
#include <thread>

namespace sluice {

class SleepBackoff {
 public:
  void sleep() {
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    if (us_ < kMaxUs) us_ = us_ * 2 > kMaxUs ? kMaxUs : us_ * 2;
  }

 private:
  static constexpr long kMaxUs = 1000;
  long us_ = 20;  // the shortest sleep that leaves the CPU to others here (69% of it is ours)
};

}  // namespace sluice
