// The two halves of a running rule set (DESIGN "Rules snapshot apart from state"):
//
//  - RuleState: what a rule accumulates while traffic flows (its aggregate bucket words, its
//    flow table, its hash seed and its counter slot). Long-lived: it belongs to a rule's
//    state identity (its name plus match, key, algorithm, cost unit and window length:
//    same_state_identity() in rules_diff.hpp), so a new rule set that keeps a rule keeps
//    its RuleState, whatever moves around it.
//  - RulesSnapshot: one rule set compiled for the hot path and never changed once published
//    (classifier, profiles, parent chains, actions), with pointers to the RuleStates it
//    charges. Workers read it; a rules change builds a new one and swaps it in whole.
//
// The set of RuleStates the current snapshot references is the state store: a RuleState
// lives as long as some snapshot (the current one, or an old one a worker may still read)
// references it, and is freed with the last of them, after the grace period.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bucket_math.h"
#include "classifier.hpp"
#include "counters.hpp"
#include "dense_key.hpp"
#include "flow_key.hpp"
#include "flow_table.hpp"
#include "limiters.hpp"
#include "rules.hpp"

namespace sluice {

// Deepest parent chain a packet is charged along (the loader rejects cycles and deeper
// chains; this bounds the per-packet work and the refund list).
constexpr size_t kMaxChain = kMaxParentChain;

struct RuleState {
  uint64_t id = 0;         // unique per pipeline, in creation order
  uint64_t hash_seed = 0;  // of this state's flow table: random per start, per state
  uint32_t counter_slot = 0;
  // key: none - one aggregate bucket shared by every worker (16-aligned for meters). It
  // starts full at its first packet's time, which only then is known.
  alignas(64) std::atomic<uint64_t> aggregate[2] = {};
  std::atomic<int> aggregate_ready{0};  // 0 untouched, 1 initialising, 2 ready
  std::unique_ptr<FlowTable> flows;     // keyed rules; null for key: none
};

// The final counters of a rule whose state was removed: each worker adds what its counter
// slot held when it adopted the snapshot without the rule (then clears the slot).
struct RetiredRule {
  std::string name;
  uint32_t counter_slot = 0;
  std::array<std::atomic<uint64_t>, kOutcomeCount> packets{};
  std::array<std::atomic<uint64_t>, kOutcomeCount> bytes{};
  uint64_t active_flows = 0;  // at removal
  uint64_t flows_evicted = 0;

  void fold(const TrafficCounters& t);
  TrafficCounters read() const;
};

// The profiles a rule is charged with (bucket_math.h), one per algorithm family.
struct RuleProfiles {
  sl_rate_profile rate{};
  sl_shaper_profile shaper{};
  sl_meter_profile meter{};
  sl_window_profile window{};
};

// The profile of r's algorithm (the others stay zero), as the bucket arithmetic needs it; the
// loader has checked that it can be made. Shared by the DPDK snapshot and the XDP loader.
Status compile_profile(const Rule& r, RuleProfiles& p);

// A rule compiled for the hot path: its profile, and the state it charges.
struct CompiledRule {
  const Rule* rule = nullptr;
  RuleProfiles p;
  RuleState* state = nullptr;
  FlowTable* flows = nullptr;        // state->flows (keyed rules); null for key: none
  FlowHashFn hash_fn = nullptr;      // the key mode's hash, the mode's switch folded away
  uint64_t hash_seed = 0;            // state->hash_seed
  FlowHashKeys hash_keys;            // flow_hash_keys(hash_seed)
  uint32_t counter_slot = 0;         // state->counter_slot
  // Copies of the rule's fields that every packet reads, beside the rest of the hot line
  // instead of behind `rule`.
  KeyMode key_mode = KeyMode::none;
  uint8_t key_prefix_len = 0;
  // A dense table's range (slots != 0): the flow's slot stands for its hash everywhere.
  DenseKey dense;
  bool cost_in_packets = true;  // cost_unit() == packets: every packet costs 1
  uint32_t overhead_bytes = 0;
  std::array<int, kMaxChain> chain{};  // this rule, then its parents (snapshot positions)
  size_t chain_len = 0;
  Sharing sharing = Sharing::shared;
  // An aggregate policer (key: none, token-bucket / gcra / window) with no parent and no
  // child: all of a burst's packets for it can be decided with one charge of its word, in
  // the same order and with the same results as one by one, since no other packet of the
  // burst touches that word.
  bool burstable = false;
  // A policer (token-bucket / gcra / window) without a parent: one bucket to charge and
  // nothing to refund, so finish() takes a short path for it.
  bool lone_policer = false;
  // A keyed token-bucket lone policer, or a keyed srtcm meter (fast_srtcm): what the
  // common-IPv4 burst (pipeline_fast_v4.cpp) charges itself, from the frame's fields alone.
  bool fast_common_ipv4 = false;
  bool fast_srtcm = false;
  bool green_passes = false;  // fast_srtcm: the green action is pass

