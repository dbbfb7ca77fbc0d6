// The common-IPv4 burst of a snapshot whose fast rules are token buckets all keyed by one
// mode (RulesSnapshot::uniform_token_bucket_key): the loops of pipeline_fast_v4_burst.hpp
// specialised on that mode, chosen once per burst.
#pragma once

#include "pipeline_fast_v4_burst.hpp"

namespace sluice::pipeline_run {

using fast_v4::burst;

template <class Frames>
size_t burst_uniform_common_ipv4(const Run& run, const Frames& src, size_t m, uint16_t port,
                                 uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts,
                                 Classified* cl, VerdictFill fill) {
  const RulesSnapshot& s = run.s;
  switch (s.uniform_token_bucket_key) {
    case KeyMode::five_tuple:
      return burst<false, KeyMode::five_tuple, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
    case KeyMode::src_ip:
      return burst<false, KeyMode::src_ip, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
    case KeyMode::dst_ip:
      return burst<false, KeyMode::dst_ip, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
    case KeyMode::src_dst:
      return burst<false, KeyMode::src_dst, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
    case KeyMode::src_prefix:
      return burst<false, KeyMode::src_prefix, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
    case KeyMode::dst_prefix:
      return burst<false, KeyMode::dst_prefix, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
    case KeyMode::none: break;
  }
  return burst<false, KeyMode::none>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
}

}  // namespace sluice::pipeline_run
