// Flow keys (SPEC §2 `key`) and their seeded hash. The hash is the flow's identity in the
// flow table, so it is keyed with a random per-start seed: no packet stream can aim for
// collisions without knowing it.
#pragma once

#include <cstdint>

#include "frame.hpp"
#include "rules.hpp"

namespace sluice {

// The fields a key mode selects from a frame, as five 64-bit words (unused ones zero), built
// with word stores so the hash reads them back without store-forwarding stalls:
//   w[0]  mode | IP version << 8 | prefix bits << 16 | proto << 24 | src port << 32 | dst port << 48
//   IPv4: w[1] = source address | destination address << 32 (each as read from the wire)
//   IPv6: w[1], w[2] = source address; w[3], w[4] = destination address
struct FlowKey {
  uint64_t w[5] = {};
  friend bool operator==(const FlowKey&, const FlowKey&) = default;
};

FlowKey make_flow_key(const ParsedFrame& pf, KeyMode mode, uint8_t prefix_len);

// 64-bit keyed hash of a flow key (a wyhash-style multiply-fold mix): two multiplies for an
// IPv4 key, four for IPv6.
uint64_t hash_flow_key(const FlowKey& key, uint64_t seed);

// Random seed from the OS.
uint64_t random_hash_seed();

}  // namespace sluice
