// sluiced's counters on DPDK's telemetry socket (SPEC §5), beside DPDK's own /ethdev/*:
//   /sluice/rules        the rule names, in rules-file order, then "default"
//   /sluice/rule,NAME    one rule's counters (REPORT.json's names: matched_packets, ...,
//                        active_flows, flows_evicted); null for an unknown NAME ("default"
//                        is the default action's counters unless a rule has that name)
// Both answer null until the dataplane is set up (the socket opens with the EAL, before).
// The telemetry thread never touches the dataplane: a command asks the control loop for
// counters (CountersSource) and reads its snapshot, so a request can arrive at any time, even
// while the ports close, and reads figures at most 20 ms old (the final ones after exit).
#pragma once

#include <memory>

#include "counters.hpp"
#include "counters_source.hpp"
#include "result.hpp"

namespace sluice {

// Registers the /sluice/* commands (once per process; the EAL must be initialised). With
// --no-telemetry they are registered but nobody can ask.
Status register_telemetry();

// Where the commands take the counters from.
void telemetry_use_counters(std::shared_ptr<CountersSource> source);

}  // namespace sluice
