// Rules changed while traffic flows (SPEC §4, docs/SEMANTICS.md "Changing rules while traffic
// flows"): what a kept rule keeps across Pipeline::apply() (tokens, flows, counters), how a
// new rate or burst carries its tokens (capped, never refilled), what a removed or re-keyed
// rule loses, and a swap under concurrent workers that never shows a packet half a rule set.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "bucket_convert.hpp"
#include "flow_table.hpp"
#include "limiter_profile.hpp"
#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "pipeline_rules_target.hpp"
#include "rules_loader.hpp"
#include "rules_snapshot.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

constexpr uint64_t kSec = 1'000'000'000;

RuleSet rules_of(const std::string& yaml) {
  auto r = load_rules_text(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : RuleSet{};
}

std::vector<uint8_t> udp(const std::string& src, uint16_t dport = 53) {
  return PacketBuilder().ipv4(src, "192.0.2.1").udp(1234, dport).build();
}

struct Harness {
  std::unique_ptr<Pipeline> p;
  WorkerCounters c;
  explicit Harness(const std::string& yaml) {
    PipelineOptions o;
    o.hash_seed = 777;
    auto made = Pipeline::create(rules_of(yaml), o);
    EXPECT_TRUE(made.ok()) << (made.ok() ? "" : made.error().message);
    p = std::move(made).value();
    c = p->make_counters();
  }
  int passed(const std::vector<uint8_t>& f, uint64_t now, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) {
      std::vector<uint8_t> copy = f;
      ok += p->process(copy.data(), uint32_t(copy.size()), 0, now, c).kind == Verdict::Kind::forward;
    }
    return ok;
  }
  RulesDiff apply(const std::string& yaml, uint64_t now) {
    auto d = p->apply(rules_of(yaml), now);
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
    return d.ok() ? *d : RulesDiff{};
  }
  CountersSnapshot snap() { return p->snapshot({&c}); }
  RuleSnapshot rule(const std::string& name) {
    for (const RuleSnapshot& r : snap().rules)
      if (r.name == name) return r;
    ADD_FAILURE() << "no rule " << name;
    return {};
  }
};

// Two rules around a keyed one; `other_rate` and `extra` move things around it.
std::string keyed_set(const std::string& other_rate, bool extra) {
  std::string y = "rules:\n";
  if (extra) y += "  - {name: first, match: {dst-port: 9}, rate: 5pps, burst: 5}\n";
  y += "  - {name: per-src, match: {dst-port: 53}, key: src-ip, rate: 0.001pps, burst: 5}\n";
  y += "  - {name: other, match: {dst-port: 80}, rate: " + other_rate + ", burst: 3}\n";
  return y;
}

TEST(RulesSwap, UnchangedRuleKeepsTokensFlowsAndCountersAcross1000Swaps) {
  Harness h(keyed_set("10pps", false));
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 3), 3);  // 2 of 5 tokens left
  EXPECT_EQ(h.passed(udp("10.0.0.2"), kSec, 5), 5);  // none left
  for (int i = 0; i < 1000; ++i) {
    const RulesDiff d = h.apply(keyed_set(i % 2 ? "10pps" : "20pps", i % 3 == 0), kSec + uint64_t(i));
    ASSERT_EQ(d.count(RuleChangeKind::removed), (i % 3 == 1) ? 1u : 0u) << i;
  }
  EXPECT_EQ(h.p->generation(), 1000u);
  EXPECT_EQ(h.rule("per-src").active_flows, 2u) << "flows kept";
  // Tokens kept: 2 more for the first source, none for the second (rate 0.001 pps).
  EXPECT_EQ(h.passed(udp("10.0.0.1"), 2 * kSec, 3), 2);
  EXPECT_EQ(h.passed(udp("10.0.0.2"), 2 * kSec, 1), 0);
  const RuleSnapshot r = h.rule("per-src");
  EXPECT_EQ(r.traffic.pkts(Outcome::matched), 12u) << "counters kept";
  EXPECT_EQ(r.traffic.pkts(Outcome::passed), 10u);
  EXPECT_EQ(r.traffic.pkts(Outcome::dropped), 2u);
}

