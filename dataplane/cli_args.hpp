// Command line of `sluiced` (SPEC §1). Two shapes:
//   sluiced [EAL args] -- --config RULES.yaml [--report FILE] [--stats-interval S] [--flows N]
//           [--mbufs N] [--max-delay DURATION] [--control SOCK] [--metrics HOST:PORT]
//   sluiced --replay IN.pcap --out OUT.pcap --report REPORT.json --config RULES.yaml
//           [--hash-seed N] [--stats]
// Parsing only (CLI11): no file is opened here. Options take "--name value" or "--name=value".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replay/replay.hpp"
#include "result.hpp"

namespace sluice {

enum class RunMode { help, replay, live };

struct CliArgs {
  RunMode mode = RunMode::live;
  ReplayOptions replay;  // mode == replay
  bool print_stats = false;  // replay: counters table on stdout at the end

  // mode == live
  std::vector<std::string> eal_args;  // everything before "--", program name first
  std::string config_path;
  std::string control_socket;
  std::string metrics_addr;
  std::string report_path;         // counters JSON written at shutdown ("" = none)
  uint64_t stats_interval_ms = 0;  // counters table on stdout this often (0 = never)
  uint64_t flows = 0;              // flow slots per keyed rule without max-flows (0 = default)
  uint64_t mbufs = 0;              // mbufs in the packet pool (0 = sized from the rings)
  uint32_t mbuf_size = 0;          // data room of each mbuf, bytes (0 = DPDK's default)
  uint16_t burst = 0;              // packets per RX burst, 1..kMaxCliBurst (0 = default 32)
  uint64_t max_delay_ns = 0;       // shaping horizon (0 = from the start-up rules, >= 100 ms)
};

// --max-delay's range. The wheels keep 1 us slots up to ~4 s, then coarser ones
// (live/dataplane.cpp): at 60 s a slot is ~15 us.
constexpr uint64_t kMinMaxDelayNs = 1'000'000;
constexpr uint64_t kMaxMaxDelayNs = 60'000'000'000;

// The largest --burst: the pipeline decides at most this many packets at one clock reading.
constexpr uint16_t kMaxCliBurst = 64;

// The most mbufs --mbufs takes: a ring-backed mempool of n mbufs needs a ring of 2^k > n
// slots, and rte_ring's largest is 2^30 (about 2.4 TB of mbufs at the default data room).
constexpr uint64_t kMaxMbufs = (uint64_t{1} << 30) - 1;

// --mbuf-size: the data room of one mbuf (headroom included), as rte_pktmbuf_pool_create takes
// it. The least holds DPDK's headroom and one minimum frame (longer frames arrive as chains,
// which the worker classifies whole); the most is what the pool's 16-bit field holds.
constexpr uint32_t kMinMbufSize = 128 + 64;
constexpr uint32_t kMaxMbufSize = 65535;
constexpr uint32_t kDefaultMbufSize = 2176;  // RTE_MBUF_DEFAULT_BUF_SIZE (checked where DPDK is)

// Errors are usage errors (exit 2); the message says which option was wrong.
Result<CliArgs> parse_cli_args(int argc, const char* const* argv);

// --help: CLI11's help made from the same option table the parsers use (one row per option).
std::string usage_text(const std::string& program);

}  // namespace sluice
