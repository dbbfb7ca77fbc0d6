// How a worker hands a burst of mbufs to the pipeline: each frame as the contiguous bytes that
// hold its headers plus its wire length (rte_pktmbuf_pkt_len), so that a multi-segment frame
// (a jumbo frame net_pcap chained over 2 KiB mbufs, a NIC's scattered RX) is classified by its
// headers and charged by its whole length.
//
// Most chained frames carry all their headers in the first segment, and are parsed there. When
// they do not (a driver that splits headers into a tiny first segment), the first bytes are
// gathered with rte_pktmbuf_read into a per-burst scratch buffer, as many as the parser asks
// for (up to kMaxHeaderBytes). A DSCP mark then rewrites the gathered copy, and write_back()
// puts the changed bytes back into the segments before the frame is sent.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <memory>

#include "pipeline.hpp"

namespace sluice {

class BurstFrames {
 public:
  static constexpr size_t kMaxBurst = Pipeline::kMaxBurst;
  // The first gather: enough for every header of ordinary traffic (IPv4 with options, IPv6
  // with a few extension headers). Larger gathers only when the parser needs more.
  static constexpr uint32_t kFirstGatherBytes = 256;

  // Allocates kMaxBurst * kMaxHeaderBytes bytes of scratch (about 1 MiB, not touched until
  // used). Throws std::bad_alloc.
  BurstFrames();

  // Fills frames[0, n) for pkts[0, n) (n <= kMaxBurst) and remembers which were gathered.
  void describe(rte_mbuf* const* pkts, uint16_t n, Pipeline::Frame* frames);
  // Copies what the pipeline changed in the gathered copies of the last describe() back into
  // the mbufs' segments. Frames parsed in place need nothing.
  void write_back(rte_mbuf* const* pkts, uint16_t n, const Pipeline::Frame* frames) const;

  // Frames of the last describe() whose headers were gathered (bit i: frame i).
  uint64_t gathered() const { return gathered_; }

 private:
  Pipeline::Frame gather(rte_mbuf* m, uint8_t* scratch, uint32_t first_len);

  std::unique_ptr<uint8_t[]> scratch_;
  uint64_t gathered_ = 0;
};

}  // namespace sluice
