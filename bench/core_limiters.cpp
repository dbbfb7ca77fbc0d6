// ns per decision of every core algorithm, through the lock-free wrappers of limiters.hpp,
// with 1 thread and with 2 threads charging ONE shared bucket.
#include <atomic>

#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "scenario.hpp"

namespace {

using namespace sluice;
using bench::kFrameBytes;
using bench::kRate;

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

const bool registered = [] {
  bench::add_limiter<TokenBucket>("token-bucket", true);
  bench::add_limiter<Gcra>("gcra", true);
  bench::add_limiter<LeakyBucket>("leaky-bucket", true);
  bench::add_limiter<Srtcm>("srtcm", true);
  bench::add_limiter<Trtcm>("trtcm", true);
  bench::add_limiter<FixedWindow>("fixed-window", true);
  bench::add_limiter<SlidingWindow>("sliding-window", true);
  return true;
}();

}  // namespace
