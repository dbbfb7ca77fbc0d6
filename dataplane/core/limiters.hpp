// Lock-free limiter operations over shared state words: load, decide with bucket_math.h,
// publish with one compare-and-swap, retry on contention. Any number of threads may call
// these on the same word; a word is never locked and an update is never lost.
#pragma once

#include <atomic>
#include <cstdint>

#include "bucket_math.h"

namespace sluice {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "bucket words must be lock-free");

// 16-byte meter state, aligned for cmpxchg16b.
struct alignas(16) MeterWord {
  uint64_t e0;
  uint64_t e1;
};
static_assert(sizeof(MeterWord) == sizeof(sl_meter_state));

// Policers: true if the packet conforms (and was charged).
bool gcra_charge(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                 uint64_t cost);
bool token_bucket_charge(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                         uint64_t cost);
void gcra_refund(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                 uint64_t cost);
void token_bucket_refund(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                         uint64_t cost);

// Shaper: true if the packet may leave, after *delay_ns.
bool shaper_charge(const sl_shaper_profile& s, std::atomic<uint64_t>& word, uint64_t now_ns,
                   uint64_t cost, uint64_t* delay_ns);
void shaper_refund(const sl_shaper_profile& s, std::atomic<uint64_t>& word, uint64_t cost);

// Windows.
bool fixed_window_charge(const sl_window_profile& w, std::atomic<uint64_t>& word,
                         uint64_t now_ns, uint64_t cost);
bool sliding_window_charge(const sl_window_profile& w, std::atomic<uint64_t>& word,
                           uint64_t now_ns, uint64_t cost);
void fixed_window_refund(const sl_window_profile& w, std::atomic<uint64_t>& word,
                         uint64_t now_ns, uint64_t cost);
void sliding_window_refund(const sl_window_profile& w, std::atomic<uint64_t>& word,
                           uint64_t now_ns, uint64_t cost);

// Meters (128-bit CAS).
sl_colour srtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                       uint64_t cost);
sl_colour trtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                       uint64_t cost);
MeterWord meter_load(MeterWord& word);
void meter_store(MeterWord& word, MeterWord value);

}  // namespace sluice
