// Baseline: the classic token bucket, a double token count and a last-refill time behind a
// std::mutex, charged by 1 and by 2 threads (one shared bucket), with the same traffic.
#include <algorithm>
#include <mutex>

#include "scenario.hpp"

namespace {

class MutexTokenBucket {
 public:
  void reset(uint64_t now_ns) {
    std::lock_guard lock(mu_);
    tokens_ = kBurst;
    last_ns_ = now_ns;
  }

  bool charge(uint64_t now_ns, double cost) {
    std::lock_guard lock(mu_);
    if (now_ns > last_ns_) {
      tokens_ = std::min(kBurst, tokens_ + double(now_ns - last_ns_) * kTokensPerNs);
      last_ns_ = now_ns;
    }
    if (tokens_ < cost) return false;
    tokens_ -= cost;
    return true;
  }

 private:
  static constexpr double kBurst = double(bench::kBurstBytes);
  static constexpr double kTokensPerNs = double(bench::kRateBytesPerSec) / 1e9;
  std::mutex mu_;
  double tokens_ = 0;
  uint64_t last_ns_ = 0;
};

void BM_mutex_bucket(benchmark::State& state) {
  alignas(64) static MutexTokenBucket bucket;
  if (state.thread_index() == 0) bucket.reset(bench::kStartNs);
  bench::SyntheticClock clock(state);
  uint64_t conformed = 0;
  for (auto _ : state) conformed += bucket.charge(clock.next(), double(bench::kFrameBytes));
  bench::report(state, conformed);
}

BENCHMARK(BM_mutex_bucket)->Name("mutex token-bucket")->UseRealTime()->Threads(1)->Threads(2);

}  // namespace
