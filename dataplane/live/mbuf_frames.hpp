// A worker's burst of mbufs as a frame source (core/frame_source.hpp) for the pipeline's
// burst loops, read in place: the fast paths read each mbuf's first segment (data pointer,
// data_len, pkt_len) as they go, and only a frame they refuse or a general stage reads is
// described whole by BurstFrames (a chained frame's headers gathered if they must be). So the
// common burst costs no pass that writes an array of frames and no pass that reads it back.
#pragma once

#include <rte_mbuf.h>

#include <cstddef>
#include <cstdint>

#include "burst_frames.hpp"
#include "pipeline.hpp"

namespace sluice {

struct RulesSnapshot;

struct MbufFrames {
  rte_mbuf* const* pkts;
  BurstFrames* frames;  // begin() called for this burst

  Pipeline::Frame head(size_t i) const {
    const rte_mbuf* m = pkts[i];
    return {rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m), rte_pktmbuf_pkt_len(m)};
  }
  // One segment holds the whole frame: head() is what BurstFrames would describe.
  static bool as_is(const Pipeline::Frame& h) { return h.len == h.wire_len; }
  static uint32_t wire(const Pipeline::Frame& h) { return h.wire_len; }
  const Pipeline::Frame& full(size_t i) const { return frames->frame(pkts, i); }
};

// Pipeline::process_burst(snap, ...) of n <= Pipeline::kMaxBurst mbufs read through `src`,
// with VerdictFill::unless_all_now (mbuf_burst.cpp).
size_t process_mbuf_burst(const RulesSnapshot& snap, const MbufFrames& src, size_t n,
                          uint16_t port, uint64_t now_ns, WorkerCounters& counters,
                          Verdict* verdicts);

}  // namespace sluice
