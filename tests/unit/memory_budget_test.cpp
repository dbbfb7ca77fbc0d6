// The flow-table memory a rule set needs (memory_budget.hpp), worked out before allocating:
// checked against real FlowTables' sizes and against the example in the brief of `config check`.
#include "memory_budget.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "flow_table.hpp"
#include "rules_loader.hpp"

namespace sluice {
namespace {

TEST(MemoryBudget, MatchesRealFlowTables) {
  for (uint64_t capacity : {1ull, 3ull, 4ull, 5ull, 1000ull, 65536ull, 100001ull}) {
    for (unsigned words : {1u, 2u}) {
      FlowTable t = FlowTable::create(capacity, 0, 1'000'000, words).value();
      EXPECT_EQ(flow_table_bytes(capacity, words), t.memory_bytes() - sizeof(FlowTable))
          << capacity << " flows, " << words << " words";
    }
  }
}

TEST(MemoryBudget, BytesPerFlow) {
  // flow_table.hpp: 32 bytes a flow, 48 with a meter's two words; whole sets of 8 slots;
  // and a bit per set (16,384 sets for 65,536 flows: 2 KiB).
  EXPECT_EQ(flow_table_bytes(65536, 1), 65536u * 32 + 2048);
  EXPECT_EQ(flow_table_bytes(65536, 2), 65536u * 48 + 2048);
  EXPECT_EQ(flow_table_bytes(1, 1), 128u + 8);  // one set
  EXPECT_EQ(flow_table_bytes(kMaxFlowsPerRule, 2), (uint64_t{12} << 30) + (uint64_t{8} << 20));
  EXPECT_EQ(flow_table_bytes(UINT64_MAX, 2), UINT64_MAX);  // saturates, never wraps
}

RuleSet load(const std::string& text) {
  Result<RuleSet> r = load_rules_text(text, "rules.yaml");
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : RuleSet{};
}

TEST(MemoryBudget, ThreeKeyedRulesAtTheDefault) {
  RuleSet rs = load(
      "rules:\n"
      "  - {name: a, key: src-ip, rate: 10pps, burst: 5}\n"
      "  - {name: b, key: dst-ip, rate: 10pps, burst: 5}\n"
      "  - {name: c, key: 5-tuple, rate: 10pps, burst: 5}\n"
      "  - {name: d, key: none, rate: 10pps, burst: 5}\n");
  FlowMemory m = flow_table_memory(rs, 65536);
  EXPECT_EQ(m.flows, 196608u);
  EXPECT_EQ(m.bytes, (uint64_t{6} << 20) + 3 * 2048);  // sets, and a bit per set
  EXPECT_EQ(format_memory_size(m.bytes), "6.0 MiB");
}

TEST(MemoryBudget, MaxFlowsMetersAndTheDefault) {
  RuleSet rs = load(
      "rules:\n"
      "  - {name: a, key: src-ip, rate: 10pps, burst: 5, max-flows: 1000}\n"
      "  - {name: m, key: src-ip, algorithm: srtcm, rate: 10pps, burst: 5}\n"
      "  - {name: w, key: src-ip, algorithm: fixed-window, window: 1s, limit: 5}\n");
  FlowMemory m = flow_table_memory(rs, 4096);
  EXPECT_EQ(m.flows, 1000u + 4096 + 4096);
  // Sets (250, 1,024, 1,024), and a bit per set rounded up to words (32, 128, 128 bytes).
  EXPECT_EQ(m.bytes, 1000u * 32 + 4096 * 48 + 4096 * 32 + 32 + 128 + 128);
  EXPECT_EQ(flow_table_memory(RuleSet{}, 4096).bytes, 0u);
}

TEST(MemoryBudget, AFileAtEveryLimitFitsInSixtyFourBits) {
  RuleSet rs;
  Rule r;
  r.key = KeyMode::src_ip;
  r.algorithm = Algorithm::srtcm;
  r.max_flows = kMaxFlowsPerRule;
  rs.rules.assign(kMaxRules, r);
  FlowMemory m = flow_table_memory(rs, 65536);
  EXPECT_EQ(m.flows, uint64_t{kMaxRules} * kMaxFlowsPerRule);
  EXPECT_EQ(m.bytes, uint64_t{kMaxRules} * ((uint64_t{12} << 30) + (uint64_t{8} << 20)));
}

TEST(MemoryBudget, RefusesMoreThanIsAvailableWithBothFigures) {
  RuleSet rs = load("rules:\n  - {name: a, key: src-ip, rate: 10pps, burst: 5}\n");
  const uint64_t need = (uint64_t{2} << 20) + 2048;  // 16,384 sets and a bit each
  EXPECT_TRUE(check_flow_memory(rs, 65536, need, "--flows").ok());
  Status s = check_flow_memory(rs, 65536, need - 1, "--flows");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "flow tables need 2.0 MiB (2099200 bytes) for 65536 flows, more than the 2.0 MiB "
            "(2099199 bytes) of memory available; lower max-flows or --flows");
}

// Replay and the XDP backend have no option for the default capacity: the advice names only
// what their operator can change.
TEST(MemoryBudget, RefusalNamesOnlyTheKnobsTheProgramHas) {
  RuleSet rs = load("rules:\n  - {name: a, key: src-ip, rate: 10pps, burst: 5}\n");
  Status s = check_flow_memory(rs, 65536, 4096, "");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.error().message.ends_with("of memory available; lower max-flows"))
      << s.error().message;
  EXPECT_EQ(s.error().message.find("--flows"), std::string::npos) << s.error().message;
}

