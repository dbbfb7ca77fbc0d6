// Per-rule flow tables on the XDP backend (sluice_abi.h "Flow tables"), against the core
// Pipeline as `sluiced --replay` runs it: each keyed rule holds at most its max-flows flows,
// a flood of new keys under one rule evicts only that rule's flows, flows_evicted counts what
// the core counts, a rule set switch keeps the tables (and tokens) of kept rules, and (the
// program's table being the core's FlowTable) every packet of a flood is decided as the core
// decides it: evicted where the core evicts (a victim idle >= 1 ms, seen once or idle 1 s),
// refused with the overflow action where the core refuses.
#include <algorithm>
#include <random>

#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "xdp_flow_tables.hpp"
#include "xdp_flows_top.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using namespace xdp_test;

constexpr uint64_t kT0 = 2'000'000'000;
constexpr uint64_t kMs = 1'000'000;
constexpr int kFloodSources = 40;
constexpr uint64_t kFloodMaxFlows = 4;

// flood: one new source after another; steady: three sources that spent their burst before
// the flood, so that a flow of theirs evicted meanwhile would show (it starts again full).
const char* kRules =
    "default: {action: pass}\n"
    "rules:\n"
    "  - {name: flood, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 1pps, burst: 1,"
    " algorithm: token-bucket, action: drop, max-flows: 4}\n"
    "  - {name: steady, match: {proto: udp, dst-port: 80}, key: src-ip, rate: 1pps, burst: 2,"
    " algorithm: gcra, action: drop, max-flows: 4}\n";

Bytes udp_from(const std::string& src, uint16_t dst_port) {
  return PacketBuilder().ipv4(src, "192.0.2.1").udp(4000, dst_port).payload(18).build();
}

std::string steady_source(int i) { return "10.1.0." + std::to_string(1 + i); }
std::string flood_source(int i) {
  return "10.2." + std::to_string(i / 200) + "." + std::to_string(1 + i % 200);
}

struct Packet {
  Bytes frame;
  uint64_t now_ns;
};

// steady's three sources, three packets each (two conform, one is dropped); then the flood;
// then steady's sources once more (still out of tokens: dropped, if their flows were kept).
std::vector<Packet> flood_trace() {
  std::vector<Packet> t;
  for (int s = 0; s < 3; ++s)
    for (int k = 0; k < 3; ++k) t.push_back({udp_from(steady_source(s), 80), kT0});
  for (int i = 0; i < kFloodSources; ++i)
    t.push_back({udp_from(flood_source(i), 53), kT0 + uint64_t(i + 1) * 5 * kMs});
  const uint64_t after = kT0 + uint64_t(kFloodSources + 2) * 5 * kMs;
  for (int s = 0; s < 3; ++s) t.push_back({udp_from(steady_source(s), 80), after});
  return t;
}

class XdpFlowTables : public ::testing::Test {
 protected:
  void SetUp() override { start(kRules); }

  void start(const char* yaml) {
    rules_ = rules_from(yaml);
    auto p = Pipeline::create(rules_, PipelineOptions::single_threaded(kHashSeed));
    ASSERT_TRUE(p.ok()) << p.error().message;
    core_ = std::move(*p);
    core_counters_ = core_->make_counters();
    prog_ = load_test_program(0);
    ASSERT_NE(prog_, nullptr);
    Status s = prog_->set_rules(rules_);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }

  // Both backends decide every packet the same; returns the XDP verdicts.
  std::vector<uint32_t> run_both(const std::vector<Packet>& trace) {
    std::vector<uint32_t> verdicts;
    for (const Packet& p : trace) {
      Bytes core_frame = p.frame;
      const Verdict v = core_->process(core_frame.data(), uint32_t(core_frame.size()), 0,
                                       p.now_ns, core_counters_);
      const uint32_t x = run_at(*prog_, p.frame, p.now_ns).verdict;
      EXPECT_EQ(x, v.kind == Verdict::Kind::drop ? uint32_t(XDP_DROP) : uint32_t(XDP_PASS))
          << "packet at " << p.now_ns;
      verdicts.push_back(x);
    }
    return verdicts;
  }

