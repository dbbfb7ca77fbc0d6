// Frames and traces for the replay end-to-end tests. Every frame carries a sequence number in
// its last four bytes, so a packet can be followed from IN.pcap to OUT.pcap whatever the
// limiter did to its headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "packet_builder.hpp"
#include "replay_harness.hpp"

namespace sluice::testing {

constexpr uint64_t kNsPerSecond = 1000000000ull;
constexpr uint64_t kNsPerMs = 1000000ull;
constexpr uint64_t kNsPerUs = 1000ull;
// Traces start at 1000 s: a whole number of every window length the tests use.
constexpr uint64_t kT0 = 1000 * kNsPerSecond;

inline void set_seq(std::vector<uint8_t>& f, uint32_t seq) {
  size_t n = f.size();
  for (int i = 0; i < 4; ++i) f[n - 4 + size_t(i)] = uint8_t(seq >> (24 - 8 * i));
}

inline uint32_t seq_of(const std::vector<uint8_t>& f) {
  size_t n = f.size();
  uint32_t s = 0;
  for (int i = 0; i < 4; ++i) s = s << 8 | f[n - 4 + size_t(i)];
  return s;
}

struct Udp4 {
  std::string src = "10.1.0.1";
  std::string dst = "192.0.2.10";
  uint16_t sport = 1000;
  uint16_t dport = 53;
  size_t size = 100;
  uint8_t dscp = 0;
};

inline std::vector<uint8_t> udp4(uint32_t seq, const Udp4& o = {}) {
  auto f = PacketBuilder().ipv4(o.src, o.dst, o.dscp).udp(o.sport, o.dport).frame_size(o.size).build();
  set_seq(f, seq);
  return f;
}

// Appends `n` frames made by make(seq) at start, start + gap, ...; returns the next time.
template <class Make>
uint64_t add_run(std::vector<Frame>& trace, uint64_t start_ns, uint64_t gap_ns, size_t n, Make make) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t seq = uint32_t(trace.size());
    trace.push_back(Frame{start_ns + i * gap_ns, make(seq)});
  }
  return start_ns + n * gap_ns;
}

// Offsets into an untagged frame.
constexpr size_t kL3 = 14;

inline bool is_ipv4(const std::vector<uint8_t>& f) { return f.size() > kL3 && f[12] == 0x08 && f[13] == 0x00; }
inline bool is_ipv6(const std::vector<uint8_t>& f) { return f.size() > kL3 && f[12] == 0x86 && f[13] == 0xdd; }

inline uint8_t dscp_of(const std::vector<uint8_t>& f) {
  if (is_ipv4(f)) return f[kL3 + 1] >> 2;
  return uint8_t(((f[kL3] & 0x0f) << 2) | (f[kL3 + 1] >> 6));
}
inline uint8_t ecn_of(const std::vector<uint8_t>& f) {
  if (is_ipv4(f)) return f[kL3 + 1] & 3;
  return (f[kL3 + 1] >> 4) & 3;
}
inline bool ipv4_checksum_ok(const std::vector<uint8_t>& f) {
  size_t ihl = size_t(f[kL3] & 0x0f) * 4;
  return PacketBuilder::ipv4_checksum(f.data() + kL3, ihl) == 0;
}
inline std::string ipv4_src(const std::vector<uint8_t>& f) {
  return std::to_string(f[kL3 + 12]) + "." + std::to_string(f[kL3 + 13]) + "." +
         std::to_string(f[kL3 + 14]) + "." + std::to_string(f[kL3 + 15]);
}

// A small deterministic PRNG for irregular traces (splitmix64).
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t s_;
};

}  // namespace sluice::testing