  uint64_t cost(uint32_t frame_len) const {
    return cost_in_packets ? 1 : uint64_t(frame_len) + overhead_bytes;
  }
  void init_state(std::atomic<uint64_t>* w, uint64_t now_ns) const;

  // Policers and windows: true if conforming (and charged).
  [[gnu::always_inline]] bool police(std::atomic<uint64_t>& w, uint64_t now_ns, uint64_t c) const {
    switch (rule->algorithm) {
      case Algorithm::token_bucket: return token_bucket_charge(p.rate, w, now_ns, c, sharing);
      case Algorithm::gcra: return gcra_charge(p.rate, w, now_ns, c, sharing);
      case Algorithm::fixed_window: return fixed_window_charge(p.window, w, now_ns, c, sharing);
      case Algorithm::sliding_window: return sliding_window_charge(p.window, w, now_ns, c, sharing);
      default: return false;
    }
  }
  // Burst policing (burstable rules): bit i of the result set if packet i conforms.
  uint64_t police_burst(std::atomic<uint64_t>& w, uint64_t now_ns, const uint64_t* costs,
                        uint32_t n) const;
  void refund(std::atomic<uint64_t>& w, uint64_t now_ns, uint64_t c) const;
};

// A kept rule whose profile changed: its state words are carried from `from` to the new
// profile (bucket_convert.hpp) once, by the first worker to adopt the snapshot.
struct StateConversion {
  size_t rule = 0;  // position in the new snapshot
  RuleProfiles from;
};

struct RulesSnapshot {
  RuleSet rules;
  Classifier classifier;
  std::vector<CompiledRule> compiled;  // by position in `rules`
  // Keeps every state it charges alive while a worker may read this snapshot.
  std::vector<std::shared_ptr<RuleState>> states;
  std::vector<FlowTable*> keyed;  // the flow tables of keyed rules, for expiry
  uint64_t generation = 0;
  uint64_t max_delay_ns = 0;   // longest max-delay of its shaping rules (0: none)
  bool any_burstable = false;  // skip the burst grouping pass when no rule can use it
  // No rule, and a default action that reads no field (pass, drop): process_burst needs no
  // parse beyond well-formedness.
  bool rules_free_default = false;
  // No burstable rule, and a rule with fast_common_ipv4: process_burst
  // takes the common-IPv4 burst (pipeline_fast_v4.cpp).
  bool fast_common_ipv4 = false;
  // Every fast_common_ipv4 rule is a token bucket keyed by this one mode (none: not so, or no
  // such rule): the burst's loops then need no per-rule key or algorithm dispatch.
  KeyMode uniform_token_bucket_key = KeyMode::none;
  // A fast_common_ipv4 rule has a dense table: the burst takes the loops that look up either
  // kind of table (pipeline_fast_v4_dense.hpp); the others never test for one.
  bool any_dense_fast = false;
  uint32_t default_slot = 0;
  uint32_t counter_slots = 0;  // counters a worker needs: every slot below this
  // What a worker adopting this snapshot does to its counters (Pipeline::enter()).
  std::vector<uint32_t> fresh_slots;  // slots first used here: start at zero
  std::vector<std::shared_ptr<RetiredRule>> retiring;  // removed: fold, then clear the slot
  std::vector<StateConversion> conversions;
  // Diagnostics of the swap: the time apply() was given, how many workers entered this
  // snapshot and the latest clock reading at which one did (Pipeline::swap_visibility()).
  uint64_t applied_ns = 0;
  mutable std::atomic<uint32_t> entered{0};
  mutable std::atomic<uint64_t> last_entered_ns{0};
  // 0: conversions pending, 1: a worker runs them, 2: done (or none).
  mutable std::atomic<int> conversion_state{2};
  // Each keyed rule's flow slots and the period its table must be swept in (ns), for
  // Pipeline::expire_interval_ns(); computed once, when the snapshot is built.
  struct Sweep {
    size_t slots = 0;
    double period_ns = 0;
  };
  std::vector<Sweep> sweeps;

  explicit RulesSnapshot(RuleSet r) : rules(std::move(r)), classifier(rules.rules) {}
  // With the classifier of a snapshot whose rules had the same matches in the same order
  // (it depends on nothing else): a change of rates or actions compiles no match table.
  // The copy keeps the original's id, so the per-thread caches of results (keyed by it) stay
  // right: both answer every frame alike.
  RulesSnapshot(RuleSet r, const Classifier& same_matches)
      : rules(std::move(r)), classifier(same_matches) {}
};

}  // namespace sluice
