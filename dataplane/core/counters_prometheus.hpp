// The counters of SPEC §5 in the Prometheus text exposition format (version 0.0.4), for
// `sluiced --metrics HOST:PORT`:
//
//   sluice_packets_total{rule="NAME",outcome="matched"} N   per rule and outcome (REPORT.json's
//   sluice_bytes_total{rule="NAME",outcome="matched"} N     "<outcome>_packets" / "_bytes")
//   sluice_active_flows{rule="NAME"} N                      gauge
//   sluice_flows_evicted_total{rule="NAME"} N
//   sluice_port_rx_packets_total{port="0"} N                and rx_bytes, tx_packets,
//                                                           tx_bytes, missed_packets
//   sluice_dataplane_NAME_total N / sluice_dataplane_NAME N CountersSnapshot::dataplane
//                                                           (counters / gauges), live only;
//                                                           a gauge X_total is served as
//                                                           X_capacity (promtool forbids it)
//
// The default action's counters carry rule="default", as in REPORT.json and telemetry.
#pragma once

#include <string>

#include "counters.hpp"

namespace sluice {

std::string counters_to_prometheus(const CountersSnapshot& snapshot);

}  // namespace sluice