TEST(RulesSwap, NewRateAndBurstCarryTheTokensCappedNeverRefilled) {
  auto set = [](const char* rate, int burst) {
    return "rules:\n  - {name: agg, match: {proto: udp}, rate: " + std::string(rate) +
           ", burst: " + std::to_string(burst) + "}\n";
  };
  Harness h(set("0.001pps", 10));
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 8), 8);  // 2 left
  const RulesDiff d = h.apply(set("0.002pps", 20), kSec);
  ASSERT_EQ(d.rules.size(), 1u);
  EXPECT_TRUE(d.rules[0].keeps_state);
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 5), 2) << "a larger burst does not refill";

  Harness full(set("0.001pps", 10));                  // full: 10 tokens
  full.apply(set("0.001pps", 3), kSec);
  EXPECT_EQ(full.passed(udp("10.0.0.1"), kSec, 5), 3) << "capped at the new burst";

  // The new rate applies from the change on: 1000 pps, 2 tokens left, 10 ms later 12.
  Harness fast(set("1pps", 100));
  EXPECT_EQ(fast.passed(udp("10.0.0.1"), kSec, 98), 98);
  fast.apply(set("1000pps", 100), kSec);
  EXPECT_EQ(fast.passed(udp("10.0.0.1"), kSec + 10'000'000, 20), 12);
}

TEST(RulesSwap, DeletedAndReAddedRuleStartsFreshAndReportsItsLastCounters) {
  const std::string with = "rules:\n  - {name: r, match: {proto: udp}, rate: 0.001pps, burst: 4}\n";
  const std::string without = "default: {action: drop}\nrules: []\n";
  Harness h(with);
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 6), 4);
  h.apply(without, kSec);
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 2), 0) << "default drops";
  CountersSnapshot s = h.snap();
  EXPECT_TRUE(s.rules.empty());
  ASSERT_EQ(s.removed.size(), 1u);
  EXPECT_EQ(s.removed[0].name, "r");
  EXPECT_EQ(s.removed[0].traffic.pkts(Outcome::matched), 6u);
  EXPECT_EQ(s.removed[0].traffic.pkts(Outcome::dropped), 2u);
  h.apply(with, kSec);
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 6), 4) << "a full bucket again";
  EXPECT_EQ(h.rule("r").traffic.pkts(Outcome::matched), 6u) << "its counters start at zero";
  EXPECT_EQ(h.snap().default_rule.traffic.pkts(Outcome::dropped), 2u);
}

TEST(RulesSwap, ChangedMatchOrKeyStartsNewBuckets) {
  Harness h("rules:\n  - {name: r, match: {proto: udp}, rate: 0.001pps, burst: 2}\n");
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 3), 2);
  const RulesDiff d = h.apply("rules:\n  - {name: r, match: {dst-port: 53}, rate: 0.001pps, burst: 2}\n", kSec);
  ASSERT_EQ(d.rules.size(), 1u);
  EXPECT_FALSE(d.rules[0].keeps_state);
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 3), 2);
  EXPECT_EQ(h.rule("r").traffic.pkts(Outcome::matched), 3u) << "new state, new counters";
  ASSERT_EQ(h.snap().removed.size(), 1u) << "the old state's counters reported once more";
  EXPECT_EQ(h.snap().removed[0].traffic.pkts(Outcome::matched), 3u);
}

// A snapshot reuses the previous classifier only when every match is the same in the same
// order: a rate change keeps classifying alike, reordered or changed matches are recompiled.
TEST(RulesSwap, ClassificationFollowsMatchesWhateverElseChanges) {
  auto set = [](const std::string& first, const std::string& second, const std::string& rate) {
    return "rules:\n  - {name: " + first + ", match: {dst-port: " + (first == "a" ? "53" : "80") +
           "}, rate: " + rate + ", burst: 100}\n  - {name: " + second + ", match: {dst-port: " +
           (second == "a" ? "53" : "80") + "}, rate: " + rate + ", burst: 100}\n";
  };
  Harness h(set("a", "b", "1000pps"));
  h.passed(udp("10.0.0.1", 53), kSec, 1);
  h.apply(set("a", "b", "2000pps"), kSec);  // same matches: classifier reused
  h.passed(udp("10.0.0.1", 53), kSec, 1);
  h.apply(set("b", "a", "2000pps"), kSec);  // same rules, swapped: port 53 is rule 1 now
  h.passed(udp("10.0.0.1", 53), kSec, 1);
  h.passed(udp("10.0.0.1", 80), kSec, 1);
  EXPECT_EQ(h.rule("a").traffic.pkts(Outcome::matched), 3u);
  EXPECT_EQ(h.rule("b").traffic.pkts(Outcome::matched), 1u);
  h.apply("rules:\n  - {name: a, match: {dst-port: 80}, rate: 2000pps, burst: 100}\n"
          "  - {name: b, match: {dst-port: 53}, rate: 2000pps, burst: 100}\n", kSec);
  h.passed(udp("10.0.0.1", 53), kSec, 1);  // same count and names, matches changed
  EXPECT_EQ(h.rule("b").traffic.pkts(Outcome::matched), 1u) << "b has new state: counts anew";
  EXPECT_EQ(h.rule("a").traffic.pkts(Outcome::matched), 0u);
}

