// Exact real-number models of SPEC §3, in integer arithmetic (no rounding anywhere), for
// checking the fixed-point core. Times are kept in "scaled time" (ns * rate numerator) and
// tokens in "scaled tokens" (tokens * rate denominator * 1e9): one scaled time unit refills
// exactly one scaled token, so every quantity is an integer.
#pragma once

#include <algorithm>
#include <cstdint>

#include "rate.hpp"

namespace sluice::testing {

using i128 = __int128;

struct ScaledRate {
  i128 num, den;
  explicit ScaledRate(const Rate& r) : num(r.per_sec_num), den(r.per_sec_den) {}
  i128 time(uint64_t ns) const { return i128(ns) * num; }
  i128 tokens(uint64_t t) const { return i128(t) * den * 1000000000; }
};

// A token bucket as SPEC §3 words it: holds up to B, gains r per second, starts full; a
// packet conforms iff the bucket holds at least its cost.
class ExactTokenBucket {
 public:
  ExactTokenBucket(const Rate& r, uint64_t burst, uint64_t start_ns)
      : s_(r), cap_(s_.tokens(burst)), tokens_(cap_), last_(s_.time(start_ns)) {}

  i128 tokens_at(uint64_t now_ns) const {
    i128 t = s_.time(now_ns);
    return t > last_ ? std::min(cap_, tokens_ + (t - last_)) : tokens_;
  }
  bool charge(uint64_t now_ns, uint64_t cost) {
    i128 tok = tokens_at(now_ns);
    i128 t = s_.time(now_ns);
    if (t > last_) {
      tokens_ = tok;
      last_ = t;
    }
    i128 c = s_.tokens(cost);
    if (c > cap_ || tok < c) return false;
    tokens_ -= c;
    return true;
  }
  void refund(uint64_t now_ns, uint64_t cost) {
    tokens_ = std::min(cap_, tokens_at(now_ns) + s_.tokens(cost));
    i128 t = s_.time(now_ns);
    if (t > last_) last_ = t;
  }

 private:
  ScaledRate s_;
  i128 cap_, tokens_, last_;
};

// Leaky-bucket shaper: each packet departs at the earliest time at which (r, B) lets it
// conform, in arrival order; one that would wait longer than max_delay is dropped and
// charges nothing. Departure times are exact rationals (scaled time / num).
class ExactShaper {
 public:
  ExactShaper(const Rate& r, uint64_t burst, uint64_t max_delay_ns, uint64_t start_ns)
      : s_(r), cap_(s_.tokens(burst)), tokens_(cap_), last_(s_.time(start_ns)),
        max_delay_(s_.time(max_delay_ns)) {}

  // Returns false on drop; else *depart_scaled is the departure in scaled time.
  bool offer(uint64_t now_ns, uint64_t cost, i128* depart_scaled) {
    i128 t = std::max(s_.time(now_ns), last_);
    i128 tok = std::min(cap_, tokens_ + (t - last_));
    i128 c = s_.tokens(cost);
    if (c > cap_) return false;
    i128 depart = tok >= c ? t : t + (c - tok);
    if (depart - s_.time(now_ns) > max_delay_) return false;
    tokens_ = std::min(cap_, tok + (depart - t)) - c;
    last_ = depart;
    *depart_scaled = depart;
    return true;
  }
  const ScaledRate& scale() const { return s_; }

 private:
  ScaledRate s_;
  i128 cap_, tokens_, last_, max_delay_;
};

enum class Colour { green, yellow, red };

// RFC 2697 srTCM, colour-blind, continuous refill: tokens fill C first, then overflow to E.
class ExactSrtcm {
 public:
  ExactSrtcm(const Rate& cir, uint64_t cbs, uint64_t ebs, uint64_t start_ns)
      : s_(cir), cbs_(s_.tokens(cbs)), ebs_(s_.tokens(ebs)), tc_(cbs_), te_(ebs_),
        last_(s_.time(start_ns)) {}
  Colour charge(uint64_t now_ns, uint64_t cost) {
    i128 t = s_.time(now_ns);
    if (t > last_) {
      i128 add = t - last_;
      i128 to_c = std::min(add, cbs_ - tc_);
      tc_ += to_c;
      te_ = std::min(ebs_, te_ + (add - to_c));
      last_ = t;
    }
    i128 c = s_.tokens(cost);
    if (tc_ >= c) {
      tc_ -= c;
      return Colour::green;
    }
    if (te_ >= c) {
      te_ -= c;
      return Colour::yellow;
    }
    return Colour::red;
  }

 private:
  ScaledRate s_;
  i128 cbs_, ebs_, tc_, te_, last_;
};

// RFC 2698 trTCM, colour-blind: peak bucket first, then committed.
class ExactTrtcm {
 public:
  ExactTrtcm(const Rate& cir, uint64_t cbs, const Rate& pir, uint64_t pbs, uint64_t start_ns)
      : c_(cir, cbs, start_ns), p_(pir, pbs, start_ns) {}
  Colour charge(uint64_t now_ns, uint64_t cost) {
    if (!p_.charge(now_ns, cost)) return Colour::red;
    if (!c_.charge(now_ns, cost)) return Colour::yellow;
    return Colour::green;
  }

 private:
  ExactTokenBucket c_, p_;
};

}  // namespace sluice::testing
