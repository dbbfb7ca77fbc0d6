// The traffic every core benchmark offers, so that all rows of the table are comparable:
// 64-byte frames reaching one bucket every kStepNs (2 Gbit/s of 64-byte frames), policed
// at 1 Gbit/s: about half the frames conform, half are refused. Time is synthetic.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "rate.hpp"
#include "result.hpp"

namespace bench {

constexpr uint64_t kStartNs = 1'000'000'000;
constexpr uint64_t kStepNs = 256;                 // one frame per bucket every 256 ns
constexpr uint64_t kFrameBytes = 64;              // cost of a frame at a byte rate
constexpr uint64_t kRateBytesPerSec = 125'000'000;  // 1 Gbit/s: ~50% of the offered load
constexpr uint64_t kBurstBytes = 16 * 1024;
constexpr uint64_t kWindowNs = 1'000'000;           // windows: 1 ms ...
constexpr uint64_t kWindowLimitBytes = kRateBytesPerSec / 1000;  // ... of 1 Gbit/s
const sluice::Rate kRate{sluice::CostUnit::bytes, kRateBytesPerSec, 1};

// The arrivals at one bucket, dealt round-robin to the threads charging it in blocks of
// `per_call` (1, or a burst): thread i of n gets blocks i, i+n, i+2n, ..., so together they
// offer one frame every kStepNs; next() is the first arrival of the thread's next block.
// Each thread keeps its own clock, as each lcore reads its own TSC.
class SyntheticClock {
 public:
  explicit SyntheticClock(const benchmark::State& s, uint64_t per_call = 1)
      : now_ns_(kStartNs + uint64_t(s.thread_index()) * per_call * kStepNs),
        step_ns_(uint64_t(s.threads()) * per_call * kStepNs) {}
  uint64_t next() {
    uint64_t t = now_ns_;
    now_ns_ += step_ns_;
    return t;
  }

 private:
  uint64_t now_ns_;
  uint64_t step_ns_;
};

// Decisions/s summed over threads, and the fraction of decisions that conformed (green).
// The conforming fraction also checks the set-up: ~50% means the threads kept in step.
inline void report(benchmark::State& s, uint64_t conformed, uint64_t per_call = 1) {
  const uint64_t decisions = uint64_t(s.iterations()) * per_call;
  s.SetItemsProcessed(int64_t(decisions));
  s.counters["conform"] = benchmark::Counter(decisions ? double(conformed) / double(decisions) : 0,
                                             benchmark::Counter::kAvgThreads);
}

// Benchmark set-up cannot fail quietly: a profile the core rejects ends the run.
template <class T>
T must(sluice::Result<T> r) {
  if (!r) {
    std::fprintf(stderr, "bench: profile rejected: %s\n", r.error().message.c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

// Times Limiter::charge(now) (true if it conformed) on one static limiter per type, so with
// Threads(2) both threads charge the same state. Thread 0 resets it before the loop; the
// benchmark's start barrier publishes the reset.
template <class Limiter>
void run_limiter(benchmark::State& state) {
  static Limiter limiter;
  if (state.thread_index() == 0) limiter.reset(kStartNs);
  SyntheticClock clock(state);
  uint64_t conformed = 0;
  for (auto _ : state) conformed += limiter.charge(clock.next());
  report(state, conformed);
}

// Registers run_limiter<Limiter> for 1 thread and, if `shared`, 2 threads on one state.
template <class Limiter>
void add_limiter(const char* name, bool shared) {
  auto* b = benchmark::RegisterBenchmark(name, run_limiter<Limiter>)->UseRealTime()->Threads(1);
  if (shared) b->Threads(2);
}

// Bursts: the same arrivals, dealt to the threads in blocks of kBurst, each block charged
// as one burst at the time of its first arrival (a dataplane reads the clock once per
// received burst). Limiter::charge_burst(now, costs, n) returns how many conformed. Rates
// are per decision (kBurst per iteration), so they compare with the single-charge rows.
constexpr uint32_t kBurst = 32;

template <class Limiter>
void run_burst(benchmark::State& state) {
  static Limiter limiter;
  if (state.thread_index() == 0) limiter.reset(kStartNs);
  SyntheticClock clock(state, kBurst);
  uint64_t costs[kBurst];
  for (uint64_t& c : costs) c = kFrameBytes;
  uint64_t conformed = 0;
  for (auto _ : state) conformed += limiter.charge_burst(clock.next(), costs, kBurst);
  report(state, conformed, kBurst);
}

// Registers run_burst<Limiter> for 1 thread and 2 threads on one state.
template <class Limiter>
void add_burst_limiter(const char* name) {
  benchmark::RegisterBenchmark(name, run_burst<Limiter>)->UseRealTime()->Threads(1)->Threads(2);
}

}  // namespace bench
