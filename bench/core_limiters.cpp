// ns per decision of every core algorithm, through the lock-free wrappers of limiters.hpp,
// with 1 thread and with 2 threads charging ONE shared bucket. Diagnostic rows split a
// decision's cost: "arithmetic only" runs bucket_math.h on a private word with no atomic;
// "inlined CAS loop" is the wrapper's loop compiled into the caller, counting failed CAS;
// "32 packets per CAS" decides a burst on a local copy of the word and publishes it once.
#include <atomic>

#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "scenario.hpp"

namespace {

using namespace sluice;
using bench::kFrameBytes;

const Rate kRate{CostUnit::bytes, bench::kRateBytesPerSec, 1};

// Each limiter: a read-only profile, then its state word on a cache line of its own, so
// that threads contend for the word only.
struct TokenBucket {
  sl_rate_profile p = bench::must(make_rate_profile(kRate, bench::kBurstBytes));
  alignas(64) std::atomic<uint64_t> word{0};
  void reset(uint64_t now) { word = sl_tb_init(&p, now); }
  bool charge(uint64_t now) { return token_bucket_charge(p, word, now, kFrameBytes); }
};

struct Gcra {
  sl_rate_profile p = bench::must(make_rate_profile(kRate, bench::kBurstBytes));
  alignas(64) std::atomic<uint64_t> word{0};
  void reset(uint64_t now) { word = sl_gcra_init(&p, now); }
  bool charge(uint64_t now) { return gcra_charge(p, word, now, kFrameBytes); }
};

struct LeakyBucket {
  sl_shaper_profile s = bench::must(make_shaper_profile(kRate, bench::kBurstBytes, 5'000'000));
  alignas(64) std::atomic<uint64_t> word{0};
  void reset(uint64_t now) { word = sl_gcra_init(&s.rate, now); }
  bool charge(uint64_t now) {
    uint64_t delay_ns = 0;
    bool ok = shaper_charge(s, word, now, kFrameBytes, &delay_ns);
    benchmark::DoNotOptimize(delay_ns);
    return ok;  // "conform": accepted (at once or after a delay), not dropped
  }
};

struct Srtcm {
  sl_meter_profile m =
      bench::must(make_srtcm_profile(kRate, bench::kBurstBytes, bench::kBurstBytes));
  alignas(64) MeterWord word{};
  void reset(uint64_t now) {
    sl_meter_state st;
    sl_srtcm_init(&m, now, &st);
    meter_store(word, MeterWord{st.e0, st.e1});
  }
  bool charge(uint64_t now) { return srtcm_charge(m, word, now, kFrameBytes) == SL_GREEN; }
};

struct Trtcm {
  sl_meter_profile m = bench::must(make_trtcm_profile(
      kRate, bench::kBurstBytes, Rate{CostUnit::bytes, 2 * bench::kRateBytesPerSec, 1},
      bench::kBurstBytes));
  alignas(64) MeterWord word{};
  void reset(uint64_t now) {
    sl_meter_state st;
    sl_trtcm_init(&m, now, &st);
    meter_store(word, MeterWord{st.e0, st.e1});
  }
  bool charge(uint64_t now) { return trtcm_charge(m, word, now, kFrameBytes) == SL_GREEN; }
};

struct FixedWindow {
  sl_window_profile w =
      bench::must(make_window_profile(bench::kWindowNs, bench::kWindowLimitBytes, false));
  alignas(64) std::atomic<uint64_t> word{0};
  void reset(uint64_t now) { word = sl_fixed_window_init(&w, now); }
  bool charge(uint64_t now) { return fixed_window_charge(w, word, now, kFrameBytes); }
};

struct SlidingWindow {
  sl_window_profile w =
      bench::must(make_window_profile(bench::kWindowNs, bench::kWindowLimitBytes, true));
  alignas(64) std::atomic<uint64_t> word{0};
  void reset(uint64_t now) { word = sl_sliding_window_init(&w, now); }
  bool charge(uint64_t now) { return sliding_window_charge(w, word, now, kFrameBytes); }
};

// The arithmetic alone: a private plain word, no atomic instruction.
struct PlainTokenBucket {
  sl_rate_profile p = bench::must(make_rate_profile(kRate, bench::kBurstBytes));
  uint64_t word = 0;
  void reset(uint64_t now) { word = sl_tb_init(&p, now); }
  bool charge(uint64_t now) { return sl_tb_decide(&p, word, now, kFrameBytes, &word) != 0; }
};

struct PlainSrtcm {
  sl_meter_profile m =
      bench::must(make_srtcm_profile(kRate, bench::kBurstBytes, bench::kBurstBytes));
  sl_meter_state st{};
  void reset(uint64_t now) { sl_srtcm_init(&m, now, &st); }
  bool charge(uint64_t now) {
    sl_meter_state next;
    bool green = sl_srtcm_decide(&m, &st, now, kFrameBytes, &next) == SL_GREEN;
    st = next;
    return green;
  }
};

// The token bucket through a copy of limiters.cpp's load/decide/CAS loop, inlined, that
// counts the compare-and-swaps that failed: how often contention forces a second decision.
struct CountingTokenBucket {
  sl_rate_profile p = bench::must(make_rate_profile(kRate, bench::kBurstBytes));
  alignas(64) std::atomic<uint64_t> word{0};
  static thread_local uint64_t retries;
  void reset(uint64_t now) { word = sl_tb_init(&p, now); }
  bool charge(uint64_t now) {
    uint64_t cur = word.load(std::memory_order_relaxed);
    for (;;) {
      uint64_t next = cur;
      bool ok = sl_tb_decide(&p, cur, now, kFrameBytes, &next) != 0;
      if (next == cur || word.compare_exchange_weak(cur, next, std::memory_order_relaxed,
                                                    std::memory_order_relaxed))
        return ok;
      ++retries;
    }
  }
};
thread_local uint64_t CountingTokenBucket::retries = 0;

// One static limiter per type: with Threads(2) both threads charge the same word. Thread 0
// resets it before the loop; the benchmark's start barrier publishes the reset.
template <class Limiter>
void BM_limiter(benchmark::State& state) {
  static Limiter limiter;
  if (state.thread_index() == 0) limiter.reset(bench::kStartNs);
  bench::SyntheticClock clock(state);
  uint64_t conformed = 0;
  for (auto _ : state) conformed += limiter.charge(clock.next());
  bench::report(state, conformed);
}

// A burst of kBurst arrivals at one bucket, decided on a local copy of the word and
// published with one CAS (redone as a whole if the CAS fails).
constexpr uint64_t kBurst = 32;
void BM_token_bucket_burst(benchmark::State& state) {
  static TokenBucket tb;
  if (state.thread_index() == 0) tb.reset(bench::kStartNs);
  bench::SyntheticClock clock(state, kBurst);
  uint64_t conformed = 0;
  for (auto _ : state) {
    const uint64_t t0 = clock.next();
    uint64_t cur = tb.word.load(std::memory_order_relaxed);
    for (;;) {
      uint64_t w = cur, ok = 0;
      for (uint64_t i = 0; i < kBurst; ++i)
        ok += sl_tb_decide(&tb.p, w, t0 + i * bench::kStepNs, kFrameBytes, &w) != 0;
      if (w == cur || tb.word.compare_exchange_weak(cur, w, std::memory_order_relaxed,
                                                    std::memory_order_relaxed)) {
        conformed += ok;
        break;
      }
    }
  }
  bench::report(state, conformed, kBurst);
}

void BM_cas_retries(benchmark::State& state) {
  CountingTokenBucket::retries = 0;
  BM_limiter<CountingTokenBucket>(state);
  state.counters["retries"] = benchmark::Counter(
      double(CountingTokenBucket::retries) / double(state.iterations()),
      benchmark::Counter::kAvgThreads);
}

template <class Limiter>
void add(const char* name, bool shared) {
  auto* b = benchmark::RegisterBenchmark(name, BM_limiter<Limiter>)->UseRealTime()->Threads(1);
  if (shared) b->Threads(2);
}

const bool registered = [] {
  add<TokenBucket>("token-bucket", true);
  add<Gcra>("gcra", true);
  add<LeakyBucket>("leaky-bucket", true);
  add<Srtcm>("srtcm", true);
  add<Trtcm>("trtcm", true);
  add<FixedWindow>("fixed-window", true);
  add<SlidingWindow>("sliding-window", true);
  add<PlainTokenBucket>("token-bucket, arithmetic only", false);
  add<PlainSrtcm>("srtcm, arithmetic only", false);
  benchmark::RegisterBenchmark("token-bucket, inlined CAS loop", BM_cas_retries)
      ->UseRealTime()->Threads(1)->Threads(2);
  benchmark::RegisterBenchmark("token-bucket, 32 packets per CAS", BM_token_bucket_burst)
      ->UseRealTime()->Threads(1)->Threads(2);
  return true;
}();

}  // namespace