TEST(RulesSwap, CountersFollowTheRuleWhenOthersMoveAroundIt) {
  Harness h(keyed_set("10pps", false));
  h.passed(udp("10.0.0.1", 80), kSec, 2);
  h.apply(keyed_set("10pps", true), kSec);  // "first" inserted before both
  h.passed(udp("10.0.0.1", 80), kSec, 2);
  h.passed(udp("10.0.0.1", 9), kSec, 1);
  EXPECT_EQ(h.rule("other").traffic.pkts(Outcome::matched), 4u);
  EXPECT_EQ(h.rule("other").traffic.pkts(Outcome::passed), 3u);
  EXPECT_EQ(h.rule("first").traffic.pkts(Outcome::matched), 1u);
}

// sluiced --max-delay: the horizon from the options, above the start-up rules' (none shape
// here), so a longer shaping rule can come later; beyond it, refused with the option's name.
TEST(RulesSwap, TheHorizonFromTheOptionsTakesALongerShapingRuleLive) {
  PipelineOptions o;
  o.shaping_horizon_ns = 3 * kSec;
  auto made = Pipeline::create(
      rules_of("rules:\n  - {name: r, match: {proto: udp}, rate: 10pps, burst: 2}\n"), o);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Pipeline& p = **made;
  EXPECT_EQ(p.shaping_horizon_ns(), 3 * kSec);
  auto ok = p.apply(rules_of("rules:\n  - {name: s, match: {proto: udp}, rate: 10pps, "
                             "burst: 2, algorithm: leaky-bucket, max-delay: 2s}\n"),
                    kSec);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
  auto refused = p.apply(rules_of("rules:\n  - {name: s, match: {proto: udp}, rate: 10pps, "
                                  "burst: 2, algorithm: leaky-bucket, max-delay: 4s}\n"),
                         kSec);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("max-delay 4s is beyond the shaping horizon of 3s"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("--max-delay raises it"), std::string::npos);
  EXPECT_EQ(p.generation(), 1u);
  // A start-up rule beyond the horizon the options give is refused at creation.
  o.shaping_horizon_ns = kSec;
  auto too_long = Pipeline::create(
      rules_of("rules:\n  - {name: s, match: {proto: udp}, rate: 10pps, burst: 2, "
               "algorithm: leaky-bucket, max-delay: 2s}\n"),
      o);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("max-delay 2s is beyond the shaping horizon of 1s"),
            std::string::npos)
      << too_long.error().message;
}

TEST(RulesSwap, AShapingRuleBeyondTheHorizonIsRefusedAndChangesNothing) {
  Harness h("rules:\n  - {name: r, match: {proto: udp}, rate: 0.001pps, burst: 2}\n");
  EXPECT_EQ(h.p->shaping_horizon_ns(), Pipeline::kDefaultShapingHorizonNs);
  auto refused = h.p->apply(rules_of("rules:\n  - {name: s, match: {proto: udp}, rate: 10pps, "
                                     "burst: 2, algorithm: leaky-bucket, max-delay: 2s}\n"),
                            kSec);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("max-delay 2s is beyond the shaping horizon of 100ms"),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(h.p->generation(), 0u);
  EXPECT_EQ(h.p->rules().rules.at(0).name, "r");
  EXPECT_EQ(h.passed(udp("10.0.0.1"), kSec, 3), 2);
  auto ok = h.p->apply(rules_of("rules:\n  - {name: s, match: {proto: udp}, rate: 10pps, "
                                "burst: 2, algorithm: leaky-bucket, max-delay: 50ms}\n"),
                       kSec);
  EXPECT_TRUE(ok.ok());
}

