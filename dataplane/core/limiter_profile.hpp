// Turns a rule's rate, burst and timing into the integer profiles of bucket_math.h, and
// rejects what cannot be represented exactly.
//
// Supported ranges (each guaranteed exact to 1e-4 relative; see bucket_math.h for units):
//   - pps rates from 1e-3 pps to 800 Mpps (400 Gbit/s of minimum-size frames); byte
//     rates from 1 bit/s to 400 Gbit/s;
//   - bursts from one packet (pps) or 64 bytes (byte rates) up to at least one second of
//     traffic at any supported rate (up to 2^47 time units: 17 s at the fastest rates,
//     longer at slower ones);
//   - a rate whose token interval (1e9/r ns) is a whole number of units of 1/m ns for some
//     m <= 8192 (every rate stated with a few significant digits: 10 Gbit/s at m = 5, 400
//     Gbit/s at m = 50, 800 Mpps at m = 4) gets that exact unit and rounds nothing: its
//     decisions are the exact real-number model's;
//   - otherwise (the fallback) a packet's interval at the profile's time unit 2^-k ns is at
//     least 10^4 units for a 64-byte frame (byte rates) or one packet (pps), so rounding
//     stays below 1e-4 relative (and below 1.5e-5 wherever the burst leaves room for 2^16
//     units); rounding only ever makes a bucket stricter, never looser;
//   - max-delay up to 60 s; windows from 1 us to 39 h.
#pragma once

#include <cstdint>

#include "bucket_math.h"
#include "rate.hpp"
#include "result.hpp"
#include "rules.hpp"

namespace sluice {

// Smallest cost whose interval must meet the precision floor: one packet, or a minimum
// Ethernet frame (64 bytes with FCS) for byte rates.
constexpr uint64_t kMinFrameBytes = 64;
constexpr uint64_t kMaxDelayNs = 60ull * 1000 * 1000 * 1000;
constexpr uint64_t kMinWindowNs = 1000;

// Builds a profile for rate r and burst B (tokens). `min_shift` forces at least that time
// shift (meters pass the peak rate's shift to the committed profile so both share one).
Result<sl_rate_profile> make_rate_profile(const Rate& rate, uint64_t burst_tokens,
                                          uint32_t min_shift = 0);

Result<sl_shaper_profile> make_shaper_profile(const Rate& rate, uint64_t burst_tokens,
                                              uint64_t max_delay_ns);

// srtcm: rate = CIR, burst = CBS, excess = EBS. trtcm: rate = CIR, burst = CBS, peak = PIR,
// peak_burst = PBS.
Result<sl_meter_profile> make_srtcm_profile(const Rate& cir, uint64_t cbs, uint64_t ebs);
Result<sl_meter_profile> make_trtcm_profile(const Rate& cir, uint64_t cbs, const Rate& pir,
                                            uint64_t pbs);

Result<sl_window_profile> make_window_profile(uint64_t window_ns, uint64_t limit,
                                              bool sliding);

// How stale a clock read may be before a bucket takes it for a backward step (see
// bucket_math.h): SL_STEP_TOLERANCE_NS unless set here; at most 60 s.
void set_stale_read_tolerance(sl_rate_profile& p, uint64_t tolerance_ns);

// Checks every number of a rule against the ranges above (the loader prefixes file:line).
Status check_rule_limits(const Rule& rule);

}  // namespace sluice
