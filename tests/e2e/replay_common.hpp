// Helpers shared by the replay end-to-end suites (rules snippets, traces, runners).
#pragma once

#include <gtest/gtest.h>
#include <pcap/pcap.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "exact_models.hpp"
#include "mini_json.hpp"
#include "replay_harness.hpp"
#include "trace_helpers.hpp"

namespace sluice::testing {


// "exactly the model, within the one packet SPEC §3 allows"
#define EXPECT_WITHIN_ONE(actual, expected)                                        \
  EXPECT_LE(std::max<uint64_t>(actual, expected) - std::min<uint64_t>(actual, expected), 1u) \
      << #actual " = " << (actual) << ", model says " << (expected)

inline std::string policer_rules(const std::string& algorithm, const std::string& rate,
                          const std::string& burst, const std::string& action) {
  return "default: {action: pass}\n"
         "rules:\n"
         "  - name: limit\n"
         "    match: {proto: udp, dst-port: 53}\n"
         "    key: none\n"
         "    rate: " + rate + "\n"
         "    burst: " + burst + "\n"
         "    algorithm: " + algorithm + "\n"
         "    action: " + action + "\n";
}

// Irregular arrivals: bursts, short and long gaps; sizes fixed or 64..1500.
inline std::vector<Frame> irregular_trace(size_t n, uint64_t seed, bool mixed_sizes, uint64_t gap_scale = 1) {
  static const uint64_t kGaps[] = {0, 10 * kNsPerUs, 200 * kNsPerUs, kNsPerMs, 3 * kNsPerMs,
                                   10 * kNsPerMs, 50 * kNsPerMs};
  TestRng rng(seed);
  std::vector<Frame> trace;
  uint64_t t = kT0;
  for (size_t i = 0; i < n; ++i) {
    t += kGaps[rng.below(7)] / gap_scale;
    size_t size = mixed_sizes ? 64 + rng.below(1437) : 100;
    trace.push_back(Frame{t, udp4(uint32_t(i), {.size = size})});
  }
  return trace;
}

inline uint64_t cost_of(const Frame& f, bool bytes) { return bytes ? f.bytes.size() : 1; }

inline std::vector<uint32_t> seqs(const std::vector<Frame>& frames) {
  std::vector<uint32_t> s;
  for (const Frame& f : frames) s.push_back(seq_of(f.bytes));
  return s;
}

inline uint64_t total_bytes(const std::vector<Frame>& frames) {
  uint64_t n = 0;
  for (const Frame& f : frames) n += f.bytes.size();
  return n;
}

inline ProcessResult run_ok(Replay& r, std::vector<std::string> extra = {"--hash-seed", "12345"}) {
  ProcessResult p = r.run(std::move(extra));
  EXPECT_EQ(p.exit_code, 0) << p.err;
  return p;
}

}  // namespace sluice::testing
