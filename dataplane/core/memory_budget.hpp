// How much memory a rule set's flow tables take, worked out before anything is allocated, so
// that `sluicectl config check` can print it and a dataplane can refuse up front a rules file
// the machine cannot hold (rather than fail, or be killed, while filling its tables).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "result.hpp"
#include "rules.hpp"

namespace sluice {

// Bytes of one FlowTable of `capacity` flows with `state_words` bucket words per flow, as its
// constructor maps them (flow_table.hpp: 32 bytes a flow, 48 for meters, in whole sets of 8
// slots at 2 slots per flow).
uint64_t flow_table_bytes(uint64_t capacity, unsigned state_words);

struct FlowMemory {
  uint64_t flows = 0;  // flow slots of capacity, over every keyed rule
  uint64_t bytes = 0;  // their tables' memory
};

// The flow tables Pipeline::create allocates for `rules`: one per keyed rule (key other than
// none), of its max-flows or else `default_max_flows` (PipelineOptions::default_max_flows).
FlowMemory flow_table_memory(const RuleSet& rules, uint64_t default_max_flows);

// "6.0 MiB", "1.5 GiB", "512 B": for messages.
std::string format_memory_size(uint64_t bytes);

// Refuses a rule set whose flow tables need more than `available_bytes`, with both figures.
Status check_flow_memory(const RuleSet& rules, uint64_t default_max_flows,
                         uint64_t available_bytes);

// MemAvailable from the text of /proc/meminfo, in bytes; nullopt if it has none.
std::optional<uint64_t> parse_mem_available(std::string_view meminfo);

// check_flow_memory against this machine's MemAvailable (read now); Ok when /proc/meminfo
// cannot be read, since then there is nothing to compare with.
Status check_flow_memory_available(const RuleSet& rules, uint64_t default_max_flows);

}  // namespace sluice
