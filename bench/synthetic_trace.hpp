// The synthetic UDP traces of the core benchmarks and the per-flow rule they are run with:
// flow i is 10.(i >> 16).(i >> 8).i:(1024 + i % 64512) -> dst:53, as sluice-tracegen numbers
// flows, and a trace is its frames back to back, `frame_bytes` apart, in a given order of flows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "packet_builder.hpp"

namespace bench {

// bench/dataplane/rules.yaml's rule: one token bucket per UDP 5-tuple at 1 Mpps, far above
// what a flow of these traces gets, so every packet conforms (the full conforming path).
inline constexpr const char* kPerFlowRules = R"(
default: {action: pass}
rules:
  - name: per-flow
    match: {proto: udp}
    key: 5-tuple
    rate: 1Mpps
    burst: 1000
    algorithm: token-bucket
    action: drop
)";

// Where flow i's frames go: one destination for all, or 172.16.(i >> 8).i (a destination
// per flow, up to 65536, for rules keyed by dst-ip).
enum class TraceDst { one, per_flow };

// `frames` frames, every flow once per pass (frame i is flow i % flows), shuffled with a
// fixed seed: the same order every run.
inline std::vector<uint32_t> shuffled_flow_order(size_t flows, size_t frames) {
  std::vector<uint32_t> order(frames);
  for (size_t i = 0; i < frames; ++i) order[i] = uint32_t(i % flows);
  std::mt19937_64 rng(1);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// Frame i of the trace is flow order[i]'s.
inline std::vector<uint8_t> synthetic_trace(const std::vector<uint32_t>& order, size_t frame_bytes,
                                            TraceDst dst_mode = TraceDst::one) {
  std::vector<uint8_t> trace(order.size() * frame_bytes);
  for (size_t i = 0; i < order.size(); ++i) {
    const uint32_t f = order[i];
    const std::string src = "10." + std::to_string(f >> 16 & 255) + "." +
                            std::to_string(f >> 8 & 255) + "." + std::to_string(f & 255);
    const std::string dst = dst_mode == TraceDst::one
                                ? "192.0.2.1"
                                : "172.16." + std::to_string(f >> 8 & 255) + "." +
                                      std::to_string(f & 255);
    const std::vector<uint8_t> frame = sluice::testing::PacketBuilder()
                                           .ipv4(src, dst)
                                           .udp(uint16_t(1024 + f % 64512), 53)
                                           .frame_size(frame_bytes)
                                           .build();
    std::memcpy(trace.data() + i * frame_bytes, frame.data(), frame_bytes);
  }
  return trace;
}

}  // namespace bench
