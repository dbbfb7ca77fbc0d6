// Rule changes on a loaded XDP program (sluice_abi.h "Rule changes"), through
// BPF_PROG_TEST_RUN with the test clock: a rule whose state identity is unchanged keeps its
// buckets, flows and counters whatever moves around it; a new rate or burst carries the tokens
// held, capped at the new burst and never refilled; a new match starts full; the plan
// (plan_rule_swap) gives slots and generations as rules_diff.hpp says.
#include <set>

#include "frame_parser_fixtures.hpp"
#include "xdp_harness.hpp"
#include "xdp_rule_swap.hpp"
#include "xdp_rules.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using namespace xdp_test;

constexpr uint64_t kT0 = 7'000'000'000;

std::string tb_rule(const std::string& name, const std::string& match, const std::string& key,
                    const std::string& rate, const std::string& burst) {
  return "  - {name: " + name + ", match: {" + match + "}, key: " + key + ", rate: " + rate +
         ", burst: " + burst + ", algorithm: token-bucket, action: drop}\n";
}

class XdpRuleChange : public ::testing::Test {
 protected:
  void SetUp() override {
    prog_ = load_test_program();
    ASSERT_NE(prog_, nullptr);
  }
  void set(const std::string& rules_yaml) {
    Status s = prog_->set_rules(rules_from("rules:\n" + rules_yaml));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  // How many of n frames at `now` pass.
  int passed(const Bytes& f, int n, uint64_t now = kT0) {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += run_at(*prog_, f, now).verdict == XDP_PASS;
    return ok;
  }
  std::unique_ptr<xdp::XdpProgram> prog_;
  const Bytes udp_ = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1000, 53).build();
  const Bytes udp_b_ = PacketBuilder().ipv4("10.0.0.9", "10.0.0.2").udp(1000, 53).build();
  const Bytes tcp_ = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 80).build();
};

TEST_F(XdpRuleChange, AnUnchangedRuleKeepsItsBucketAndCountersWhenRulesMoveAroundIt) {
  const std::string a = tb_rule("a", "proto: udp", "none", "1pps", "10");
  set(a);
  EXPECT_EQ(passed(udp_, 7), 7);
  // A new rule ahead of it: "a" moves to index 1 and must still hold 3 tokens.
  set(tb_rule("web", "proto: tcp", "none", "1pps", "5") + a);
  EXPECT_EQ(passed(udp_, 5), 3);
  EXPECT_EQ(passed(tcp_, 6), 5);  // the new rule starts full
  const TrafficCounters t = counters_of(*prog_, 1);
  EXPECT_EQ(t.pkts(Outcome::matched), 12u);  // 7 before the change, 5 after
  EXPECT_EQ(t.pkts(Outcome::conformed), 10u);
  EXPECT_EQ(counters_of(*prog_, 0).pkts(Outcome::matched), 6u);
}

TEST_F(XdpRuleChange, PerFlowBucketsCarryOver) {
  set(tb_rule("per-src", "proto: udp", "src-ip", "1pps", "4"));
  EXPECT_EQ(passed(udp_, 3), 3);
  EXPECT_EQ(passed(udp_b_, 1), 1);
  set(tb_rule("first", "proto: tcp", "none", "1pps", "4") +
      tb_rule("per-src", "proto: udp", "src-ip", "1pps", "4"));
  EXPECT_EQ(passed(udp_, 4), 1);
  EXPECT_EQ(passed(udp_b_, 4), 3);
}

TEST_F(XdpRuleChange, ABurstCutCapsTheTokensHeld) {
  set(tb_rule("a", "proto: udp", "none", "1pps", "10"));
  EXPECT_EQ(passed(udp_, 4), 4);  // 6 left
  set(tb_rule("a", "proto: udp", "none", "1pps", "3"));
  EXPECT_EQ(passed(udp_, 5), 3);
}

TEST_F(XdpRuleChange, ABurstRaiseKeepsTheTokensHeldWithoutRefilling) {
  set(tb_rule("a", "proto: udp", "src-ip", "1pps", "10"));
  EXPECT_EQ(passed(udp_, 4), 4);  // 6 left
  set(tb_rule("a", "proto: udp", "src-ip", "1pps", "20"));
  EXPECT_EQ(passed(udp_, 10), 6);
  EXPECT_EQ(passed(udp_b_, 25), 20);  // a flow created after the change: the new burst
}

TEST_F(XdpRuleChange, ARateChangeRefillsAtTheNewRateFromTheChange) {
  set(tb_rule("a", "proto: udp", "none", "1pps", "10"));
  EXPECT_EQ(passed(udp_, 10), 10);  // empty at kT0
  set(tb_rule("a", "proto: udp", "none", "100pps", "10"));
  // 50 ms at 100 pps: 5 tokens (at 1 pps it would be none).
  EXPECT_EQ(passed(udp_, 8, kT0 + 50'000'000), 5);
}

