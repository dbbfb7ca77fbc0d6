// Diagnostic rows that split the cost of a decision:
//   "arithmetic only": bucket_math.h on a private word, no atomic instruction;
//   "inlined CAS loop": limiters.hpp's load/decide/CAS loop (detail::update_word), counting
//     the compare-and-swaps that failed.
// (The burst API's rows are in core_limiters.cpp.)
#include <atomic>

#include "bucket_math.h"
#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "scenario.hpp"

namespace {

using namespace sluice;
using bench::kFrameBytes;
using bench::kRate;

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

// The token bucket through limiters.hpp's own load/decide/CAS loop (detail::update_word,
// shared), counting the compare-and-swaps that failed: how often contention forces a second
// decision. The loop calls decide once per attempt, so every call after the first follows a
// failed compare-and-swap.
struct CountingTokenBucket {
  sl_rate_profile p = bench::must(make_rate_profile(kRate, bench::kBurstBytes));
  alignas(64) std::atomic<uint64_t> word{0};
  static thread_local uint64_t retries;
  void reset(uint64_t now) { word = sl_tb_init(&p, now); }
  bool charge(uint64_t now) {
    uint64_t attempts = 0;
    const bool ok = detail::update_word(word, Sharing::shared, [&](uint64_t cur, uint64_t* next) {
      ++attempts;
      return sl_tb_decide(&p, cur, now, kFrameBytes, next) != 0;
    });
    retries += attempts - 1;
    return ok;
  }
};
thread_local uint64_t CountingTokenBucket::retries = 0;

void BM_cas_retries(benchmark::State& state) {
  CountingTokenBucket::retries = 0;
  bench::run_limiter<CountingTokenBucket>(state);
  state.counters["retries"] = benchmark::Counter(
      double(CountingTokenBucket::retries) / double(state.iterations()),
      benchmark::Counter::kAvgThreads);
}

const bool registered = [] {
  bench::add_limiter<PlainTokenBucket>("token-bucket, arithmetic only", false);
  bench::add_limiter<PlainSrtcm>("srtcm, arithmetic only", false);
  benchmark::RegisterBenchmark("token-bucket, inlined CAS loop", BM_cas_retries)
      ->UseRealTime()->Threads(1)->Threads(2);
  return true;
}();

}  // namespace
