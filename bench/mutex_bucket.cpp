// Baseline: the classic token bucket, a double token count and a last-refill time behind a
// std::mutex, charged by 1 and by 2 threads (one shared bucket), with the same traffic:
// one decision per lock, and, beside the burst API's rows, a burst of 32 per lock.
#include <algorithm>
#include <mutex>

#include "scenario.hpp"

namespace {

class alignas(64) MutexTokenBucket {
 public:
  void reset(uint64_t now_ns) {
    std::lock_guard lock(mu_);
    tokens_ = kBurst;
    last_ns_ = now_ns;
  }

  bool charge(uint64_t now_ns) {
    std::lock_guard lock(mu_);
    refill(now_ns);
    return take(double(bench::kFrameBytes));
  }

  // n packets arriving at now_ns, decided in order under one lock.
  uint64_t charge_burst(uint64_t now_ns, const uint64_t* costs, uint32_t n) {
    std::lock_guard lock(mu_);
    refill(now_ns);
    uint64_t conformed = 0;
    for (uint32_t i = 0; i < n; ++i) conformed += take(double(costs[i]));
    return conformed;
  }

 private:
  void refill(uint64_t now_ns) {
    if (now_ns > last_ns_) {
      tokens_ = std::min(kBurst, tokens_ + double(now_ns - last_ns_) * kTokensPerNs);
      last_ns_ = now_ns;
    }
  }

  bool take(double cost) {
    if (tokens_ < cost) return false;
    tokens_ -= cost;
    return true;
  }

  static constexpr double kBurst = double(bench::kBurstBytes);
  static constexpr double kTokensPerNs = double(bench::kRateBytesPerSec) / 1e9;
  std::mutex mu_;
  double tokens_ = 0;
  uint64_t last_ns_ = 0;
};

const bool registered = [] {
  bench::add_limiter<MutexTokenBucket>("mutex token-bucket", true);
  bench::add_burst_limiter<MutexTokenBucket>("mutex token-bucket, burst of 32");
  return true;
}();

}  // namespace