  // The XDP flow counts beside the core's, rule by rule (the same rules run on both).
  void expect_flows(const std::vector<uint64_t>& active, const std::vector<uint64_t>& evicted) {
    auto x = prog_->flow_counts();
    ASSERT_TRUE(x.ok()) << x.error().message;
    const CountersSnapshot core = core_->snapshot({&core_counters_});
    ASSERT_EQ(x->size(), active.size());
    ASSERT_EQ(core.rules.size(), active.size());
    for (size_t i = 0; i < active.size(); ++i) {
      SCOPED_TRACE(core.rules[i].name);
      EXPECT_EQ((*x)[i].active, active[i]);
      EXPECT_EQ((*x)[i].evicted, evicted[i]);
      EXPECT_EQ(core.rules[i].active_flows, active[i]) << "the core";
      EXPECT_EQ(core.rules[i].flows_evicted, evicted[i]) << "the core";
    }
  }

  RuleSet rules_;
  std::unique_ptr<Pipeline> core_;
  WorkerCounters core_counters_;
  std::unique_ptr<xdp::XdpProgram> prog_;
};

TEST_F(XdpFlowTables, AFloodEvictsOnlyItsOwnRulesFlowsAndCountsThem) {
  const std::vector<Packet> trace = flood_trace();
  const std::vector<uint32_t> v = run_both(trace);
  ASSERT_EQ(v.size(), 9u + kFloodSources + 3u);
  // Every flood source is new, so each conforms on a full bucket of its own.
  for (int i = 0; i < kFloodSources; ++i) EXPECT_EQ(v[9 + size_t(i)], uint32_t(XDP_PASS)) << i;
  // steady's flows outlived the flood: still out of tokens.
  for (size_t i = v.size() - 3; i < v.size(); ++i) EXPECT_EQ(v[i], uint32_t(XDP_DROP)) << i;
  expect_flows({kFloodMaxFlows, 3}, {kFloodSources - kFloodMaxFlows, 0});
}

TEST_F(XdpFlowTables, ARuleSetSwitchKeepsTheTablesAndTokensOfKeptRules) {
  run_both(flood_trace());
  // steady gets a new rate (its tokens carry over, capped at the new burst), flood is
  // unchanged, a new keyed rule comes first: the kept rules keep their tables.
  const RuleSet next = rules_from(
      "default: {action: pass}\n"
      "rules:\n"
      "  - {name: fresh, match: {proto: udp, dst-port: 443}, key: src-ip, rate: 1pps, burst: 1,"
      " algorithm: token-bucket, action: drop, max-flows: 2}\n"
      "  - {name: flood, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 1pps, burst: 1,"
      " algorithm: token-bucket, action: drop, max-flows: 4}\n"
      "  - {name: steady, match: {proto: udp, dst-port: 80}, key: src-ip, rate: 2pps, burst: 2,"
      " algorithm: gcra, action: drop, max-flows: 4}\n");
  const uint64_t at = kT0 + uint64_t(kFloodSources + 3) * 5 * kMs;
  ASSERT_TRUE(core_->apply(next, at).ok());
  ASSERT_TRUE(prog_->set_test_now(at).ok());
  Status s = prog_->set_rules(next);
  ASSERT_TRUE(s.ok()) << s.error().message;
  expect_flows({0, kFloodMaxFlows, 3}, {0, kFloodSources - kFloodMaxFlows, 0});

  std::vector<Packet> after;
  for (int s2 = 0; s2 < 3; ++s2) after.push_back({udp_from(steady_source(s2), 80), at + kMs});
  // the flood's last source is one of the four flows its table kept: out of tokens
  after.push_back({udp_from(flood_source(kFloodSources - 1), 53), at + kMs});
  for (int i = 0; i < 3; ++i) after.push_back({udp_from(flood_source(100 + i), 443), at + 5 * kMs * uint64_t(i + 1)});
  const std::vector<uint32_t> v = run_both(after);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(v[i], uint32_t(XDP_DROP)) << i;
  expect_flows({2, kFloodMaxFlows, 3}, {1, kFloodSources - kFloodMaxFlows, 0});

  // flood removed: its table goes; the others keep theirs.
  const RuleSet last = rules_from(
      "default: {action: pass}\n"
      "rules:\n"
      "  - {name: fresh, match: {proto: udp, dst-port: 443}, key: src-ip, rate: 1pps, burst: 1,"
      " algorithm: token-bucket, action: drop, max-flows: 2}\n"
      "  - {name: steady, match: {proto: udp, dst-port: 80}, key: src-ip, rate: 2pps, burst: 2,"
      " algorithm: gcra, action: drop, max-flows: 4}\n");
  ASSERT_TRUE(core_->apply(last, at + 10 * kMs).ok());
  ASSERT_TRUE(prog_->set_test_now(at + 10 * kMs).ok());
  s = prog_->set_rules(last);
  ASSERT_TRUE(s.ok()) << s.error().message;
  expect_flows({2, 3}, {1, 0});
}

