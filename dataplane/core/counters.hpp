// Counters of SPEC §5. Each worker owns one WorkerCounters (no sharing, no atomics on the
// hot path); readers sum them into a CountersSnapshot, through a CountersHandoff while the
// worker runs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "../abi/sluice_enums.h"

namespace sluice {

// Packet outcomes counted in packets and bytes. `exceeded` counts non-conforming packets
// whatever the action (a dry-run `pass` rule counts what it would have dropped). Values from
// sluice_enums.h: they index the XDP program's per-CPU counters too.
enum class Outcome : uint8_t {
  matched = SL_OUTCOME_MATCHED,
  conformed = SL_OUTCOME_CONFORMED,
  exceeded = SL_OUTCOME_EXCEEDED,
  passed = SL_OUTCOME_PASSED,
  dropped = SL_OUTCOME_DROPPED,
  marked = SL_OUTCOME_MARKED,
  delayed = SL_OUTCOME_DELAYED,
  malformed = SL_OUTCOME_MALFORMED,
  green = SL_OUTCOME_GREEN,
  yellow = SL_OUTCOME_YELLOW,
  red = SL_OUTCOME_RED,
  kCount = SL_OUTCOME_COUNT,
};

constexpr size_t kOutcomeCount = size_t(Outcome::kCount);

// The name used in JSON and metrics: "<name>_packets", "<name>_bytes".
const char* outcome_name(Outcome o);

struct TrafficCounters {
  std::array<uint64_t, kOutcomeCount> packets{};
  std::array<uint64_t, kOutcomeCount> bytes{};

  void add(Outcome o, uint64_t frame_bytes) {
    packets[size_t(o)] += 1;
    bytes[size_t(o)] += frame_bytes;
  }
  uint64_t pkts(Outcome o) const { return packets[size_t(o)]; }
  uint64_t byts(Outcome o) const { return bytes[size_t(o)]; }
  TrafficCounters& operator+=(const TrafficCounters& other);
};

// One worker's counters, indexed by counter slot: a rule's slot is stable for as long as the
// rule keeps its state (rules_snapshot.hpp), whatever moves around it. For the rule set a
// pipeline starts with, rule i has slot i and the default slot `rule count`; rules added
// later get slots past those (or slots of removed rules, once no worker counts into them).
struct WorkerCounters {
  std::vector<TrafficCounters> per_rule;
  uint32_t default_slot = 0;
  // The rules snapshot these counters are laid out for (Pipeline::enter() adopts a newer one).
  uint64_t generation = 0;
  // Not a counter, but the worker's as they are: when workers share the flow tables, the
  // half of every set in which this worker looks for and claims its flows first
  // (FlowTable::find_or_insert_home), 0 or 1. Workers that see different flows (RSS) then
  // write different lines.
  uint8_t table_half = 0;
  explicit WorkerCounters(size_t rule_count = 0)
      : per_rule(rule_count + 1), default_slot(uint32_t(rule_count)) {}
  TrafficCounters& rule(size_t slot) { return per_rule[slot]; }
  TrafficCounters& default_rule() { return per_rule[default_slot]; }
  const TrafficCounters& default_rule() const { return per_rule[default_slot]; }
};

struct RuleSnapshot {
  std::string name;
  TrafficCounters traffic;
  uint64_t active_flows = 0;
  uint64_t flows_evicted = 0;
};

struct PortSnapshot {
  uint16_t port = 0;
  uint64_t rx_packets = 0, tx_packets = 0, missed_packets = 0;
  uint64_t rx_bytes = 0, tx_bytes = 0;
};

// A counter of what happened outside the rules (the live dataplane's drops on a full TX
// buffer, its mbuf pool, ...), named as in the live REPORT.json's "dataplane" object. A gauge
// goes up and down (mbufs in use); the others only grow.
struct NamedCounter {
  std::string name;
  uint64_t value = 0;
  bool gauge = false;
};

struct CountersSnapshot {
  std::vector<RuleSnapshot> rules;
  // Rules removed while running (live control), with their final counters: the most recent
  // removals, newest last (docs/SEMANTICS.md "Changing rules while traffic flows").
  std::vector<RuleSnapshot> removed;
  RuleSnapshot default_rule;  // name "default"
  std::vector<PortSnapshot> ports;
  std::vector<NamedCounter> dataplane;  // live mode only: for sluicectl and --metrics
};

}  // namespace sluice
