// In-place rewrites of a parsed frame, for rule actions that modify packets (SPEC §2
// `mark-dscp`). The frame must be the one `pf` was parsed from: `len` its wire length
// (pf.frame_len), of which the pf.parsed_len bytes at `frame` are the ones written.
#pragma once

#include <cstdint>

#include "frame.hpp"

namespace sluice {

// Sets the DSCP (0-63) of the frame's IP header and keeps its two ECN bits. IPv4: the header
// checksum is updated incrementally (RFC 1624), so a frame that arrived with a bad checksum
// keeps a bad one instead of being silently repaired. Neither field is in the TCP/UDP
// pseudo-header, so L4 checksums stay valid. Returns false and leaves the frame untouched for
// malformed or non-IP frames, a `dscp` above 63, or a `pf` that does not describe `frame`.
bool mark_dscp(uint8_t* frame, uint32_t len, const ParsedFrame& pf, uint8_t dscp);

}  // namespace sluice