// A flood at one instant: no flow is idle long enough to go, so past max-flows every new
// source gets the overflow action (here pass, where the rule's action is drop), as on the core.
TEST_F(XdpFlowTables, AFloodAtOneInstantGetsTheOverflowAction) {
  start("default: {action: drop}\n"
        "rules:\n"
        "  - {name: flood, match: {proto: udp}, key: src-ip, rate: 1pps, burst: 1,"
        " algorithm: token-bucket, action: drop, max-flows: 4, overflow: pass}\n");
  std::vector<Packet> t;
  for (int i = 0; i < kFloodSources; ++i) t.push_back({udp_from(flood_source(i), 53), kT0});
  // The first four again: their flows are held, out of tokens.
  for (int i = 0; i < 4; ++i) t.push_back({udp_from(flood_source(i), 53), kT0});
  const std::vector<uint32_t> v = run_both(t);
  for (int i = 0; i < kFloodSources; ++i) EXPECT_EQ(v[size_t(i)], uint32_t(XDP_PASS)) << i;
  for (size_t i = kFloodSources; i < v.size(); ++i) EXPECT_EQ(v[i], uint32_t(XDP_DROP)) << i;
  expect_flows({kFloodMaxFlows}, {0});
  const TrafficCounters c = counters_of(*prog_, 0);
  EXPECT_EQ(c.pkts(Outcome::exceeded), uint64_t(kFloodSources - 4 + 4));
}

// Sources coming and going at random gaps (some under the 1 ms a victim must be idle, some
// sending twice and so protected), over a table of 8: every verdict, and the held and evicted
// counts, as on the core.
TEST_F(XdpFlowTables, ARandomFloodIsDecidedAsOnTheCore) {
  start("default: {action: drop}\n"
        "rules:\n"
        "  - {name: flood, match: {proto: udp}, key: src-ip, rate: 100pps, burst: 2,"
        " algorithm: token-bucket, action: drop, max-flows: 8, overflow: mark-dscp:CS1}\n");
  std::mt19937 rng(7);
  std::vector<Packet> t;
  uint64_t now = kT0;
  for (int i = 0; i < 3000; ++i) {
    now += rng() % 1'500'000;
    t.push_back({udp_from(flood_source(int(rng() % 60)), 53), now});
  }
  run_both(t);
  const CountersSnapshot core = core_->snapshot({&core_counters_});
  ASSERT_EQ(core.rules.size(), 1u);
  EXPECT_GT(core.rules[0].flows_evicted, 50u);  // it evicts,
  EXPECT_GT(core_counters_.per_rule[0].pkts(Outcome::marked), 50u);  // and it refuses
  expect_flows({core.rules[0].active_flows}, {core.rules[0].flows_evicted});
  const TrafficCounters c = counters_of(*prog_, 0);
  for (size_t o = 0; o < kOutcomeCount; ++o)
    EXPECT_EQ(c.packets[o], core_counters_.per_rule[0].packets[o]) << outcome_name(Outcome(o));
}

