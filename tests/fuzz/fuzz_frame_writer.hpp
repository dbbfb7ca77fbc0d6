// The frames fuzz_pipeline sends, written in place into reusable slots. PacketBuilder
// (tests/common) built each one in fresh vectors, a dozen allocations per frame and up to
// 3,072 frames per input: under ASan that allocator traffic was most of the target's time.
// write_frame() writes the same bytes as PacketBuilder for the layers the target uses (one
// optional 802.1Q tag, IPv4 or IPv6 with a DSCP, UDP / TCP / ICMP / a bare protocol number,
// a payload); same_as_packet_builder() checks that over a grid of specs, once at start-up.
//
// FrameSlots keep what an exact-size heap buffer gave ASan: every byte of a slot past the
// frame's end is poisoned, and so is a guard before it, so a read outside the frame is still
// reported (to the byte at the end, as it is for a heap block).
#pragma once

#include <arpa/inet.h>
#include <sanitizer/asan_interface.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "packet_builder.hpp"

namespace sluice::fuzz {

enum class L4Kind : uint8_t { udp, tcp, icmp, bare };

struct FrameSpec {
  int vlan = -1;  // -1: untagged, else the 802.1Q VLAN id
  bool ipv6 = false;
  uint8_t dscp = 0;
  const char* src = "10.0.0.1";
  const char* dst = "10.0.0.2";
  L4Kind l4 = L4Kind::udp;
  uint16_t src_port = 0, dst_port = 0;  // udp, tcp
  uint8_t proto = 0;                    // bare
  size_t payload = 0;                   // bytes of 0xab
};

// Ethernet + one tag + IPv6 + TCP + the largest payload the target asks for.
inline constexpr size_t kMaxFrameBytes = 14 + 4 + 40 + 20 + 1500;

namespace frame_writer_detail {
inline uint8_t* put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
  return p + 2;
}
}  // namespace frame_writer_detail

// Writes the frame of `spec` at `out` (room for kMaxFrameBytes); `src`, `dst`: the
// addresses as bytes (4 or 16). Returns its length.
inline size_t write_frame(const FrameSpec& spec, const uint8_t* src, const uint8_t* dst,
                          uint8_t* out) {
  using frame_writer_detail::put16;
  static const uint8_t kMacs[12] = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01};
  std::memcpy(out, kMacs, 12);
  uint8_t* p = out + 12;
  if (spec.vlan >= 0) {
    p = put16(p, 0x8100);
    p = put16(p, uint16_t(spec.vlan & 0x0fff));
  }
  p = put16(p, spec.ipv6 ? 0x86dd : 0x0800);
  uint8_t proto = spec.proto;
  size_t l4_header = 0;
  switch (spec.l4) {
    case L4Kind::udp: proto = 17, l4_header = 8; break;
    case L4Kind::tcp: proto = 6, l4_header = 20; break;
    case L4Kind::icmp: proto = spec.ipv6 ? 58 : 1, l4_header = 8; break;
    case L4Kind::bare: break;
  }
  const size_t l4_len = l4_header + spec.payload;
  if (!spec.ipv6) {
    uint8_t* h = p;
    std::memset(h, 0, 20);
    h[0] = 0x45;
    h[1] = uint8_t(spec.dscp << 2);
    put16(h + 2, uint16_t(20 + l4_len));
    h[8] = 64;  // TTL
    h[9] = proto;
    std::memcpy(h + 12, src, 4);
    std::memcpy(h + 16, dst, 4);
    put16(h + 10, sluice::testing::PacketBuilder::ipv4_checksum(h, 20));
    p += 20;
  } else {
    uint8_t* h = p;
    const uint32_t vtf = (6u << 28) | (uint32_t(spec.dscp) << 22);
    h[0] = uint8_t(vtf >> 24);
    h[1] = uint8_t(vtf >> 16);
    h[2] = h[3] = 0;
    put16(h + 4, uint16_t(l4_len));
    h[6] = proto;
    h[7] = 64;  // hop limit
    std::memcpy(h + 8, src, 16);
    std::memcpy(h + 24, dst, 16);
    p += 40;
  }
  std::memset(p, 0, l4_header);
  switch (spec.l4) {
    case L4Kind::udp:
      put16(p, spec.src_port), put16(p + 2, spec.dst_port), put16(p + 4, uint16_t(l4_len));
      break;
    case L4Kind::tcp:
      put16(p, spec.src_port), put16(p + 2, spec.dst_port);
      p[12] = 0x50, p[13] = 0x10;  // data offset 5, ACK
      break;
    case L4Kind::icmp: p[0] = spec.ipv6 ? 128 : 8; break;  // echo request
    case L4Kind::bare: break;
  }
  p += l4_header;
  std::memset(p, 0xab, spec.payload);
  return size_t(p + spec.payload - out);
}

