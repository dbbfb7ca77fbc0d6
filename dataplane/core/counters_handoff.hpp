// A worker's rule counters, handed to the control thread as they stood between two bursts.
//
// A worker counts every outcome of a packet in plain words (matched, then passed or dropped,
// packets and bytes) with no synchronisation on the hot path. Read from another thread while
// it runs, those words are a torn cut: matched one packet ahead of passed, bytes ahead of
// packets. An operator who checks matched == passed + dropped on a live read, or graphs their
// difference, must never see one. So the reader asks and the worker answers at its next burst
// boundary with a copy of all its counters, taken by the only thread that writes them.
//
// Cost to the worker: one load per loop while nobody asks; one copy of the counters
// (~180 bytes a rule) per answer; after a rules change that added counter slots, one resize. Pure: no clock, no waiting; the caller waits as it sees fit.
//
// One reader at a time (the control thread). Sequence: ask(); poll answered() until true or
// the caller gives up; then read answer(). After giving up, ask() again before the next read:
// a copy the reader gave up on may still be in the worker's hands.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "counters.hpp"

namespace sluice {

class CountersHandoff {
 public:
  // `shape`: counters of the worker's size (the copy allocates only if they grow later).
  explicit CountersHandoff(const WorkerCounters& shape) : answer_(shape) {}

  // Worker, between bursts: copies `live` if asked since the last answer. Allocates only when
  // `live` grew since the last copy (a rules change added counter slots).
  void serve(const WorkerCounters& live) {
    const uint64_t asked = asked_.load(std::memory_order_acquire);
    if (asked == served_local_) return;
    if (answer_.per_rule.size() != live.per_rule.size()) answer_.per_rule.resize(live.per_rule.size());
    std::copy(live.per_rule.begin(), live.per_rule.end(), answer_.per_rule.begin());
    answer_.default_slot = live.default_slot;
    answer_.generation = live.generation;
    served_local_ = asked;
    // Release: the copy above is visible to whoever reads this number.
    served_.store(asked, std::memory_order_release);
  }

  // Reader: asks for a fresh copy (and abandons any earlier question).
  void ask() noexcept { asked_.store(++question_, std::memory_order_release); }

  // Reader: whether the worker answered the last ask().
  bool answered() const noexcept {
    return served_.load(std::memory_order_acquire) == question_;
  }

  // Reader, once answered() and before the next ask(): the worker's counters as of one burst
  // boundary.
  const WorkerCounters& answer() const noexcept { return answer_; }

 private:
  // Written by the reader, read by the worker every loop: a line of its own, so the worker's
  // answers (served_) do not take it away from the worker's cache.
  alignas(64) std::atomic<uint64_t> asked_{0};
  uint64_t question_ = 0;  // the reader's own copy of asked_
  alignas(64) std::atomic<uint64_t> served_{0};
  uint64_t served_local_ = 0;  // the worker's own copy of served_
  WorkerCounters answer_;
};

}  // namespace sluice
