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

  // Frames of the last describe() (or of the burst since begin()) whose headers were
  // gathered (bit i: frame i).
  uint64_t gathered() const { return gathered_; }

  // A burst read in place (mbuf_frames.hpp): begin() forgets the last burst; frame(pkts, i)
  // describes frame i of pkts on its first use, as describe() would (gathering its headers
  // if they run past its first segment), and gives the same frame on every later use;
  // write_back(pkts, n) then puts back what the pipeline changed in the gathered ones.
  void begin() {
    described_ = 0;
    gathered_ = 0;
  }
  const Pipeline::Frame& frame(rte_mbuf* const* pkts, size_t i) {
    if (!(described_ >> i & 1)) {
      frames_[i] = describe_one(pkts[i], i);
      described_ |= uint64_t{1} << i;
    }
    return frames_[i];
  }
  void write_back(rte_mbuf* const* pkts, uint16_t n) const { write_back(pkts, n, frames_); }

 private:
  Pipeline::Frame describe_one(rte_mbuf* m, size_t i);
  Pipeline::Frame gather(rte_mbuf* m, uint8_t* scratch, uint32_t first_len);

  std::unique_ptr<uint8_t[]> scratch_;
  uint64_t gathered_ = 0;
  uint64_t described_ = 0;         // bit i: frames_[i] holds frame i of this burst
  Pipeline::Frame frames_[kMaxBurst];
};

}  // namespace sluice
