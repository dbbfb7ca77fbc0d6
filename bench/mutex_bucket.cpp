// Baseline: the classic token bucket, a double token count and a last-refill time behind a
// std::mutex, charged by 1 and by 2 threads (one shared bucket), with the same traffic.
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
    constexpr double cost = double(bench::kFrameBytes);
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

const bool registered = [] {
  bench::add_limiter<MutexTokenBucket>("mutex token-bucket", true);
  return true;
}();

}  // namespace
