// `sluiced [EAL args] -- --config RULES.yaml ...`: the live dataplane from start to stop.
// Loads the rules, starts EAL, ports and workers, runs until SIGINT/SIGTERM, then stops in
// order, prints the final counters (table on stdout) and writes REPORT.json if asked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "result.hpp"

namespace sluice {

struct LiveOptions {
  std::vector<std::string> eal_args;  // program name first, everything before "--"
  std::string config_path;            // rules file (SPEC §2)
  std::string report_path;            // counters JSON at shutdown ("" = none)
  std::string control_socket;         // control socket path ("" = none)
  std::string metrics_addr;           // HOST:PORT for Prometheus metrics ("" = none)
  uint64_t stats_interval_ms = 0;     // counters table on stdout this often (0 = never)
  uint64_t flows = 0;                 // flow slots of a keyed rule without max-flows (0 = core default)
  uint64_t hash_seed = 0;             // flow-table hash seed (0 = random per start)
  uint64_t mbufs = 0;                 // mbuf pool size (0 = sized from the rings)
  uint32_t mbuf_size = 0;             // data room per mbuf (0 = RTE_MBUF_DEFAULT_BUF_SIZE)
  uint16_t burst = 0;                 // packets per RX burst (0 = DataplaneConfig default)
  uint64_t max_delay_ns = 0;          // shaping horizon (0 = the start-up rules', >= 100 ms)
};

// On error, the error's kind says which exit code it deserves (result.hpp). Returns once
// stopped by a signal.
Status run_live(const LiveOptions& opts);

}  // namespace sluice