// Rules whose match pins the keyed address to a prefix within max-flows get dense tables on
// both backends (dense_key.hpp, sluice_abi.h sl_flow_meta "dense"): key k (the address's
// offset, or its key prefix's) in slot k, so the program's table lists its flows in offset
// order, which a hashed table would not (64 keys in random order). Decisions, counters and
// flow counts as on the core, a token bucket per destination and a meter per source /28 alike,
// beside a hashed rule; a frame outside the prefix is not the rule's.
TEST_F(XdpFlowTables, ADenseTableHoldsEachKeyAtItsOffsetAndDecidesAsTheCore) {
  start("default: {action: pass}\n"
        "rules:\n"
        "  - {name: dst, match: {proto: udp, dst: 198.51.100.0/26}, key: dst-ip, rate: 1pps,"
        " burst: 2, algorithm: token-bucket, action: drop, max-flows: 64}\n"
        "  - {name: src28, match: {proto: udp, src: 10.8.0.0/22}, key: src-prefix/28,"
        " algorithm: srtcm, rate: 100B/s, burst: 100, excess-burst: 100,"
        " actions: {green: pass, yellow: mark-dscp:AF13, red: drop}, max-flows: 64}\n"
        "  - {name: hashed, match: {proto: udp}, key: src-ip, rate: 1pps, burst: 2,"
        " algorithm: token-bucket, action: drop, max-flows: 64}\n");
  std::mt19937 rng(11);
  std::vector<int> order(64);
  for (int i = 0; i < 64; ++i) order[size_t(i)] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Packet> t;
  uint64_t now = kT0;
  for (int round = 0; round < 3; ++round)
    for (int k : order) {
      now += rng() % 3'000'000;
      const std::string dst = "198.51.100." + std::to_string(k);
      t.push_back({PacketBuilder().ipv4("172.16.0.1", dst).udp(4000, 53).payload(18).build(), now});
      const std::string src = "10.8." + std::to_string(k / 16) + "." + std::to_string(k % 16 * 16 + 3);
      t.push_back({PacketBuilder().ipv4(src, "192.0.2.1").udp(4000, 53).payload(40).build(), now});
      // Outside both prefixes: the hashed rule's.
      t.push_back({udp_from("10.9.0." + std::to_string(k), 53), now});
    }
  run_both(t);
  expect_flows({64, 64, 64}, {0, 0, 0});
  for (size_t r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    const TrafficCounters c = counters_of(*prog_, r);
    for (size_t o = 0; o < kOutcomeCount; ++o)
      EXPECT_EQ(c.packets[o], core_counters_.per_rule[r].packets[o]) << outcome_name(Outcome(o));
    EXPECT_GT(c.pkts(Outcome::matched), c.pkts(Outcome::conformed)) << "some were refused";
  }

  auto sample = prog_->sample_flows();
  ASSERT_TRUE(sample.ok()) << sample.error().message;
  // The address bytes of key word 1 (source low, destination high), as loaded from the wire.
  const auto offsets_of = [&](size_t rule, bool src, unsigned shift) {
    std::vector<uint32_t> at;
    for (const xdp::FlowCount& f : sample->flows)
      if (f.state == prog_->entries()[rule].state) {
        const uint32_t loaded = uint32_t(src ? f.key.w[1] : f.key.w[1] >> 32);
        at.push_back((__builtin_bswap32(loaded) >> shift) & 63);
      }
    return at;
  };
  std::vector<uint32_t> all(64);
  for (uint32_t i = 0; i < 64; ++i) all[i] = i;
  EXPECT_EQ(offsets_of(0, false, 0), all) << "destination k in slot k";
  EXPECT_EQ(offsets_of(1, true, 4), all) << "source /28 k in slot k";
  std::vector<uint32_t> hashed = offsets_of(2, true, 0);
  EXPECT_EQ(hashed.size(), 64u);
  EXPECT_NE(hashed, all) << "a hashed table holds its flows out of order";
}

TEST(XdpFlowTablesSize, ATableTooLargeIsRefusedAndNothingChanges) {
  auto prog = load_test_program(0);
  ASSERT_NE(prog, nullptr);
  const RuleSet ok = rules_from(
      "rules:\n  - {name: a, match: {proto: udp}, key: src-ip, rate: 1pps, burst: 1,"
      " algorithm: token-bucket, action: drop, max-flows: 8}\n");
  ASSERT_TRUE(prog->set_rules(ok).ok());
  const RuleSet huge = rules_from(
      "rules:\n  - {name: b, match: {proto: tcp}, key: src-ip, rate: 1pps, burst: 1,"
      " algorithm: token-bucket, action: drop, max-flows: 200000000}\n");
  Status s = prog->set_rules(huge);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("rule \"b\""), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("flows"), std::string::npos) << s.error().message;
  ASSERT_EQ(prog->rules().rules.size(), 1u);
  EXPECT_EQ(prog->rules().rules[0].name, "a");
}

}  // namespace
}  // namespace sluice

