// libFuzzer target: the frame parser on arbitrary bytes. The input is copied into a heap
// buffer of exactly its size, so ASan reports any read past the frame (SPEC §6). The
// straight-line path (parse_frame_into) and the general walk must agree, and what the parser
// reports must lie inside the frame; DSCP marking of a parsed frame must stay inside it too.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "frame.hpp"
#include "frame_rewrite.hpp"

using namespace sluice;

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_frame_parser: %s\n", what);
    std::abort();
  }
}

bool same(const ParsedFrame& a, const ParsedFrame& b) {
  if (a.status != b.status) return false;
  if (a.status == FrameStatus::malformed) return true;  // reasons may be worded apart
  return a.ip_version == b.ip_version && a.vlan_count == b.vlan_count &&
         a.outer_vlan == b.outer_vlan && a.inner_vlan == b.inner_vlan &&
         a.l3_offset == b.l3_offset && a.l4_offset == b.l4_offset && a.proto == b.proto &&
         a.dscp == b.dscp && a.has_ports == b.has_ports && a.has_l4 == b.has_l4 &&
         a.is_fragment == b.is_fragment && a.is_first_fragment == b.is_first_fragment &&
         a.src_port == b.src_port && a.dst_port == b.dst_port && a.src == b.src &&
         a.dst == b.dst && a.frame_len == b.frame_len && a.match_word == b.match_word;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65535) return 0;
  const uint32_t len = uint32_t(size);
  // Exactly-sized: one byte past the end is outside the allocation.
  std::unique_ptr<uint8_t[]> frame(new uint8_t[size == 0 ? 1 : size]);
  if (size != 0) std::memcpy(frame.get(), data, size);
  const uint8_t* bytes = size == 0 ? frame.get() + 1 : frame.get();

  ParsedFrame fast{}, general{};
  parse_frame_into(bytes, len, len, fast);  // wire length = captured length
  parse_frame_general(bytes, len, len, general);
  check(same(fast, general), "parse_frame_into and parse_frame_general disagree");
  ParsedFrame returned = parse_frame(bytes, len);
  check(same(returned, fast), "parse_frame and parse_frame_into disagree");

  if (fast.status == FrameStatus::malformed) {
    check(fast.malformed_reason != nullptr, "a malformed frame without a reason");
    return 0;
  }
  check(fast.frame_len == len, "frame_len is not the frame's length");
  if (fast.ip_version != 0) {
    check(fast.ip_version == 4 || fast.ip_version == 6, "IP version neither 4 nor 6");
    check(fast.l3_offset < len, "L3 header starts past the frame");
  }
  if (fast.has_l4) check(fast.l4_offset <= len, "L4 header starts past the frame");
  if (fast.has_ports) check(fast.has_l4 && fast.l4_offset + 4u <= len, "ports past the frame");
  check(fast.vlan_count <= 2, "more than two VLAN tags");

  // Marking rewrites the DSCP (and the IPv4 checksum) in place: inside the frame only.
  if (size != 0) mark_dscp(frame.get(), len, fast, uint8_t(data[0] & 0x3f));
  return 0;
}
