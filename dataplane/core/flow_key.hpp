// Flow keys (SPEC §2 `key`) and their seeded hash. The hash is the flow's identity in the
// flow table, so it is keyed with a random per-start seed: no packet stream can aim for
// collisions without knowing it.
#pragma once

#include <cstdint>

#include "frame.hpp"
#include "rules.hpp"

namespace sluice {

// The bytes a key mode selects from a frame; unused bytes are zero.
struct FlowKey {
  uint8_t bytes[40] = {};
};

FlowKey make_flow_key(const ParsedFrame& pf, KeyMode mode, uint8_t prefix_len);

// 64-bit keyed hash of a flow key (a wyhash-style multiply-fold mix).
uint64_t hash_flow_key(const FlowKey& key, uint64_t seed);

// Random seed from the OS.
uint64_t random_hash_seed();

}  // namespace sluice