TEST(MemoryBudget, ReadsMemAvailable) {
  const char* meminfo =
      "MemTotal:       24576000 kB\nMemFree:         1000000 kB\n"
      "MemAvailable:   20000000 kB\nBuffers:          100 kB\n";
  EXPECT_EQ(parse_mem_available(meminfo), uint64_t{20000000} * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 5 kB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: lots\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: 5 MB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available(""), std::nullopt);
}

// A cgroup directory tree of the test's own: DIR/memory/... (v1) or DIR/... (v2).
class CgroupTree {
 public:
  CgroupTree() {
    char tmpl[] = "/tmp/sluice-cgroup-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~CgroupTree() { std::filesystem::remove_all(root_); }
  void put(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + rel).parent_path());
    std::ofstream(root_ + rel) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(MemoryBudget, CgroupV2HeadroomIsTheLeastOverTheCgroupAndItsAncestors) {
  CgroupTree t;
  t.put("/box/memory.max", "1073741824\n");  // 1 GiB, 700 MiB used: 324 MiB left
  t.put("/box/memory.current", "734003200\n");
  t.put("/box/app/memory.max", "max\n");  // no limit of its own
  t.put("/box/app/memory.current", "734003200\n");
  EXPECT_EQ(cgroup_memory_headroom("0::/box/app\n", t.root()), uint64_t{324} << 20);
  t.put("/box/app/memory.max", "838860800\n");  // 800 MiB: 100 MiB left, the least
  EXPECT_EQ(cgroup_memory_headroom("0::/box/app\n", t.root()), uint64_t{100} << 20);
  t.put("/box/app/memory.current", "900000000\n");  // over its limit: nothing left
  EXPECT_EQ(cgroup_memory_headroom("0::/box/app\n", t.root()), 0u);
  EXPECT_EQ(cgroup_memory_headroom("0::/elsewhere\n", t.root()), std::nullopt);
  EXPECT_EQ(cgroup_memory_headroom("", t.root()), std::nullopt);
  EXPECT_EQ(cgroup_memory_headroom("garbage", t.root()), std::nullopt);
}

TEST(MemoryBudget, CgroupV1MemoryControllerComesBeforeTheUnifiedLine) {
  CgroupTree t;
  t.put("/memory/box/memory.limit_in_bytes", "1610612736\n");  // 1.5 GiB, 1 GiB used
  t.put("/memory/box/memory.usage_in_bytes", "1073741824\n");
  t.put("/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
  t.put("/memory/memory.usage_in_bytes", "5000000000\n");
  t.put("/box/memory.max", "1024\n");  // a v2 file the v1 controller line overrides
  t.put("/box/memory.current", "0\n");
  const char* self = "12:pids:/box\n5:cpuset,memory:/box\n0::/box\n";
  EXPECT_EQ(cgroup_memory_headroom(self, t.root()), uint64_t{512} << 20);
  EXPECT_EQ(cgroup_memory_headroom("0::/box\n", t.root()), 1024u);
}

TEST(MemoryBudget, MemoryAvailableNowIsAtMostMemAvailable) {
  std::ifstream f("/proc/meminfo");
  std::stringstream text;
  text << f.rdbuf();
  const auto meminfo = parse_mem_available(text.str());
  if (!meminfo) GTEST_SKIP() << "no MemAvailable in /proc/meminfo here";
  const auto now = memory_available_now();
  ASSERT_TRUE(now.has_value());
  // Read at two moments: allow for the machine's memory moving by 1 GiB meanwhile.
  EXPECT_LE(*now, *meminfo + (uint64_t{1} << 30));
}

TEST(MemoryBudget, FormatsSizes) {
  EXPECT_EQ(format_memory_size(512), "512 B");
  EXPECT_EQ(format_memory_size(1536), "1.5 KiB");
  EXPECT_EQ(format_memory_size(uint64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(format_memory_size(uint64_t{768} << 40), "768.0 TiB");
}

}  // namespace
}  // namespace sluice
