// How a rules change learns that no worker still uses what it replaced (read-copy-update).
// Workers load the current rules snapshot once per burst loop and report a quiescent state
// between loops; a writer that published a new snapshot waits for one grace period (every
// worker online has reported since) before it frees the old one. The live dataplane
// implements it with DPDK's rte_rcu_qsbr (live/rcu_grace_period.hpp); EpochGracePeriod below
// is the same contract in plain C++ for std::thread workers (unit tests). A Pipeline without
// one has a single caller that never runs concurrently with a change (replay, simple tests).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace sluice {

class GracePeriod {
 public:
  virtual ~GracePeriod() = default;
  // Returns once every reader online when it was called has reported quiescent since (so it
  // holds nothing it loaded before the call). Readers offline are not waited for.
  virtual void wait() = 0;
};

// Quiescent-state-based reclamation for a fixed set of reader threads: reader i calls
// online(i) before its first load, quiescent(i) between loops, offline(i) when it stops.
// No lock: a reader's report is one release store to its own cache line.
class EpochGracePeriod final : public GracePeriod {
 public:
  explicit EpochGracePeriod(size_t readers) : slots_(readers) {}

  void online(size_t reader) {
    slots_[reader].seen.store(epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
  }
  void quiescent(size_t reader) {
    slots_[reader].seen.store(epoch_.load(std::memory_order_acquire), std::memory_order_release);
  }
  void offline(size_t reader) { slots_[reader].seen.store(kOffline, std::memory_order_release); }

  void wait() override {
    const uint64_t target = epoch_.fetch_add(1, std::memory_order_seq_cst) + 1;
    for (Slot& s : slots_) {
      for (;;) {
        const uint64_t seen = s.seen.load(std::memory_order_acquire);
        if (seen == kOffline || seen >= target) break;
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr uint64_t kOffline = ~uint64_t{0};
  struct alignas(64) Slot {
    std::atomic<uint64_t> seen{kOffline};
  };
  alignas(64) std::atomic<uint64_t> epoch_{0};
  std::vector<Slot> slots_;
};

}  // namespace sluice
