// sluiced's counters on DPDK's telemetry socket (SPEC §5), beside DPDK's own /ethdev/*:
//   /sluice/rules        the rule names, in rules-file order, then "default"
//   /sluice/rule,NAME    one rule's counters (REPORT.json's names: matched_packets, ...,
//                        active_flows, flows_evicted); null for an unknown NAME ("default"
//                        is the default action's counters unless a rule has that name)
// Both answer null until the dataplane is set up (the socket opens with the EAL, before).
// The telemetry thread never touches the dataplane: the control loop publishes a copy of the
// counters every tick (20 ms) and the commands read that copy, so a request can arrive at any
// time, even while the ports close, and reads figures at most one tick old.
#pragma once

#include "counters.hpp"
#include "result.hpp"

namespace sluice {

// Registers the /sluice/* commands (once per process; the EAL must be initialised). With
// --no-telemetry they are registered but nobody can ask.
Status register_telemetry();

// Makes `snap` what the commands report.
void publish_telemetry(CountersSnapshot snap);

}  // namespace sluice
