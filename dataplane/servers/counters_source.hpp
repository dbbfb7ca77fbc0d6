// The counters that sluiced's readers (the control socket's `stats`, /metrics, telemetry)
// answer from, taken when someone asks rather than on every control tick: an idle sluiced
// with 1,000 rules spent 50-60 ms of CPU a second copying and encoding counters nobody read.
//
// The control loop (the producer, the only thread that may call Dataplane::snapshot()) waits
// in wait_for_demand(); a reader calls get(), which answers the latest snapshot if it is at
// most `max_age` old, and otherwise asks for a fresh one and waits for it (at most `patience`,
// then the latest it has). So a reply is at most max_age old while the producer answers,
// counters only grow from one snapshot to the next (each is taken after the one before), and
// nothing is taken, copied or encoded while nobody asks. Snapshots are shared, immutable:
// readers hold them without a copy, and may cache what they encode from one (see seq).
//
// Without a producer (serve_on_demand() never called: tests, the replay mode) get() never
// waits and answers whatever was published last.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "counters.hpp"

namespace sluice {

class CountersSource {
 public:
  using Clock = std::chrono::steady_clock;
  struct Taken {
    std::shared_ptr<const CountersSnapshot> snap;  // null before the first publish
    uint64_t seq = 0;                              // grows with every publish (0: none yet)
  };

  // Reader, any thread: see above. Never blocks longer than `patience`.
  Taken get(Clock::duration max_age, Clock::duration patience);
  // Reader: the latest, never waiting.
  Taken latest() const;

  // Producer: from now on readers ask for fresh snapshots (and wait for them).
  void serve_on_demand();
  // Producer: sleeps until a reader asks for a fresh snapshot (true) or `deadline` (false).
  bool wait_for_demand(Clock::time_point deadline);
  // Producer (or a test): makes `snap` the latest, taken now, and wakes the readers.
  void publish(CountersSnapshot snap);
  // Producer, at exit: no fresh snapshot will come; readers get the latest without waiting.
  void finish();

 private:
  mutable std::mutex mu_;
  std::condition_variable demand_;    // producer waits: a reader wants a fresh snapshot
  std::condition_variable published_;  // readers wait: a new one is there
  std::shared_ptr<const CountersSnapshot> snap_;
  uint64_t seq_ = 0;
  Clock::time_point taken_{};
  bool on_demand_ = false;
  bool wanted_ = false;
};

}  // namespace sluice
