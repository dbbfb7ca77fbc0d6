// ns per decision of every core algorithm, through the wrappers of limiters.hpp:
//   "<algorithm>": Sharing::shared (one compare-and-swap per decision), with 1 thread and
//     with 2 threads charging ONE shared bucket;
//   "<algorithm>, single writer": Sharing::single_writer (plain load and store, as a replay
//     or a one-worker dataplane runs), 1 thread;
//   "<algorithm>, burst of 32": the burst API, 32 arrivals decided at one time and published
//     with one compare-and-swap, with 1 and 2 threads on one bucket.
#include <atomic>
#include <string>

#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "scenario.hpp"

namespace {

using namespace sluice;
using bench::kFrameBytes;
using bench::kRate;

// Each limiter: a read-only profile, then its state on a cache line of its own, so that
// threads contend for the state only. S is how the state is published.

// With 2 threads, each advances its own synthetic clock, so while one is descheduled the
// other's clock runs ahead, and the late thread's arrivals read as a clock step back. Up to
// the stale-read tolerance they are refused (conservative, SPEC §3); beyond it the bucket
// re-bases, each re-base hands the leading thread a full bucket, and the row measures other
// traffic (its "conforming" column climbs above 50%). A burst moves a thread's clock 32
// arrivals at a time, so a few ms off-CPU reach the default 1 s. The profiles take the
// largest tolerance, 60 s: the same comparison with another constant, so the cost of a
// decision does not change.
constexpr uint64_t kStaleToleranceNs = 60'000'000'000;

sl_rate_profile tolerant(sl_rate_profile p) {
  set_stale_read_tolerance(p, kStaleToleranceNs);
  return p;
}

sl_meter_profile tolerant(sl_meter_profile m) {
  set_stale_read_tolerance(m.committed, kStaleToleranceNs);
  set_stale_read_tolerance(m.peak, kStaleToleranceNs);
  return m;
}

// The algorithms whose state is one 64-bit word: what differs is the profile and the calls.
struct TokenBucketKind {
  static sl_rate_profile profile() {
    return tolerant(bench::must(make_rate_profile(kRate, bench::kBurstBytes)));
  }
  static constexpr auto init = sl_tb_init;
  static constexpr auto charge = token_bucket_charge;
  static constexpr auto charge_burst = token_bucket_charge_burst;
};

struct GcraKind {
  static sl_rate_profile profile() {
    return tolerant(bench::must(make_rate_profile(kRate, bench::kBurstBytes)));
  }
  static constexpr auto init = sl_gcra_init;
  static constexpr auto charge = gcra_charge;
  static constexpr auto charge_burst = gcra_charge_burst;
};

struct FixedWindowKind {
  static sl_window_profile profile() {
    return bench::must(make_window_profile(bench::kWindowNs, bench::kWindowLimitBytes, false));
  }
  static constexpr auto init = sl_fixed_window_init;
  static constexpr auto charge = fixed_window_charge;
  [[maybe_unused]] static constexpr auto charge_burst = fixed_window_charge_burst;
};

struct SlidingWindowKind {
  static sl_window_profile profile() {
    return bench::must(make_window_profile(bench::kWindowNs, bench::kWindowLimitBytes, true));
  }
  static constexpr auto init = sl_sliding_window_init;
  static constexpr auto charge = sliding_window_charge;
  [[maybe_unused]] static constexpr auto charge_burst = sliding_window_charge_burst;
};

template <class Kind, Sharing S>
struct WordLimiter {
  const decltype(Kind::profile()) p = Kind::profile();
  alignas(64) std::atomic<uint64_t> word{0};
  void reset(uint64_t now) { word = Kind::init(&p, now); }
  bool charge(uint64_t now) { return Kind::charge(p, word, now, kFrameBytes, S); }
  uint64_t charge_burst(uint64_t now, const uint64_t* costs, uint32_t n) {
    return uint64_t(__builtin_popcountll(Kind::charge_burst(p, word, now, costs, n, S)));
  }
};

template <Sharing S>
struct LeakyBucket {
  sl_shaper_profile s = [] {
    auto s = bench::must(make_shaper_profile(kRate, bench::kBurstBytes, 5'000'000));
    s.rate = tolerant(s.rate);
    return s;
  }();
  alignas(64) std::atomic<uint64_t> word{0};
  void reset(uint64_t now) { word = sl_gcra_init(&s.rate, now); }
  bool charge(uint64_t now) {
    uint64_t delay_ns = 0;
    bool ok = shaper_charge(s, word, now, kFrameBytes, &delay_ns, S);
    benchmark::DoNotOptimize(delay_ns);
    return ok;  // "conform": accepted (at once or after a delay), not dropped
  }
};

// The two meters: 16 bytes of state, "conforming" is green.
struct SrtcmKind {
  static sl_meter_profile profile() {
    return tolerant(
        bench::must(make_srtcm_profile(kRate, bench::kBurstBytes, bench::kBurstBytes)));
  }
  static constexpr auto init = sl_srtcm_init;
  static constexpr auto charge = srtcm_charge;
  static constexpr auto charge_burst = srtcm_charge_burst;
};

struct TrtcmKind {
  static sl_meter_profile profile() {
    return tolerant(bench::must(
        make_trtcm_profile(kRate, bench::kBurstBytes,
                           Rate{CostUnit::bytes, 2 * bench::kRateBytesPerSec, 1},
                           bench::kBurstBytes)));
  }
  static constexpr auto init = sl_trtcm_init;
  static constexpr auto charge = trtcm_charge;
  [[maybe_unused]] static constexpr auto charge_burst = trtcm_charge_burst;
};

template <class Kind, Sharing S>
struct Meter {
  const sl_meter_profile m = Kind::profile();
  alignas(64) MeterWord word{};
  void reset(uint64_t now) {
    sl_meter_state st;
    Kind::init(&m, now, &st);
    meter_store(word, MeterWord{st.e0, st.e1});
  }
  bool charge(uint64_t now) { return Kind::charge(m, word, now, kFrameBytes, S) == SL_GREEN; }
  uint64_t charge_burst(uint64_t now, const uint64_t* costs, uint32_t n) {
    sl_colour colours[kMaxBurst];
    return uint64_t(__builtin_popcountll(Kind::charge_burst(m, word, now, costs, n, colours, S)));
  }
};

static_assert(bench::kBurst <= kMaxBurst);

template <Sharing S>
void add_all(const char* suffix) {
  const bool shared = S == Sharing::shared;  // single writer: 1 thread only
  auto name = [&](const char* algorithm) { return std::string(algorithm) + suffix; };
  bench::add_limiter<WordLimiter<TokenBucketKind, S>>(name("token-bucket").c_str(), shared);
  bench::add_limiter<WordLimiter<GcraKind, S>>(name("gcra").c_str(), shared);
  bench::add_limiter<LeakyBucket<S>>(name("leaky-bucket").c_str(), shared);
  bench::add_limiter<Meter<SrtcmKind, S>>(name("srtcm").c_str(), shared);
  bench::add_limiter<Meter<TrtcmKind, S>>(name("trtcm").c_str(), shared);
  bench::add_limiter<WordLimiter<FixedWindowKind, S>>(name("fixed-window").c_str(), shared);
  bench::add_limiter<WordLimiter<SlidingWindowKind, S>>(name("sliding-window").c_str(), shared);
}

const bool registered = [] {
  add_all<Sharing::shared>("");
  add_all<Sharing::single_writer>(", single writer");
  constexpr Sharing shared = Sharing::shared;
  bench::add_burst_limiter<WordLimiter<TokenBucketKind, shared>>("token-bucket, burst of 32");
  bench::add_burst_limiter<WordLimiter<GcraKind, shared>>("gcra, burst of 32");
  bench::add_burst_limiter<Meter<SrtcmKind, shared>>("srtcm, burst of 32");
  return true;
}();

}  // namespace
