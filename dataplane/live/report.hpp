// What the live dataplane reports beyond the rule counters of SPEC §5: REPORT.json gets a
// top-level "dataplane" object (the replay REPORT.json has none), the --stats-interval table a
// "dataplane:" line. Both show what would otherwise be only on stderr: packets dropped on a
// full TX buffer, on a full shaper wheel and held at shutdown, per-port RX mbuf allocation
// failures and errors, and the mbuf pool.
//
//   "dataplane": {"rx_packets": ..., "tx_packets": ..., "dropped_tx_buffer_full": ...,
//     "dropped_shaper_full": ..., "dropped_at_shutdown": ..., "flows_expired": ...,
//     "mbufs_total": ..., "mbufs_in_use": ..., "mbufs_kept_by_drivers": ..., "mbufs_leaked": ...,
//     "ports": [{"port": 0, "name": ..., "driver": ..., "rx_nombuf": ..., "rx_errors": ...,
//                "tx_errors": ...}],
//     "workers": [{"lcore": 1, "rx_packets": ..., ... the six worker counters}]}
#pragma once

#include <string>
#include <vector>

#include "counters.hpp"
#include "dataplane.hpp"

namespace sluice {

// The "dataplane" object (no trailing newline).
std::string dataplane_report_json(const DataplaneReport& report);

// REPORT.json of live mode: the counters of SPEC §5 plus "dataplane".
std::string live_report_json(const CountersSnapshot& snapshot, const DataplaneReport& report);

// The totals of the "dataplane" object (worker counters, then the pool's mbufs_total and
// mbufs_in_use as gauges), for the readers of a running dataplane (CountersSnapshot::dataplane).
std::vector<NamedCounter> dataplane_counters(const WorkerStats& totals, const MbufAccount& mbufs);

// The "dataplane: ..." line, and a "port N errors: ..." line per port with any, each ending
// in a newline.
std::string dataplane_report_table(const DataplaneReport& report);

}  // namespace sluice