TEST_F(XdpRuleChange, ANewMatchStartsFull) {
  set(tb_rule("a", "proto: udp", "none", "1pps", "5"));
  EXPECT_EQ(passed(udp_, 5), 5);
  set(tb_rule("a", "proto: udp, dst-port: 53", "none", "1pps", "5"));
  EXPECT_EQ(passed(udp_, 6), 5);
  EXPECT_EQ(counters_of(*prog_, 0).pkts(Outcome::matched), 6u);  // counters start over too
}

TEST_F(XdpRuleChange, MetersAndWindowsCarryOver) {
  set("  - {name: m, match: {proto: udp}, key: none, algorithm: srtcm, rate: 1pps, burst: 4, "
      "excess-burst: 2, actions: {green: pass, yellow: drop, red: drop}}\n"
      "  - {name: w, match: {proto: tcp}, key: none, algorithm: fixed-window, window: 10s, "
      "limit: 6, action: drop}\n");
  EXPECT_EQ(passed(udp_, 3), 3);  // 1 committed token left, excess full
  EXPECT_EQ(passed(tcp_, 4), 4);  // 2 left in the window
  set("  - {name: m, match: {proto: udp}, key: none, algorithm: srtcm, rate: 2pps, burst: 4, "
      "excess-burst: 2, actions: {green: pass, yellow: drop, red: drop}}\n"
      "  - {name: w, match: {proto: tcp}, key: none, algorithm: fixed-window, window: 10s, "
      "limit: 8, action: drop}\n");
  EXPECT_EQ(passed(udp_, 3), 1);  // the committed token left; yellow and red drop
  EXPECT_EQ(passed(tcp_, 6), 4);  // the 4 counted stay counted: 8 - 4
}

TEST_F(XdpRuleChange, ARefusedRuleSetChangesNothing) {
  set(tb_rule("a", "proto: udp", "none", "1pps", "10"));
  EXPECT_EQ(passed(udp_, 4), 4);
  Status s = prog_->set_rules(rules_from(
      "rules:\n  - {name: a, match: {proto: udp}, key: none, algorithm: leaky-bucket, "
      "rate: 1pps, burst: 1, max-delay: 10ms}\n"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(passed(udp_, 8), 6);
}

TEST(XdpRuleSwapPlan, SlotsAndGenerationsFollowTheStateIdentity) {
  auto compile = [](const RuleSet& rs) {
    auto c = xdp::compile_xdp_rules(rs);
    EXPECT_TRUE(c.ok());
    return c.ok() ? c->rules : std::vector<sl_xdp_rule>{};
  };
  const RuleSet v1 = rules_from("rules:\n" + tb_rule("a", "proto: udp", "none", "1pps", "5") +
                                tb_rule("b", "proto: tcp", "none", "1pps", "5") +
                                tb_rule("c", "proto: icmp", "none", "1pps", "5"));
  const auto p1 = xdp::plan_rule_swap({}, {}, v1.rules, compile(v1));
  ASSERT_EQ(p1.rules.size(), 3u);
  EXPECT_EQ(p1.fresh_slots.size(), 3u);
  const RuleSet v2 = rules_from("rules:\n" + tb_rule("new", "proto: sctp", "none", "1pps", "5") +
                                tb_rule("b", "proto: tcp", "none", "1pps", "7") +
                                tb_rule("a", "proto: udp", "none", "1pps", "5") +
                                tb_rule("c", "proto: icmp", "src-ip", "1pps", "5"));
  const auto p2 = xdp::plan_rule_swap(v1.rules, p1.rules, v2.rules, compile(v2));
  ASSERT_EQ(p2.rules.size(), 4u);
  EXPECT_EQ(p2.rules[2].state, p1.rules[0].state);  // a: kept, same numbers
  EXPECT_EQ(p2.rules[2].gen, p1.rules[0].gen);
  EXPECT_EQ(p2.rules[1].state, p1.rules[1].state);  // b: kept, new burst
  EXPECT_EQ(p2.rules[1].gen, p1.rules[1].gen + 1);
  EXPECT_EQ(p2.convert_slots, std::vector<uint16_t>{p1.rules[1].state});
  // new and c (new key) get slots nobody running uses; c's old slot is freed.
  std::set<uint16_t> old_slots;
  for (const auto& r : p1.rules) old_slots.insert(r.state);
  EXPECT_FALSE(old_slots.count(p2.rules[0].state));
  EXPECT_FALSE(old_slots.count(p2.rules[3].state));
  EXPECT_NE(p2.rules[0].state, p2.rules[3].state);
  EXPECT_EQ(p2.freed_slots, std::vector<uint16_t>{p1.rules[2].state});
}

}  // namespace
}  // namespace sluice