// A rule set applied while the dataplane runs is held to the memory there is then, as the
// start-up set is: the tables of the rules that take a new state are refused, with both
// figures, before any is allocated; a kept rule's table is already there and costs nothing.
TEST(RulesSwap, NewFlowTablesAreHeldToTheMemoryAvailableAndKeptOnesCostNone) {
  PipelineOptions o;
  o.default_max_flows_option = "--flows";  // as live mode's: the refusal names it
  uint64_t available = uint64_t{40} << 20;
  int asked = 0;
  o.memory_available = [&] {
    ++asked;
    return std::optional<uint64_t>(available);
  };
  const char* one = "rules:\n  - {name: a, match: {proto: udp}, key: src-ip, rate: 10pps, burst: 2, "
                    "max-flows: 1000000}\n";  // ~32 MiB
  auto made = Pipeline::create(rules_of(one), o);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Pipeline& p = **made;
  EXPECT_EQ(asked, 1) << "create() asks before it allocates";
  available = uint64_t{1} << 20;
  // Only a's rate changes: its state (and table) is kept, nothing new is needed.
  auto kept = p.apply(rules_of("rules:\n  - {name: a, match: {proto: udp}, key: src-ip, rate: 20pps, "
                               "burst: 2, max-flows: 1000000}\n"),
                      kSec);
  EXPECT_TRUE(kept.ok()) << kept.error().message;
  EXPECT_EQ(p.generation(), 1u);
  const char* two = "rules:\n  - {name: a, match: {proto: udp}, key: src-ip, rate: 20pps, burst: 2, "
                    "max-flows: 1000000}\n  - {name: b, match: {proto: tcp}, key: src-ip, rate: 1pps, "
                    "burst: 1, max-flows: 100000}\n";  // b: ~3.1 MiB more
  const size_t tables_before = FlowTable::totals().tables;
  auto refused = p.apply(rules_of(two), kSec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "flow tables need 3.1 MiB (3203128 bytes) for 100000 flows, more than the 1.0 MiB "
            "(1048576 bytes) of memory available; lower max-flows or --flows");
  EXPECT_EQ(FlowTable::totals().tables, tables_before) << "no table was made for b";
  EXPECT_EQ(p.generation(), 1u);
  EXPECT_EQ(p.rules().rules.size(), 1u);
  EXPECT_FALSE(p.check(rules_of(two)).ok()) << "the dry run refuses it too";
  available = uint64_t{4} << 20;
  EXPECT_TRUE(p.check(rules_of(two)).ok());
  auto applied = p.apply(rules_of(two), kSec);
  EXPECT_TRUE(applied.ok()) << applied.error().message;
  EXPECT_EQ(p.generation(), 2u);
}

// check(): the error apply() would return, from the same code, and no change: not to the
// rules, their generation, their states or the counter slots a later apply takes.
TEST(RulesSwap, CheckRefusesWhatApplyWouldAndChangesNothing) {
  PipelineOptions o;
  o.shaping_horizon_ns = kSec;
  auto made = Pipeline::create(
      rules_of("rules:\n  - {name: r, match: {proto: udp}, key: src-ip, rate: 10pps, burst: 2}\n"), o);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Pipeline& p = **made;
  const RuleSet beyond = rules_of(
      "rules:\n  - {name: r, match: {proto: udp}, key: src-ip, rate: 10pps, burst: 2}\n"
      "  - {name: s, match: {proto: tcp}, rate: 10pps, burst: 2, algorithm: leaky-bucket, "
      "max-delay: 2s}\n");
  const size_t tables_before = FlowTable::totals().tables;
  Status checked = p.check(beyond);
  ASSERT_FALSE(checked.ok());
  auto applied = p.apply(beyond, kSec);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(checked.error().message, applied.error().message);
  EXPECT_EQ(checked.error().kind, applied.error().kind);
  EXPECT_EQ(FlowTable::totals().tables, tables_before);
  EXPECT_EQ(p.generation(), 0u);
  const RuleSet fine = rules_of(
      "rules:\n  - {name: r, match: {proto: udp}, key: src-ip, rate: 5pps, burst: 2}\n"
      "  - {name: s, match: {proto: tcp}, key: dst-ip, rate: 10pps, burst: 2}\n");
  EXPECT_TRUE(p.check(fine).ok());
  EXPECT_EQ(p.generation(), 0u);
  EXPECT_EQ(FlowTable::totals().tables, tables_before) << "a check allocates no table";
  EXPECT_TRUE(p.apply(fine, kSec).ok());
}

