// The common-IPv4 burst of a snapshot whose fast rules are token buckets all keyed by one
// mode (RulesSnapshot::uniform_token_bucket_key): the loops of pipeline_fast_v4_burst.hpp
// specialised on that mode, chosen once per burst.
#include "pipeline_fast_v4_burst.hpp"

namespace sluice::pipeline_run {

using fast_v4::burst;

size_t burst_uniform_common_ipv4(const Run& run, const Pipeline::Frame* frames, size_t m,
                                 uint16_t port, uint64_t now_ns, WorkerCounters& counters,
                                 Verdict* verdicts, Classified* cl) {
  const RulesSnapshot& s = run.s;
  switch (s.uniform_token_bucket_key) {
    case KeyMode::five_tuple:
      return burst<false, KeyMode::five_tuple, false, true>(run, frames, m, port, now_ns, counters, verdicts, cl);
    case KeyMode::src_ip:
      return burst<false, KeyMode::src_ip, false, true>(run, frames, m, port, now_ns, counters, verdicts, cl);
    case KeyMode::dst_ip:
      return burst<false, KeyMode::dst_ip, false, true>(run, frames, m, port, now_ns, counters, verdicts, cl);
    case KeyMode::src_dst:
      return burst<false, KeyMode::src_dst, false, true>(run, frames, m, port, now_ns, counters, verdicts, cl);
    case KeyMode::src_prefix:
      return burst<false, KeyMode::src_prefix, false, true>(run, frames, m, port, now_ns, counters, verdicts, cl);
    case KeyMode::dst_prefix:
      return burst<false, KeyMode::dst_prefix, false, true>(run, frames, m, port, now_ns, counters, verdicts, cl);
    case KeyMode::none: break;
  }
  return burst<false, KeyMode::none>(run, frames, m, port, now_ns, counters, verdicts, cl);
}

}  // namespace sluice::pipeline_run
