// A kept rule's new rate, burst or limit applied to the state its buckets hold (SPEC §4: "a
// new rate or burst applies to the tokens it holds, capped at the new burst, never refilled
// to full"). Pure: the state words of the old profile and the time in, the words of the new
// profile out; the caller publishes them.
//
// Buckets (token-bucket, gcra, leaky-bucket, each bucket of the meters): the tokens held at
// t, min(B_old, r_old * (t - E)), are carried over, capped at B_new, and the new empty time
// is E' = t - tokens / r_new in the new profile's time units. A shaper's backlog (tokens
// below zero: packets queued ahead) is carried the same way, bounded by the new max-delay.
// Rounding keeps fewer tokens, never more. A word that reads as a backward clock step under
// its old profile is carried as an empty bucket (what the next charge would have made of it).
//
// Windows: the same window length (the state identity guarantees it), the count carried over
// in the new profile's count units (rounded up: what was counted stays counted).
#pragma once

#include <cstdint>

#include "bucket_math.h"

namespace sluice {

uint64_t convert_token_bucket_word(const sl_rate_profile& from, const sl_rate_profile& to,
                                   uint64_t word, uint64_t now_ns);
uint64_t convert_gcra_word(const sl_rate_profile& from, const sl_rate_profile& to, uint64_t tat,
                           uint64_t now_ns);
uint64_t convert_shaper_word(const sl_shaper_profile& from, const sl_shaper_profile& to,
                             uint64_t tat, uint64_t now_ns);
sl_meter_state convert_srtcm_state(const sl_meter_profile& from, const sl_meter_profile& to,
                                   sl_meter_state state, uint64_t now_ns);
sl_meter_state convert_trtcm_state(const sl_meter_profile& from, const sl_meter_profile& to,
                                   sl_meter_state state, uint64_t now_ns);
uint64_t convert_fixed_window_word(const sl_window_profile& from, const sl_window_profile& to,
                                   uint64_t word);
uint64_t convert_sliding_window_word(const sl_window_profile& from, const sl_window_profile& to,
                                     uint64_t word);

// Tokens a bucket holds at now_ns (cost units, rounded down; negative: a shaper's backlog),
// for tests and diagnostics: token-bucket word, and gcra / leaky-bucket TAT.
int64_t token_bucket_tokens(const sl_rate_profile& p, uint64_t word, uint64_t now_ns);
int64_t gcra_tokens(const sl_rate_profile& p, uint64_t tat, uint64_t now_ns);

}  // namespace sluice
