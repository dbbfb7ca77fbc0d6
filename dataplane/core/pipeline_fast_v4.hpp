// The common-IPv4 burst: process_burst for the snapshot shape operators run most (a few
// rules, keyed token buckets; RulesSnapshot::fast_common_ipv4) on the frames most traffic is
// (untagged IPv4 TCP/UDP without options or fragmentation: frame_fast_v4.hpp). Such a frame
// is parsed into the few fields a rule can use, classified by the same walk or tables, keyed
// and hashed by the same key of those fields, and charged with the same token-bucket
// arithmetic, its clock and cost parts worked out once per burst; the common outcome
// (matched, conformed, passed) is counted once per burst per rule. Every other frame, every
// frame of another rule and every refused packet takes the general stages (Run::classify,
// Run::finish, Run::act) in its place in the burst, so the verdicts, the counters and the
// order in which buckets and flow slots are charged are those of process() frame by frame
// (tests/unit/pipeline_burst_paths_test.cpp holds the two together).
#pragma once

#include "pipeline_fast_v4_burst.hpp"

namespace sluice::pipeline_run {

using fast_v4::burst;

template <class Frames>
size_t burst_common_ipv4(const Run& run, const Frames& src, size_t m, uint16_t port,
                         uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts,
                         Classified* cl, VerdictFill fill) {
  const RulesSnapshot& s = run.s;
  // A rule with a dense table: its slot from the address, no hash.
  if (s.any_dense_fast)
    return burst_dense_common_ipv4(run, src, m, port, now_ns, counters, verdicts, cl, fill);
  // One keyed rule: the loops specialised on its algorithm and key mode, chosen once per
  // burst (a meter per destination, as DPDK's qos_meter runs, or a token bucket per key), and
  // on the rule's common shape (fast_v4::burst's kPlain): a single writer (one worker,
  // replay), a meter's cost in bytes and its green passing, a token bucket's pps rate.
  if (s.compiled.size() == 1 && s.classifier.linear() && s.compiled[0].fast_srtcm) {
    const CompiledRule& cr = s.compiled[0];
    const bool single =
        cr.sharing == Sharing::single_writer && !cr.cost_in_packets && cr.green_passes;
    switch (s.compiled[0].key_mode) {
      case KeyMode::dst_ip:
        return single ? burst<true, KeyMode::dst_ip, true, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill)
                      : burst<true, KeyMode::dst_ip, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
      case KeyMode::five_tuple:
        return single ? burst<true, KeyMode::five_tuple, true, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill)
                      : burst<true, KeyMode::five_tuple, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
      default:
        return burst<false, KeyMode::none>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
    }
  }
  if (s.compiled.size() == 1 && s.classifier.linear() && s.compiled[0].fast_common_ipv4) {
    const bool single =
        s.compiled[0].sharing == Sharing::single_writer && s.compiled[0].cost_in_packets;
#define SLUICE_ONE_TB(mode)                                                                    \
  return single ? burst<true, mode, false, false, true>(run, src, m, port, now_ns, counters,   \
                                                        verdicts, cl, fill)                    \
                : burst<true, mode>(run, src, m, port, now_ns, counters, verdicts, cl, fill)
    switch (s.compiled[0].key_mode) {
      case KeyMode::five_tuple: SLUICE_ONE_TB(KeyMode::five_tuple);
      case KeyMode::src_ip: SLUICE_ONE_TB(KeyMode::src_ip);
      case KeyMode::dst_ip: SLUICE_ONE_TB(KeyMode::dst_ip);
      case KeyMode::src_dst: SLUICE_ONE_TB(KeyMode::src_dst);
      case KeyMode::src_prefix: SLUICE_ONE_TB(KeyMode::src_prefix);
      case KeyMode::dst_prefix: SLUICE_ONE_TB(KeyMode::dst_prefix);
      case KeyMode::none: break;
    }
#undef SLUICE_ONE_TB
  }
  // Many rules (or a few) alike: token buckets all keyed the same way.
  if (s.uniform_token_bucket_key != KeyMode::none)
    return burst_uniform_common_ipv4(run, src, m, port, now_ns, counters, verdicts, cl, fill);
  return burst<false, KeyMode::none>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
}

}  // namespace sluice::pipeline_run
