// The rules model: what a rules file (SPEC §2) says, after validation. Plain data; the
// loader builds it, the pipeline compiles it into profiles and flow tables.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../abi/sluice_enums.h"
#include "rate.hpp"

namespace sluice {

// An address prefix; IPv4 is stored in the first 4 bytes of addr.
struct Cidr {
  uint8_t family = 4;  // 4 or 6
  std::array<uint8_t, 16> addr{};
  uint8_t prefix_len = 0;
  friend bool operator==(const Cidr&, const Cidr&) = default;
};

struct PortRange {
  uint16_t lo = 0;
  uint16_t hi = 0;
  friend bool operator==(const PortRange&, const PortRange&) = default;
};

// Every present field must hold for a rule to match.
struct Match {
  std::optional<Cidr> src;
  std::optional<Cidr> dst;
  std::optional<uint8_t> proto;
  std::optional<PortRange> src_port;
  std::optional<PortRange> dst_port;
  std::optional<uint16_t> vlan;  // matches the outer (service) VLAN id
  std::optional<uint8_t> dscp;
  std::optional<uint16_t> port;  // ingress port id
  friend bool operator==(const Match&, const Match&) = default;
};

// Values from sluice_enums.h: the XDP program reads them from its maps.
enum class KeyMode : uint8_t {
  none = SL_KEY_NONE,
  src_ip = SL_KEY_SRC_IP,
  dst_ip = SL_KEY_DST_IP,
  src_dst = SL_KEY_SRC_DST,
  five_tuple = SL_KEY_FIVE_TUPLE,
  src_prefix = SL_KEY_SRC_PREFIX,
  dst_prefix = SL_KEY_DST_PREFIX,
};

enum class Algorithm : uint8_t {
  token_bucket = SL_ALG_TOKEN_BUCKET,
  gcra = SL_ALG_GCRA,
  leaky_bucket = SL_ALG_LEAKY_BUCKET,
  srtcm = SL_ALG_SRTCM,
  trtcm = SL_ALG_TRTCM,
  sliding_window = SL_ALG_SLIDING_WINDOW,
  fixed_window = SL_ALG_FIXED_WINDOW,
};

enum class ActionKind : uint8_t {
  pass = SL_ACT_PASS,
  drop = SL_ACT_DROP,
  mark_dscp = SL_ACT_MARK_DSCP,
};

struct Action {
  ActionKind kind = ActionKind::pass;
  uint8_t dscp = 0;  // for mark_dscp
  friend bool operator==(const Action&, const Action&) = default;
};

// Meter rules act per colour.
struct ColourActions {
  Action green{ActionKind::pass, 0};
  Action yellow{ActionKind::pass, 0};
  Action red{ActionKind::drop, 0};
  friend bool operator==(const ColourActions&, const ColourActions&) = default;
};

constexpr uint64_t kDefaultIdleTimeoutNs = 60ull * 1000 * 1000 * 1000;

// What the default action's counters and metrics series are named (rule="default"); no rule
// may take it.
constexpr std::string_view kDefaultRuleName = "default";

// Most rules a packet is charged along: the rule it matched and its parents, grandparents...
// (the pipeline bounds its per-packet work and refund list with it; the loader rejects deeper
// chains at their line).
constexpr size_t kMaxParentChain = 8;
// Largest max-flows of one rule: 2^28 flows, 8 GiB of flow table (12 GiB for meters).
constexpr uint64_t kMaxFlowsPerRule = uint64_t{1} << 28;

struct Rule {
  std::string name;
  int line = 0;  // line of the rule in its file, for messages
  Match match;
  KeyMode key = KeyMode::none;
  uint8_t key_prefix_len = 0;  // for src_prefix / dst_prefix
  Algorithm algorithm = Algorithm::token_bucket;
  Rate rate;                  // CIR for meters
  uint64_t burst = 0;         // tokens; CBS for meters
  uint64_t excess_burst = 0;  // srtcm EBS (tokens)
  Rate peak_rate;             // trtcm PIR
  uint64_t peak_burst = 0;    // trtcm PBS (tokens)
  uint64_t window_ns = 0;     // windows
  uint64_t limit = 0;         // windows: cost allowed per window, in limit_unit
  CostUnit limit_unit = CostUnit::packets;
  uint64_t max_delay_ns = 0;  // leaky-bucket
  uint32_t overhead_bytes = 0;
  Action action{ActionKind::drop, 0};
  ColourActions colour_actions;    // srtcm / trtcm
  std::optional<Action> overflow;  // when no flow slot can be had; default: action
  std::string parent;              // empty: none
  int parent_index = -1;           // resolved by the loader
  uint64_t max_flows = 0;          // 0: the pipeline's default capacity
  uint64_t idle_timeout_ns = kDefaultIdleTimeoutNs;

  bool is_window() const {
    return algorithm == Algorithm::fixed_window || algorithm == Algorithm::sliding_window;
  }
  bool is_meter() const { return algorithm == Algorithm::srtcm || algorithm == Algorithm::trtcm; }
  CostUnit cost_unit() const { return is_window() ? limit_unit : rate.unit; }
};

struct RuleSet {
  Action default_action{ActionKind::pass, 0};
  std::vector<Rule> rules;
};

}  // namespace sluice
