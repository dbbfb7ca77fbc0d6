// Exact models of SPEC §3, written independently of the core so that the end-to-end tests
// check the binary against the contract, not against itself. All arithmetic is integer:
// a rate of num/den tokens per second is handled in "scaled" units where one token is
// den * 1e9 scaled tokens and one nanosecond refills num of them, so nothing is rounded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace sluice::testing {

using i128 = __int128;
constexpr i128 kNsPerSec = 1000000000;

struct ExactRate {
  uint64_t num = 0;  // tokens per second = num / den
  uint64_t den = 1;
  i128 scale() const { return i128(den) * kNsPerSec; }  // scaled units per token
};

// One bucket that refills continuously at `rate` up to `burst` tokens and starts full.
class ExactBucket {
 public:
  ExactBucket(ExactRate rate, uint64_t burst)
      : rate_(rate), cap_(i128(burst) * rate.scale()), tokens_(cap_) {}

  void advance(uint64_t now_ns) {
    if (started_ && now_ns > last_ns_) tokens_ = std::min(cap_, tokens_ + i128(now_ns - last_ns_) * rate_.num);
    if (!started_ || now_ns > last_ns_) last_ns_ = now_ns;
    started_ = true;
  }
  // Adds refill and returns what would overflow past the cap (for srtcm's excess bucket).
  i128 advance_overflow(uint64_t now_ns) {
    i128 overflow = 0;
    if (started_ && now_ns > last_ns_) {
      i128 t = tokens_ + i128(now_ns - last_ns_) * rate_.num;
      overflow = std::max<i128>(0, t - cap_);
      tokens_ = std::min(cap_, t);
    }
    if (!started_ || now_ns > last_ns_) last_ns_ = now_ns;
    started_ = true;
    return overflow;
  }
  bool has(uint64_t cost) const { return tokens_ >= i128(cost) * rate_.scale(); }
  void take(uint64_t cost) { tokens_ -= i128(cost) * rate_.scale(); }
  void give(uint64_t cost) { tokens_ = std::min(cap_, tokens_ + i128(cost) * rate_.scale()); }

  // Policing (token-bucket and gcra): conform iff the bucket holds `cost` tokens.
  bool charge(uint64_t now_ns, uint64_t cost) {
    advance(now_ns);
    if (!has(cost)) return false;
    take(cost);
    return true;
  }

 private:
  ExactRate rate_;
  i128 cap_;
  i128 tokens_;
  uint64_t last_ns_ = 0;
  bool started_ = false;
};

// Leaky-bucket shaper: each packet leaves at the earliest time the (r, B) bucket lets it
// conform, in arrival order; a packet that would wait longer than max_delay is dropped and
// charges nothing. Kept as the bucket's "empty time" E in scaled nanoseconds (ns * num):
// the bucket holds min(B, (t - E) / scale) tokens at t.
class ExactShaper {
 public:
  ExactShaper(ExactRate rate, uint64_t burst, uint64_t max_delay_ns)
      : rate_(rate), burst_t_(i128(burst) * rate.scale()), max_delay_(max_delay_ns) {}

  // The exact departure time in scaled ns, or nothing if dropped.
  std::optional<i128> depart_scaled(uint64_t now_ns, uint64_t cost) {
    i128 t = i128(now_ns) * rate_.num;
    if (!started_) empty_ = t - burst_t_, started_ = true;
    i128 e = std::max(empty_, t - burst_t_);  // never more than a full bucket
    i128 need = i128(cost) * rate_.scale();
    i128 depart = std::max(t, e + need);
    if (depart - t > i128(max_delay_) * rate_.num) return std::nullopt;
    empty_ = e + need;
    return depart;
  }
  // Departure in ns, rounded up: the first whole nanosecond at which the packet conforms.
  std::optional<uint64_t> depart_ns(uint64_t now_ns, uint64_t cost) {
    auto d = depart_scaled(now_ns, cost);
    if (!d) return std::nullopt;
    return uint64_t((*d + rate_.num - 1) / rate_.num);
  }

 private:
  ExactRate rate_;
  i128 burst_t_;
  uint64_t max_delay_;
  i128 empty_ = 0;
  bool started_ = false;
};

enum class Colour { green, yellow, red };

// RFC 2697 single-rate three-colour marker, colour-blind, continuous refill: tokens fill the
// committed bucket first and overflow into the excess bucket. Both start full.
class ExactSrtcm {
 public:
  ExactSrtcm(ExactRate cir, uint64_t cbs, uint64_t ebs)
      : c_(cir, cbs), scale_(cir.scale()), e_cap_(i128(ebs) * scale_), e_(e_cap_) {}
  Colour charge(uint64_t now_ns, uint64_t cost) {
    e_ = std::min(e_cap_, e_ + c_.advance_overflow(now_ns));
    if (c_.has(cost)) return c_.take(cost), Colour::green;
    if (e_ >= i128(cost) * scale_) return e_ -= i128(cost) * scale_, Colour::yellow;
    return Colour::red;
  }

 private:
  ExactBucket c_;
  i128 scale_;
  i128 e_cap_;
  i128 e_;  // excess bucket, scaled like c_; fills only from c_'s overflow
};

// RFC 2698 two-rate three-colour marker, colour-blind. Both buckets start full.
class ExactTrtcm {
 public:
  ExactTrtcm(ExactRate cir, uint64_t cbs, ExactRate pir, uint64_t pbs) : c_(cir, cbs), p_(pir, pbs) {}
  Colour charge(uint64_t now_ns, uint64_t cost) {
    c_.advance(now_ns);
    p_.advance(now_ns);
    if (!p_.has(cost)) return Colour::red;
    if (!c_.has(cost)) return p_.take(cost), Colour::yellow;
    p_.take(cost);
    c_.take(cost);
    return Colour::green;
  }

 private:
  ExactBucket c_;
  ExactBucket p_;
};

// Fixed window: windows [k*W, (k+1)*W) on the capture clock; at most `limit` cost each.
class ExactFixedWindow {
 public:
  ExactFixedWindow(uint64_t window_ns, uint64_t limit) : w_(window_ns), limit_(limit) {}
  bool charge(uint64_t now_ns, uint64_t cost) {
    uint64_t k = now_ns / w_;
    if (k != k_) k_ = k, count_ = 0;
    if (count_ + cost > limit_) return false;
    count_ += cost;
    return true;
  }

 private:
  uint64_t w_, limit_;
  uint64_t k_ = UINT64_MAX, count_ = 0;
};

// Sliding window estimate: previous window's count weighted by the part of it still inside
// the sliding window, plus the current count. Real-valued; the core's integer version is
// compared within a tolerance.
class SlidingWindowEstimate {
 public:
  SlidingWindowEstimate(uint64_t window_ns, uint64_t limit) : w_(window_ns), limit_(limit) {}
  bool charge(uint64_t now_ns, uint64_t cost) {
    uint64_t k = now_ns / w_;
    if (k != k_) {
      prev_ = (k_ != UINT64_MAX && k == k_ + 1) ? cur_ : 0;
      cur_ = 0;
      k_ = k;
    }
    double elapsed = double(now_ns - k * w_) / double(w_);
    double estimate = double(prev_) * (1.0 - elapsed) + double(cur_);
    if (estimate + double(cost) > double(limit_)) return false;
    cur_ += cost;
    return true;
  }

 private:
  uint64_t w_, limit_;
  uint64_t k_ = UINT64_MAX, prev_ = 0, cur_ = 0;
};

}  // namespace sluice::testing