// The same frame from PacketBuilder, the reference write_frame() must match.
inline std::vector<uint8_t> build_frame(const FrameSpec& spec) {
  sluice::testing::PacketBuilder b;
  if (spec.vlan >= 0) b.vlan(uint16_t(spec.vlan));
  if (spec.ipv6)
    b.ipv6(spec.src, spec.dst, spec.dscp);
  else
    b.ipv4(spec.src, spec.dst, spec.dscp);
  switch (spec.l4) {
    case L4Kind::udp: b.udp(spec.src_port, spec.dst_port); break;
    case L4Kind::tcp: b.tcp(spec.src_port, spec.dst_port); break;
    case L4Kind::icmp: b.icmp(); break;
    case L4Kind::bare: b.proto(spec.proto); break;
  }
  b.payload(spec.payload);
  return b.build();
}

// write_frame() and PacketBuilder agree on every combination of a grid of specs (tags,
// families, DSCPs, L4 kinds, ports, protocols, payload sizes).
inline bool same_as_packet_builder(const char* const* v4, size_t n_v4, const char* const* v6,
                                   size_t n_v6) {
  std::vector<uint8_t> out(kMaxFrameBytes);
  for (int vlan : {-1, 0, 1, 4095})
    for (int family = 0; family < 2; ++family)
      for (size_t a = 0; a < (family ? n_v6 : n_v4); ++a)
        for (uint8_t dscp : {0, 1, 46, 63})
          for (int l4 = 0; l4 < 4; ++l4)
            for (uint16_t port : {0, 80, 4000, 65535})
              for (size_t payload : {0, 1, 7, 1500}) {
                FrameSpec s;
                s.vlan = vlan;
                s.ipv6 = family == 1;
                s.dscp = dscp;
                s.src = family ? v6[a] : v4[a];
                s.dst = family ? v6[(a + 1) % n_v6] : v4[(a + 1) % n_v4];
                s.l4 = L4Kind(l4);
                s.src_port = uint16_t(port ^ 0x1234);
                s.dst_port = port;
                s.proto = uint8_t(port);
                s.payload = payload;
                uint8_t src[16], dst[16];
                const int af = s.ipv6 ? AF_INET6 : AF_INET;
                if (inet_pton(af, s.src, src) != 1 || inet_pton(af, s.dst, dst) != 1) return false;
                const std::vector<uint8_t> want = build_frame(s);
                const size_t n = write_frame(s, src, dst, out.data());
                if (n != want.size() || std::memcmp(out.data(), want.data(), n) != 0) return false;
              }
  return true;
}

// Frame buffers reused from input to input. Each slot is a poisoned guard then room for
// kMaxFrameBytes; open() makes the room writable, close(len) poisons it past len.
class FrameSlots {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr size_t kRoom = (kMaxFrameBytes + 63) / 64 * 64;
  static constexpr size_t kStride = kGuard + kRoom;

  explicit FrameSlots(size_t n) : n_(n), bytes_(new (std::align_val_t{64}) uint8_t[n * kStride]) {
    ASAN_POISON_MEMORY_REGION(bytes_, n * kStride);
  }
  ~FrameSlots() {
    ASAN_UNPOISON_MEMORY_REGION(bytes_, n_ * kStride);
    ::operator delete[](bytes_, std::align_val_t{64});
  }
  FrameSlots(const FrameSlots&) = delete;
  FrameSlots& operator=(const FrameSlots&) = delete;

  uint8_t* open(size_t i) {
    uint8_t* room = bytes_ + i * kStride + kGuard;
    ASAN_UNPOISON_MEMORY_REGION(room, kRoom);
    return room;
  }
  uint8_t* data(size_t i) const { return bytes_ + i * kStride + kGuard; }
  // The frame in slot i is `len` bytes: everything after it is off limits.
  void close(size_t i, size_t len) {
    uint8_t* room = bytes_ + i * kStride + kGuard;
    ASAN_POISON_MEMORY_REGION(room + len, kRoom - len);
  }

 private:
  size_t n_;
  uint8_t* bytes_;
};

}  // namespace sluice::fuzz
