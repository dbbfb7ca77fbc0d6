#include "burst_frames.hpp"

#include <rte_prefetch.h>

#include <algorithm>
#include <cstring>

#include "frame.hpp"

namespace sluice {

static_assert(BurstFrames::kMaxBurst <= 64, "gathered() is a 64-bit mask");

BurstFrames::BurstFrames()
    // Uninitialised on purpose: pages of the scratch are only touched by frames that need them.
    : scratch_(new uint8_t[kMaxBurst * kMaxHeaderBytes]) {}

void BurstFrames::describe(rte_mbuf* const* pkts, uint16_t n, Pipeline::Frame* frames) {
  gathered_ = 0;
  // One pass for the common burst, every frame in one segment (data_len == pkt_len): each
  // frame as its mbuf says, and a running OR of what tells a chained frame, tested once after
  // the loop instead of a branch per frame.
  uint32_t chained = 0;
  for (size_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
    const uint32_t wire_len = rte_pktmbuf_pkt_len(m), first_len = rte_pktmbuf_data_len(m);
    frames[i] = {data, first_len, wire_len};
    rte_prefetch0(data);
    chained |= first_len ^ wire_len;
  }
  if (chained == 0) [[likely]] return;
  for (size_t i = 0; i < n; ++i)
    if (frames[i].len != frames[i].wire_len) frames[i] = describe_one(pkts[i], i);
}

Pipeline::Frame BurstFrames::describe_one(rte_mbuf* m, size_t i) {
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t wire_len = rte_pktmbuf_pkt_len(m);
  const uint32_t first_len = std::min<uint32_t>(rte_pktmbuf_data_len(m), wire_len);
  const Pipeline::Frame whole{data, first_len, wire_len};
  if (first_len == wire_len) return whole;  // one segment: the whole frame
  // Chained. Usually the first segment holds every header: a parse there says.
  ParsedFrame probe;
  parse_frame_into(data, first_len, wire_len, probe);
  if (!headers_past_bytes_at_hand(probe)) return whole;
  const Pipeline::Frame f = gather(m, scratch_.get() + i * kMaxHeaderBytes, first_len);
  if (f.data != data) gathered_ |= uint64_t{1} << i;
  return f;
}

// Gathers growing prefixes of m until the parser has every header it walks (or the frame, or
// kMaxHeaderBytes, runs out): a few hundred bytes for nearly every frame, more only for long
// IPv6 extension chains.
Pipeline::Frame BurstFrames::gather(rte_mbuf* m, uint8_t* scratch, uint32_t first_len) {
  const uint32_t wire_len = rte_pktmbuf_pkt_len(m);
  const uint32_t most = std::min(wire_len, kMaxHeaderBytes);
  Pipeline::Frame f{rte_pktmbuf_mtod(m, uint8_t*), first_len, wire_len};
  for (uint32_t want = std::max(kFirstGatherBytes, first_len + 1);; want *= 4) {
    want = std::min(want, most);
    // A copy into scratch: the range spans segments (want > first_len). Null only for a
    // chain whose pkt_len lies about its segments; the frame keeps its first segment then.
    const void* p = rte_pktmbuf_read(m, 0, want, scratch);
    if (p == nullptr) return f;
    f.data = static_cast<uint8_t*>(const_cast<void*>(p));
    f.len = want;
    if (want == most) return f;
    ParsedFrame probe;
    parse_frame_into(f.data, f.len, wire_len, probe);
    if (!headers_past_bytes_at_hand(probe)) return f;
  }
}

void BurstFrames::write_back(rte_mbuf* const* pkts, uint16_t n,
                             const Pipeline::Frame* frames) const {
  for (uint64_t left = gathered_; left != 0; left &= left - 1) {
    const unsigned i = unsigned(__builtin_ctzll(left));
    if (i >= n) break;
    const uint8_t* copy = frames[i].data;
    uint32_t off = 0;
    for (rte_mbuf* seg = pkts[i]; seg != nullptr && off < frames[i].len; seg = seg->next) {
      const uint32_t k = std::min<uint32_t>(seg->data_len, frames[i].len - off);
      uint8_t* in_seg = rte_pktmbuf_mtod(seg, uint8_t*);
      // Only what changed (a DSCP mark: a few header bytes), so untouched frames stay unwritten.
      if (std::memcmp(in_seg, copy + off, k) != 0) std::memcpy(in_seg, copy + off, k);
      off += k;
    }
  }
}

}  // namespace sluice