TEST(RulesSwap, TheCoreRulesTargetAppliesAtItsClock) {
  Harness h("rules:\n  - {name: r, match: {proto: udp}, rate: 1pps, burst: 1}\n");
  uint64_t now = kSec;
  PipelineRulesTarget target(*h.p, [&] { return now; });
  EXPECT_EQ(target.generation(), 0u);
  auto d = target.apply(rules_of("rules:\n  - {name: r, match: {proto: udp}, rate: 2pps, burst: 1}\n"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(target.generation(), 1u);
  EXPECT_EQ(target.rules().rules.at(0).rate.per_sec_num, h.p->rules().rules.at(0).rate.per_sec_num);
  EXPECT_FALSE(target.top_flows({}).ok());
}

// Bucket conversion itself: tokens carried at t, the new rate from t on.
TEST(RulesSwap, ADenseTableIsKeptWithItsPlacesWhateverItsMaxFlowsBecomes) {
  // dst 192.0.2.0/24 with key dst-ip and room for its 256 keys: a dense table
  // (dense_key.hpp). A new rate or max-flows keeps the state (same match and key), and with
  // it the table's places: the table still says how many keys it holds, whatever the rule's
  // max-flows now is, and each key finds its bucket where it left it.
  auto rule = [](const std::string& rate, unsigned max_flows) {
    return "rules:\n  - {name: d, match: {dst: 192.0.2.0/24}, key: dst-ip, rate: " + rate +
           ", burst: 3, max-flows: " + std::to_string(max_flows) + "}\n";
  };
  Harness h(rule("0.001pps", 300));
  auto to = [](int last) {
    return PacketBuilder().ipv4("10.0.0.1", "192.0.2." + std::to_string(last)).udp(1, 53).build();
  };
  EXPECT_EQ(h.passed(to(7), kSec, 5), 3);
  EXPECT_EQ(h.passed(to(200), kSec, 2), 2);
  for (const auto& [rate, max_flows] : std::vector<std::pair<std::string, unsigned>>{
           {"0.002pps", 300}, {"0.002pps", 100}, {"0.001pps", 65536}}) {
    SCOPED_TRACE(rate + " max-flows " + std::to_string(max_flows));
    h.apply(rule(rate, max_flows), kSec);
    EXPECT_EQ(h.p->enter(h.c, kSec).compiled[0].flows->dense_slots(), 256u);
    EXPECT_EQ(h.rule("d").active_flows, 2u);
  }
  // Both buckets as they were: 192.0.2.7 spent its 3, 192.0.2.200 has 1 left.
  EXPECT_EQ(h.passed(to(7), kSec, 2), 0);
  EXPECT_EQ(h.passed(to(200), kSec, 2), 1);
}

TEST(BucketConvert, TokenBucketAndGcraCarryTokensIntoTheNewProfile) {
  const Rate r1000{CostUnit::packets, 1000, 1}, r10{CostUnit::packets, 10, 1};
  auto from = make_rate_profile(r1000, 100).value();
  auto to = make_rate_profile(r10, 40).value();
  const uint64_t t0 = 5 * kSec;
  uint64_t tb = sl_tb_init(&from, t0), tat = sl_gcra_init(&from, t0);
  for (int i = 0; i < 70; ++i) {  // 30 of 100 left
    uint64_t n;
    ASSERT_TRUE(sl_tb_decide(&from, tb, t0, 1, &n));
    tb = n;
    ASSERT_TRUE(sl_gcra_decide(&from, tat, t0, 1, &n));
    tat = n;
  }
  EXPECT_EQ(token_bucket_tokens(from, tb, t0), 30);
  const uint64_t tb2 = convert_token_bucket_word(from, to, tb, t0);
  const uint64_t tat2 = convert_gcra_word(from, to, tat, t0);
  EXPECT_LE(token_bucket_tokens(to, tb2, t0), 30) << "rounded down, never up";
  EXPECT_GE(token_bucket_tokens(to, tb2, t0), 29);
  EXPECT_LE(gcra_tokens(to, tat2, t0), 30);
  EXPECT_GE(gcra_tokens(to, tat2, t0), 29);
  // 1 s later at 10 pps: +10, and the new burst of 40 caps it.
  EXPECT_NEAR(double(token_bucket_tokens(to, tb2, t0 + kSec)), 39.0, 1.0);
  EXPECT_EQ(token_bucket_tokens(to, tb2, t0 + 10 * kSec), 40);
  // Down to a burst of 5: capped.
  auto small = make_rate_profile(r10, 5).value();
  EXPECT_EQ(token_bucket_tokens(small, convert_token_bucket_word(from, small, tb, t0), t0), 5);
}

TEST(BucketConvert, WindowsKeepTheirCount) {
  auto from = make_window_profile(kSec, 10, false).value();
  auto to = make_window_profile(kSec, 20, false).value();
  uint64_t w = sl_fixed_window_init(&from, 3 * kSec), n;
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(sl_fixed_window_decide(&from, w, 3 * kSec, 1, &n));
    w = n;
  }
  uint64_t w2 = convert_fixed_window_word(from, to, w);
  int admitted = 0;
  for (int i = 0; i < 20; ++i)
    if (sl_fixed_window_decide(&to, w2, 3 * kSec, 1, &n)) {
      w2 = n;
      ++admitted;
    }
  EXPECT_EQ(admitted, 13) << "7 already counted in this window";
}

// Two workers run bursts while the control thread swaps between two rule sets that decide
// the two packets of each burst oppositely: a burst classified against a mix would show
// both passed or both dropped.
TEST(RulesSwapConcurrent, EveryBurstIsDecidedByExactlyOneRuleSet) {
  const std::string a = "default: {action: drop}\nrules:\n"
                        "  - {name: p1, match: {dst-port: 1}, rate: 100Mpps, burst: 100000000}\n";
  const std::string b = "default: {action: drop}\nrules:\n"
                        "  - {name: p2, match: {dst-port: 2}, rate: 100Mpps, burst: 100000000}\n";
  PipelineOptions o;
  o.hash_seed = 1;
  auto made = Pipeline::create(rules_of(a), o);
  ASSERT_TRUE(made.ok());
  Pipeline& p = **made;
  EpochGracePeriod grace(2);
  p.set_grace_period(&grace);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0}, bursts{0};
  std::atomic<int> running{0};  // workers past their first burst
  std::vector<WorkerCounters> counters(2, p.make_counters());
  auto worker = [&](size_t id) {
    grace.online(id);
    std::vector<uint8_t> f1 = udp("10.0.0.1", 1), f2 = udp("10.0.0.1", 2);
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      grace.quiescent(id);
      const RulesSnapshot& s = p.enter(counters[id], kSec);
      Pipeline::Frame frames[2] = {{f1.data(), uint32_t(f1.size())}, {f2.data(), uint32_t(f2.size())}};
      Verdict v[2];
      p.process_burst(s, frames, 2, 0, kSec, counters[id], v);
      if (v[0].kind == v[1].kind) torn.fetch_add(1, std::memory_order_relaxed);
      if (++n == 1) running.fetch_add(1);
      // Three threads on two CPUs here: let the control thread's grace periods end soon.
      std::this_thread::yield();
    }
    bursts.fetch_add(n);
    grace.offline(id);
  };
  std::thread w0(worker, 0), w1(worker, 1);
  // Swap only once both run: 200 applies of a one-rule set take a few milliseconds, which a
  // worker thread not yet started (offline, so no grace period waits for it) would miss.
  while (running.load() < 2) std::this_thread::yield();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(p.apply(rules_of(i % 2 ? a : b), kSec).ok());
  stop = true;
  w0.join();
  w1.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(bursts.load(), 0u);
  // Every packet counted once: by a running rule, a removed one (folded at adoption), or
  // the default.
  const CountersSnapshot s = p.snapshot({&counters[0], &counters[1]});
  uint64_t matched = s.default_rule.traffic.pkts(Outcome::matched);
  for (const RuleSnapshot& r : s.rules) matched += r.traffic.pkts(Outcome::matched);
  for (const RuleSnapshot& r : s.removed) matched += r.traffic.pkts(Outcome::matched);
  EXPECT_EQ(matched, 2 * bursts.load());
  EXPECT_EQ(s.default_rule.traffic.pkts(Outcome::dropped), bursts.load());
}

}  // namespace
