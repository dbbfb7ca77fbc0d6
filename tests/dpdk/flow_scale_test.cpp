// `--flows N` at scale, without EAL: a 10M-flow table is allocated, and its pages written, when
// the pipeline is created (not on the first packets), and the idle-expiry slice a worker runs
// between bursts (DataplaneConfig::expire_budget slots) stays far below 10 us even when every
// slot it visits holds an idle flow to free.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "flow_table.hpp"
#include "live/dataplane.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"
#include "sanitizers.hpp"

namespace sluice {
namespace {

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

std::unique_ptr<Pipeline> keyed_pipeline(uint64_t flows, const char* idle = "60s") {
  auto rules = load_rules_text(std::string(R"(
default: {action: pass}
rules:
  - {name: per-source, key: src-ip, rate: 1000pps, burst: 10, action: drop, idle-timeout: )") +
                                   idle + "}\n",
                               "scale.yaml");
  if (!rules) throw std::runtime_error(rules.error().message);
  PipelineOptions opts;
  opts.default_max_flows = flows;
  opts.hash_seed = 7;
  auto p = Pipeline::create(std::move(rules).value(), opts);
  if (!p) throw std::runtime_error(p.error().message);
  return std::move(p).value();
}

TEST(FlowScale, TenMillionFlowTableIsWrittenAtCreation) {
  constexpr uint64_t kFlows = 10'000'000;
  const size_t before = resident_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  auto pipeline = keyed_pipeline(kFlows);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const size_t grown = resident_bytes() - before;
  std::printf("10M flows: created in %.0f ms, resident +%zu MiB (32 B/flow = %llu MiB)\n", ms,
              grown >> 20, static_cast<unsigned long long>((kFlows * 32) >> 20));
  // Resident, not just reserved: the value-initialisation wrote every page at start.
  EXPECT_GE(grown, kFlows * 32 * 95 / 100);
#ifdef SLUICE_ASAN
  // Under ASan the table's shadow (a byte per 8) may become resident as the table is written:
  // on session 21's host +345 MiB, at 5d6d152 as after it.
  constexpr uint64_t kShadow = kFlows * 32 / 8;
#else
  constexpr uint64_t kShadow = 0;
#endif
  EXPECT_LE(grown, kFlows * 32 * 110 / 100 + kShadow);
}

TEST(FlowScale, ExpirySliceBetweenBurstsStaysUnderTenMicroseconds) {
  // A table full of flows that are all idle: the worst case for a slice (every slot freed).
  constexpr uint64_t kFlows = 1'000'000;
  auto pipeline = keyed_pipeline(kFlows, "1s");
  auto counters = pipeline->make_counters();
  // Ethernet + IPv4 (no options) + UDP, 42 bytes; the source address is patched per flow.
  std::vector<uint8_t> frame(42, 0);
  frame[12] = 0x08;                      // ethertype IPv4
  frame[14] = 0x45;                      // version 4, IHL 5
  frame[17] = 28;                        // total length: 20 + 8
  frame[22] = 64;                        // TTL
  frame[23] = 17;                        // UDP
  frame[30] = 192, frame[33] = 1;        // destination 192.0.0.1
  frame[35] = 1, frame[37] = 2;          // ports 1 -> 2
  frame[39] = 8;                         // UDP length
  const uint64_t t0 = 1'000'000'000;
  for (uint32_t i = 0; i < kFlows; ++i) {
    const uint32_t src = 0x0a000000u + i;  // 10.0.0.0 + i
    frame[26] = uint8_t(src >> 24);
    frame[27] = uint8_t(src >> 16);
    frame[28] = uint8_t(src >> 8);
    frame[29] = uint8_t(src);
    pipeline->process(frame.data(), uint32_t(frame.size()), 0, t0, counters);
  }
  const auto& snap = pipeline->snapshot({&counters});
  // Two choices among 8-way sets at half load: every flow finds room (no LRU victim is idle
  // enough to evict, so a refused flow would show here).
  ASSERT_GE(snap.rules[0].active_flows, kFlows - kFlows / 100000);

  const size_t budget = DataplaneConfig{}.expire_budget;
  const uint64_t later = t0 + 10'000'000'000ull;  // everything idle for 10 s
  std::vector<double> us;
  size_t freed = 0;
  const size_t slots = kFlows * FlowTable::kSlack;  // one pass over every slot
  for (size_t call = 0; call < slots / budget + 1 && freed < snap.rules[0].active_flows; ++call) {
    const auto a = std::chrono::steady_clock::now();
    freed += pipeline->expire_idle(later, budget);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(us.begin(), us.end());
  const double p50 = us[us.size() / 2], p99 = us[us.size() * 99 / 100], p999 = us[us.size() * 999 / 1000];
  std::printf("expire_idle(budget %zu): %zu calls freed %zu flows; p50 %.2f us, p99 %.2f us, "
              "p99.9 %.2f us, max %.2f us\n",
              budget, us.size(), freed, p50, p99, p999, us.back());
  EXPECT_EQ(freed, snap.rules[0].active_flows);
  // The max includes preemption by other processes on a shared machine; the percentiles are
  // the cost of the work itself. Not under ASan, whose shadow checks make every slot several
  // times dearer: its p99 read 12.4 us in a clean-clone CI of session 28 beside two fuzzers.
#ifndef SLUICE_ASAN
  EXPECT_LT(p99, 10.0);
#endif
}

}  // namespace
}  // namespace sluice
