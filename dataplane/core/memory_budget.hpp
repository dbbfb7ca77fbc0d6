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
// Adds rule r's table (none for key: none) to m, saturating: flow_table_memory's one step, for
// callers that count only some rules of a set.
void add_flow_table(FlowMemory& m, const Rule& r, uint64_t default_max_flows);

// "6.0 MiB", "1.5 GiB", "512 B": for messages.
std::string format_memory_size(uint64_t bytes);

// Refuses a rule set whose flow tables need more than `available_bytes`, with both figures
// and what to lower: max-flows, and `capacity_option` when the program has an option that
// sets default_max_flows (sluiced's live `--flows`; "" for replay and the XDP backend, which
// have none, so the message does not send an operator to an option that is refused).
Status check_flow_memory(const RuleSet& rules, uint64_t default_max_flows,
                         uint64_t available_bytes, std::string_view capacity_option);
// The same for tables of `need` (bytes, flows) worked out elsewhere (the XDP backend's).
Status check_flow_memory(const FlowMemory& need, uint64_t available_bytes,
                         std::string_view capacity_option);

// MemAvailable from the text of /proc/meminfo, in bytes; nullopt if it has none.
std::optional<uint64_t> parse_mem_available(std::string_view meminfo);

// How much more memory the cgroups of a process let it have: the least, over its cgroup and
// every ancestor, of limit - usage. `proc_self_cgroup` is the text of /proc/self/cgroup and
// `root` where the cgroup file systems are mounted: cgroup v1's memory controller
// (ROOT/memory/PATH/memory.limit_in_bytes, memory.usage_in_bytes) if a line names it, else
// v2 (ROOT/PATH/memory.max, memory.current). nullopt when no level sets a limit it can read.
// (A container's limit is not in MemAvailable, which is the host's: the kernel kills a process
// that goes past it, whatever the machine has free.)
std::optional<uint64_t> cgroup_memory_headroom(std::string_view proc_self_cgroup,
                                               const std::string& root = "/sys/fs/cgroup");

// What this process can still allocate now: MemAvailable, or less where a cgroup limit leaves
// less; nullopt when neither can be read.
std::optional<uint64_t> memory_available_now();

// check_flow_memory against memory_available_now(); Ok when it is unknown, since then there
// is nothing to compare with.
Status check_flow_memory_available(const RuleSet& rules, uint64_t default_max_flows,
                                   std::string_view capacity_option);

}  // namespace sluice
