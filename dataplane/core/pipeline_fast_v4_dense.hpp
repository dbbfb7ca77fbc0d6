// The common-IPv4 burst of a snapshot in which a fast rule has a dense flow table
// (dense_key.hpp, RulesSnapshot::any_dense_fast): the loops of pipeline_fast_v4_burst.hpp with
// the slot from the address instead of a hash. One such rule alone: specialised on its
// algorithm and common shape, chosen once per burst; among others: the any-rules loops, with
// the kind of table looked up per packet's rule.
#pragma once

#include "pipeline_fast_v4_burst.hpp"

namespace sluice::pipeline_run {

template <class Frames>
size_t burst_dense_common_ipv4(const Run& run, const Frames& src, size_t m, uint16_t port,
                               uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts,
                               Classified* cl, VerdictFill fill) {
  using fast_v4::burst;
  const RulesSnapshot& s = run.s;
  if (s.compiled.size() != 1 || !s.classifier.linear())
    return burst<false, KeyMode::none, false, false, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
  const CompiledRule& cr = s.compiled[0];
  // kMode is unused by a dense loop (no key is hashed): one instance per shape, any mode.
  constexpr KeyMode kAny = KeyMode::dst_ip;
  if (cr.fast_srtcm) {
    const bool single = cr.sharing == Sharing::single_writer && !cr.cost_in_packets && cr.green_passes;
    return single ? burst<true, kAny, true, false, true, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill)
                  : burst<true, kAny, true, false, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
  }
  const bool single = cr.sharing == Sharing::single_writer && cr.cost_in_packets;
  return single ? burst<true, kAny, false, false, true, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill)
                : burst<true, kAny, false, false, false, true>(run, src, m, port, now_ns, counters, verdicts, cl, fill);
}

}  // namespace sluice::pipeline_run
