// `sluiced --replay`: runs a capture file through the same pipeline as the live dataplane,
// with each packet's capture timestamp as the clock (SPEC §1). Writes the packets that left
// to OUT.pcap (in departure order; shaped packets carry their departure time) and the
// counters of SPEC §5 to REPORT.json. Both outputs appear only if the whole run succeeded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "counters.hpp"
#include "result.hpp"

namespace sluice {

struct ReplayOptions {
  std::string in_path;      // capture to replay (pcap or pcapng, Ethernet)
  std::string out_path;     // packets that left, nanosecond pcap
  std::string report_path;  // counters, JSON
  std::string config_path;  // rules file (SPEC §2)
  uint64_t hash_seed = 0;   // flow-table hash seed; 0: random per run
  size_t expire_budget = 8; // flow slots checked for idleness per packet
};

struct ReplaySummary {
  uint64_t packets_in = 0;
  uint64_t packets_out = 0;
  uint64_t packets_dropped = 0;
  uint64_t packets_delayed = 0;  // left later than they arrived (shaped)
  CountersSnapshot counters;
};

// On error no output file has been created. The error's kind (result.hpp) is invalid_input
// for a rules file or capture missing or malformed, or outputs that would overwrite an input,
// runtime for outputs that could not be written.
Result<ReplaySummary> run_replay(const ReplayOptions& opts);

}  // namespace sluice
