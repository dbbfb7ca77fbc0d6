// C++ side of the XDP ABI (sluice_abi.h): the layout the kernel and the loader agree on,
// checked at compile time, and conversions from the core's rule model.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice_abi.h"
#include "../core/counters.hpp"
#include "../core/flow_key.hpp"
#include "../core/flow_table.hpp"
#include "../core/rules.hpp"

namespace sluice::abi {

// The layouts the BPF program was compiled against (any change here is an ABI change).
static_assert(sizeof(sl_rule_bits) == 8 * SL_XDP_RULE_WORDS);
static_assert(SL_XDP_MAX_RULES % 64 == 0, "rule bitmaps are whole words");
static_assert(sizeof(sl_lpm_v4_key) == 12 && sizeof(sl_lpm_v6_key) == 24);
static_assert(offsetof(sl_lpm_v4_key, addr) == 5 && offsetof(sl_lpm_v6_key, addr) == 5,
              "the bank byte, then the address: one LPM match covers both");
static_assert(sizeof(sl_action_entry) == 2);
static_assert(sizeof(sl_rate_profile) == 40 && sizeof(sl_meter_profile) == 96 &&
              sizeof(sl_window_profile) == 24);
static_assert(offsetof(sl_xdp_profiles, meter) == 40 && offsetof(sl_xdp_profiles, window) == 136 &&
              sizeof(sl_xdp_profiles) == 160);
static_assert(offsetof(sl_xdp_rule, gen) == 12 && offsetof(sl_xdp_rule, state) == 16 &&
              offsetof(sl_xdp_rule, chain_len) == 22 && offsetof(sl_xdp_rule, cur) == 24 &&
              offsetof(sl_xdp_rule, cur) + sizeof(sl_rate_profile) == 64 &&
              offsetof(sl_xdp_rule, prev) == 184 && offsetof(sl_xdp_rule, chain) == 348 &&
              offsetof(sl_xdp_rule, action) == 364 && sizeof(sl_xdp_rule) == 384,
              "the hot fields and cur.rate in the first cache line");
static_assert(offsetof(sl_xdp_config, test_now_ns) == 8 && sizeof(sl_xdp_config) == 32);
static_assert(sizeof(sl_xdp_bank) == 8);
static_assert(sizeof(sl_flow_key) == 40);
static_assert(sizeof(sl_flow_slot) == 64 && sizeof(sl_flow_set) == SL_FT_SET_BYTES &&
              offsetof(sl_flow_set, slot) == 64 && sizeof(sl_flow_meta) == 128);
static_assert(offsetof(sl_flow_meta, dense_base) == 56 && offsetof(sl_flow_meta, dense_bits) == 63,
              "a dense table's numbers in line 0, beside the rest a packet reads");
// The program's flow tables are the core's FlowTable, word for word (sluice_abi.h "Flow tables").
static_assert(SL_HASH_S0 == detail::kHashS0 && SL_HASH_S1 == detail::kHashS1 &&
              SL_HASH_S2 == detail::kHashS2, "the core's flow hash");
static_assert(SL_FT_WAYS == FlowTable::kWays && SL_FT_SLACK == FlowTable::kSlack &&
              SL_FT_TICK_BITS == FlowTable::kTickBits &&
              SL_FT_FP_BITS == FlowTable::kFingerprintBits &&
              SL_FT_FP_SHIFT == FlowTable::kFingerprintShift &&
              SL_FT_PENDING == FlowTable::kPending && SL_FT_SEEN_ONCE == FlowTable::kSeenOnce,
              "the core's tag word");
static_assert(sizeof(FlowKey::w) == sizeof(sl_flow_key::w), "the core's flow key words");
static_assert(offsetof(sl_bucket, w0) == 8 && offsetof(sl_bucket, last_seen_ns) == 24 &&
              offsetof(sl_bucket, gen) == 32 && offsetof(sl_bucket, packets) == 40 &&
              sizeof(sl_bucket) == 56);
static_assert(sizeof(sl_counter) == 16 && sizeof(sl_slot_counters) == 16 * SL_OUTCOME_COUNT);
static_assert(SL_XDP_MAX_CHAIN == kMaxParentChain, "XDP charges the chains the loader accepts");
static_assert(uint8_t(CostUnit::packets) == SL_COST_PACKETS &&
              uint8_t(CostUnit::bytes) == SL_COST_BYTES);
static_assert(size_t(Outcome::kCount) == SL_OUTCOME_COUNT);

inline sl_action_entry to_abi(const Action& a) {
  return sl_action_entry{uint8_t(a.kind), a.dscp};
}

}  // namespace sluice::abi
