// Where a burst's frames come from, for the burst loops (pipeline_burst.hpp and the
// common-IPv4 burst of pipeline_fast_v4_burst.hpp): an array of Pipeline::Frame (what
// process_burst is given), or a live worker's mbufs read in place (live/mbuf_frames.hpp), so
// that a worker writes no array of frames before the pipeline reads it back.
//
// A source has, for frame i of the burst:
//   Pipeline::Frame head(size_t i)         its first bytes and wire length, as cheaply as the
//                                          source can say them;
//   bool as_is(const Pipeline::Frame& h)   whether head(i) is the frame as the general stages
//                                          get it (true for one-segment mbufs; a chained one
//                                          may need its headers gathered first);
//   uint32_t wire(const Pipeline::Frame& h) its wire length (what counters count);
//   Pipeline::Frame full(size_t i)         the frame as the general stages get it (the bytes
//                                          that hold its headers; a DSCP mark rewrites them).
// The fast paths read head(); every frame they refuse, and every frame of a general stage,
// is read through full(), so a frame is classified and charged alike from either source.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pipeline.hpp"

namespace sluice {

struct FrameArray {
  const Pipeline::Frame* frames;

  const Pipeline::Frame& head(size_t i) const { return frames[i]; }
  static constexpr bool as_is(const Pipeline::Frame&) { return true; }
  // A wire_len below len (e.g. left 0) counts as len (Pipeline::Frame).
  static uint32_t wire(const Pipeline::Frame& f) { return std::max(f.len, f.wire_len); }
  const Pipeline::Frame& full(size_t i) const { return frames[i]; }
};

}  // namespace sluice
