// The burst pipeline end to end in-process: classification, keys, actions, hierarchy,
// flows and counters (SPEC §2, §3, §5).
#include <gtest/gtest.h>

#include <thread>

#include "frame.hpp"
#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "rates.hpp"
#include "rules_loader.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

std::unique_ptr<Pipeline> make(const std::string& yaml, PipelineOptions opts = {}) {
  auto r = load_rules_text(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return nullptr;
  opts.hash_seed = opts.hash_seed ? opts.hash_seed : 12345;
  auto p = Pipeline::create(*r, opts);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? std::move(p).value() : nullptr;
}

struct Harness {
  std::unique_ptr<Pipeline> p;
  WorkerCounters c;
  explicit Harness(const std::string& yaml, PipelineOptions o = {}) : p(make(yaml, o)) {
    if (p) c = p->make_counters();
  }
  Verdict send(std::vector<uint8_t> f, uint64_t now, uint16_t port = 0) {
    last = std::move(f);
    return p->process(last.data(), uint32_t(last.size()), port, now, c);
  }
  int sent_ok(const std::vector<uint8_t>& f, uint64_t now, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += send(f, now).kind == Verdict::Kind::forward;
    return ok;
  }
  RuleSnapshot rule(size_t i) { return p->snapshot({&c}).rules.at(i); }
  RuleSnapshot dflt() { return p->snapshot({&c}).default_rule; }
  std::vector<uint8_t> last;
};

std::vector<uint8_t> udp_from(const std::string& src, uint16_t dport = 53) {
  return PacketBuilder().ipv4(src, "192.0.2.1").udp(1234, dport).build();
}

// matched = passed + dropped + marked + delayed and = conformed + exceeded, always.
void expect_consistent(const TrafficCounters& t) {
  EXPECT_EQ(t.pkts(Outcome::matched), t.pkts(Outcome::passed) + t.pkts(Outcome::dropped) +
                                          t.pkts(Outcome::marked) + t.pkts(Outcome::delayed));
}

// Feeds the same frames to `bursts` (process_burst, `size` at a time, at now += step(k) for
// burst k) and to `single` (process, frame by frame, same times), and fails on the first
// verdict, departure time or rewrite that differs. Returns the number of bursts.
template <class Step>
size_t expect_bursts_match_single(Harness& single, Harness& bursts,
                                  std::vector<std::vector<uint8_t>> frames, size_t size,
                                  Step&& step) {
  auto copy = frames;
  uint64_t now = kSec;
  size_t k = 0;
  for (size_t start = 0; start < frames.size(); start += size, ++k) {
    const size_t n = std::min(size, frames.size() - start);
    now += step(k);
    std::vector<Pipeline::Frame> burst;
    for (size_t i = 0; i < n; ++i)
      burst.push_back({copy[start + i].data(), uint32_t(copy[start + i].size())});
    std::vector<Verdict> vb(n);
    const size_t not_now = bursts.p->process_burst(burst.data(), n, 0, now, bursts.c, vb.data());
    size_t not_now_seen = 0;
    for (size_t i = 0; i < n; ++i) {
      Verdict va = single.p->process(frames[start + i].data(), uint32_t(frames[start + i].size()),
                                     0, now, single.c);
      not_now_seen += !forwards_now(va, now);
      EXPECT_EQ(int(va.kind), int(vb[i].kind)) << start + i;
      EXPECT_EQ(va.depart_ns, vb[i].depart_ns) << start + i;
      EXPECT_EQ(frames[start + i], copy[start + i]) << "rewrites differ at " << start + i;
      if (::testing::Test::HasFailure()) return k;
    }
    // Drops and delays counted as a worker reads them (it sends a burst whole on 0).
    EXPECT_EQ(not_now, not_now_seen) << "burst at " << start;
  }
  return k;
}

}  // namespace

TEST(Pipeline, PerSourceKeysGetOneBucketEach) {
  Harness h(R"(
rules:
  - {name: per-src, match: {proto: udp}, key: src-ip, rate: 10pps, burst: 3}
)");
  ASSERT_TRUE(h.p);
  EXPECT_EQ(h.sent_ok(udp_from("10.0.0.1"), kSec, 10), 3);
  EXPECT_EQ(h.sent_ok(udp_from("10.0.0.2"), kSec, 10), 3);
  EXPECT_EQ(h.sent_ok(udp_from("10.0.0.1"), kSec + 100 * kMs, 10), 1);
  auto r = h.rule(0);
  EXPECT_EQ(r.active_flows, 2u);
  EXPECT_EQ(r.traffic.pkts(Outcome::matched), 30u);
  EXPECT_EQ(r.traffic.pkts(Outcome::conformed), 7u);
  EXPECT_EQ(r.traffic.pkts(Outcome::exceeded), 23u);
  EXPECT_EQ(r.traffic.pkts(Outcome::dropped), 23u);
  expect_consistent(r.traffic);
}

TEST(Pipeline, AggregateStartsFullAtItsFirstPacket) {
  Harness h(R"(
rules:
  - {name: agg, key: none, rate: 1000pps, burst: 5}
)");
  ASSERT_TRUE(h.p);
  // A capture-clock time far from zero: the bucket must start full there.
  EXPECT_EQ(h.sent_ok(udp_from("10.0.0.1"), 1'700'000'000 * kSec, 10), 5);
}

TEST(Pipeline, DryRunCountsWhatItWouldHaveDropped) {
  Harness h(R"(
rules:
  - {name: dry, key: none, rate: 10pps, burst: 2, action: pass}
)");
  ASSERT_TRUE(h.p);
  EXPECT_EQ(h.sent_ok(udp_from("10.0.0.1"), kSec, 10), 10);
  auto r = h.rule(0);
  EXPECT_EQ(r.traffic.pkts(Outcome::exceeded), 8u);
  EXPECT_EQ(r.traffic.pkts(Outcome::passed), 10u);
  EXPECT_EQ(r.traffic.pkts(Outcome::dropped), 0u);
  expect_consistent(r.traffic);
}

TEST(Pipeline, MarkDscpRewritesNonConformingPackets) {
  Harness h(R"(
rules:
  - {name: mark, key: none, rate: 10pps, burst: 1, action: "mark-dscp:AF13"}
)");
  ASSERT_TRUE(h.p);
  auto f = udp_from("10.0.0.1");
  EXPECT_EQ(h.send(f, kSec).kind, Verdict::Kind::forward);
  EXPECT_EQ(parse_frame(h.last.data(), uint32_t(h.last.size())).dscp, 0);
  EXPECT_EQ(h.send(f, kSec).kind, Verdict::Kind::forward);
  ParsedFrame pf = parse_frame(h.last.data(), uint32_t(h.last.size()));
  EXPECT_EQ(pf.dscp, 14);  // AF13
  EXPECT_EQ(PacketBuilder::ipv4_checksum(h.last.data() + 14, 20), 0);  // checksum still valid
  EXPECT_EQ(h.rule(0).traffic.pkts(Outcome::marked), 1u);
}

TEST(Pipeline, ParentRefusalRefundsTheChild) {
  // The child has room for 5; the parent only for 2. Refused packets must not use up the
  // child's tokens: once the parent refills, the child still has 3 left.
  Harness h(R"(
rules:
  - {name: child, match: {src: 10.0.0.0/8}, key: src-ip, rate: 1pps, burst: 5, parent: parent}
  - {name: parent, match: {dst: 198.51.100.0/24}, key: none, rate: 1000pps, burst: 2}
)");
  ASSERT_TRUE(h.p);
  auto f = udp_from("10.0.0.1");
  EXPECT_EQ(h.sent_ok(f, kSec, 5), 2);
  EXPECT_EQ(h.sent_ok(f, kSec + 10 * kMs, 5), 2);  // parent refilled 2; child has 3 left
  EXPECT_EQ(h.sent_ok(f, kSec + 20 * kMs, 5), 1);  // child's last token
  auto r = h.rule(0);
  EXPECT_EQ(r.traffic.pkts(Outcome::conformed), 5u);
  EXPECT_EQ(r.traffic.pkts(Outcome::exceeded), 10u);
  expect_consistent(r.traffic);
}

TEST(Pipeline, ShapingDelaysThenDropsPastMaxDelay) {
  Harness h(R"(
rules:
  - {name: shape, key: none, rate: 1000pps, burst: 1, algorithm: leaky-bucket, max-delay: 3ms}
)");
  ASSERT_TRUE(h.p);
  auto f = udp_from("10.0.0.1");
  std::vector<uint64_t> departs;
  for (int i = 0; i < 6; ++i) {
    Verdict v = h.send(f, kSec);
    if (v.kind == Verdict::Kind::forward) departs.push_back(v.depart_ns - kSec);
  }
  EXPECT_EQ(departs, (std::vector<uint64_t>{0, kMs, 2 * kMs, 3 * kMs}));
  auto r = h.rule(0);
  EXPECT_EQ(r.traffic.pkts(Outcome::delayed), 3u);
  EXPECT_EQ(r.traffic.pkts(Outcome::dropped), 2u);
  expect_consistent(r.traffic);
  EXPECT_EQ(h.p->max_delay_ns(), 3 * kMs);
}

TEST(Pipeline, MetersActPerColour) {
  Harness h(R"(
rules:
  - name: meter
    key: none
    algorithm: srtcm
    rate: 1000pps
    burst: 2
    excess-burst: 2
    actions: {green: pass, yellow: "mark-dscp:AF13", red: drop}
)");
  ASSERT_TRUE(h.p);
  EXPECT_EQ(h.sent_ok(udp_from("10.0.0.1"), kSec, 6), 4);
  auto r = h.rule(0);
  EXPECT_EQ(r.traffic.pkts(Outcome::green), 2u);
  EXPECT_EQ(r.traffic.pkts(Outcome::yellow), 2u);
  EXPECT_EQ(r.traffic.pkts(Outcome::red), 2u);
  EXPECT_EQ(r.traffic.pkts(Outcome::marked), 2u);
  EXPECT_EQ(r.traffic.pkts(Outcome::dropped), 2u);
  expect_consistent(r.traffic);
}

TEST(Pipeline, MalformedFramesFollowTheDefault) {
  Harness h(R"(
default: {action: drop}
rules:
  - {name: all, rate: 1000pps, burst: 100}
)");
  ASSERT_TRUE(h.p);
  auto f = udp_from("10.0.0.1");
  f.resize(20);  // cut inside the IPv4 header
  EXPECT_EQ(h.send(f, kSec).kind, Verdict::Kind::drop);
  EXPECT_EQ(h.send({1, 2, 3}, kSec).kind, Verdict::Kind::drop);
  auto d = h.dflt();
  EXPECT_EQ(d.traffic.pkts(Outcome::malformed), 2u);
  EXPECT_EQ(d.traffic.pkts(Outcome::dropped), 2u);
  EXPECT_EQ(h.rule(0).traffic.pkts(Outcome::matched), 0u);
}

TEST(Pipeline, MaxFlowsEvictsLeastRecentlyUsedThenOverflows) {
  Harness h(R"(
rules:
  - {name: capped, key: src-ip, rate: 1pps, burst: 1, max-flows: 4, idle-timeout: 10s, overflow: pass}
)");
  ASSERT_TRUE(h.p);
  // Four flows fill the table.
  for (int i = 0; i < 4; ++i) h.send(udp_from("10.0.0." + std::to_string(i + 1)), kSec);
  EXPECT_EQ(h.rule(0).active_flows, 4u);
  // A fifth flow arriving in the same instant cannot evict anyone (all are active): it
  // gets the overflow action (pass) and is counted as exceeded.
  EXPECT_EQ(h.send(udp_from("10.0.0.9"), kSec).kind, Verdict::Kind::forward);
  EXPECT_EQ(h.rule(0).traffic.pkts(Outcome::exceeded), 1u);
  // Later, the least recently used flow is evicted for a new one.
  EXPECT_EQ(h.send(udp_from("10.0.0.9"), 2 * kSec).kind, Verdict::Kind::forward);
  auto r = h.rule(0);
  EXPECT_EQ(r.active_flows, 4u);
  EXPECT_EQ(r.flows_evicted, 1u);
}

TEST(Pipeline, IdleFlowsExpire) {
  Harness h(R"(
rules:
  - {name: f, key: 5-tuple, rate: 1pps, burst: 1, idle-timeout: 1s}
)");
  ASSERT_TRUE(h.p);
  for (int i = 0; i < 50; ++i)
    h.send(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(uint16_t(1000 + i), 53).build(), kSec);
  EXPECT_EQ(h.rule(0).active_flows, 50u);
  size_t freed = 0;
  // The default table has 65536 slots; 2048 calls of 64 slots visit each one twice.
  for (int i = 0; i < 2048 && h.rule(0).active_flows > 0; ++i) freed += h.p->expire_idle(5 * kSec, 64);
  EXPECT_EQ(freed, 50u);
  EXPECT_EQ(h.rule(0).active_flows, 0u);
}

// Workers call expire_idle(now, budget) this often: each table swept whole at least once per
// idle-timeout / 8 (1 ms to 10 s), never more often than every 10 us or less than every 1 ms.
TEST(Pipeline, ExpireIntervalSweepsEachTableWithinAnEighthOfItsTimeout) {
  PipelineOptions o;
  o.default_max_flows = 1'000'000;  // 2M slots: 31,250 calls of 64
  Harness big(R"(
rules:
  - {name: f, key: 5-tuple, rate: 1pps, burst: 1}
)", o);
  ASSERT_TRUE(big.p);
  // Default idle-timeout 60 s: a sweep per 7.5 s.
  EXPECT_EQ(big.p->expire_interval_ns(64, 1), 7'500'000'000ull / 31'250);
  EXPECT_EQ(big.p->expire_interval_ns(64, 2), 2 * 7'500'000'000ull / 31'250) << "2 workers share it";
  EXPECT_EQ(big.p->expire_interval_ns(128, 1), 2 * 7'500'000'000ull / 31'250);

  Harness two(R"(
rules:
  - {name: a, key: src-ip, rate: 1pps, burst: 1, max-flows: 1000000, idle-timeout: 80s}
  - {name: b, key: dst-ip, rate: 1pps, burst: 1, max-flows: 10, idle-timeout: 1s}
)");
  ASSERT_TRUE(two.p);
  // Round robin: rule a gets every other call, so calls come twice as often as a alone needs.
  EXPECT_EQ(two.p->expire_interval_ns(64, 1), 10'000'000'000ull / 31'250 / 2);

  Harness small(R"(
rules:
  - {name: f, key: src-ip, rate: 1pps, burst: 1, max-flows: 1000}
)");
  ASSERT_TRUE(small.p);
  EXPECT_EQ(small.p->expire_interval_ns(64, 1), Pipeline::kMaxExpireIntervalNs);
  Harness quick(R"(
rules:
  - {name: f, key: src-ip, rate: 1pps, burst: 1, idle-timeout: 1ms}
)");
  ASSERT_TRUE(quick.p);
  EXPECT_EQ(quick.p->expire_interval_ns(64, 1), Pipeline::kMinExpireIntervalNs);
  Harness none(R"(
rules:
  - {name: all, rate: 1pps, burst: 1}
)");
  ASSERT_TRUE(none.p);
  EXPECT_EQ(none.p->expire_interval_ns(64, 1), Pipeline::kMaxExpireIntervalNs) << "nothing to sweep";
}

TEST(Pipeline, FloodOfNewFlowsStaysBounded) {
  Harness h(R"(
rules:
  - {name: flood, key: src-ip, rate: 10pps, burst: 1, max-flows: 1000}
)");
  ASSERT_TRUE(h.p);
  for (uint32_t i = 0; i < 100000; ++i) {
    std::string src = "10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) +
                      "." + std::to_string(i & 255);
    h.send(udp_from(src), kSec + i * kUs);
  }
  auto r = h.rule(0);
  EXPECT_LE(r.active_flows, 1000u);
  // Each new flow either evicted an LRU flow idle for over 1 ms or, if its set held only
  // fresher flows, fell to the overflow action (counted as exceeded).
  EXPECT_GT(r.flows_evicted, 10000u);
  EXPECT_GE(r.flows_evicted + r.traffic.pkts(Outcome::exceeded) + r.active_flows, 100000u);
  expect_consistent(r.traffic);
}

TEST(Pipeline, IPv6AndVlanClassifiedByInnerHeaders) {
  Harness h(R"(
rules:
  - {name: v6, match: {src: "2001:db8::/32"}, key: src-ip, rate: 1pps, burst: 2}
  - {name: v4, match: {src: 10.0.0.0/8}, key: src-ip, rate: 1pps, burst: 3}
)");
  ASSERT_TRUE(h.p);
  EXPECT_EQ(h.sent_ok(PacketBuilder().vlan(5).ipv6("2001:db8::1", "::2").udp(1, 2).build(), kSec, 5), 2);
  EXPECT_EQ(h.sent_ok(PacketBuilder().vlan(5).vlan(6).ipv4("10.9.9.9", "1.1.1.1").tcp(1, 2).build(), kSec, 5), 3);
  EXPECT_EQ(h.rule(0).traffic.pkts(Outcome::matched), 5u);
  EXPECT_EQ(h.rule(1).traffic.pkts(Outcome::matched), 5u);
}

TEST(Pipeline, TwoWorkersShareOneAggregateBucket) {
  auto p = make(R"(
rules:
  - {name: agg, key: none, rate: 100000pps, burst: 100}
  - {name: per-src, match: {src: 10.0.0.0/8}, key: src-ip, rate: 100000pps, burst: 100}
)");
  ASSERT_TRUE(p);
  std::atomic<uint64_t> clock{kSec};
  WorkerCounters c0 = p->make_counters(), c1 = p->make_counters();
  auto worker = [&](WorkerCounters& c, int id) {
    auto f = udp_from(id == 0 ? "192.168.0.1" : "192.168.0.2");
    for (int i = 0; i < 200000; ++i) {
      if (id == 0 && i % 8 == 0) clock.fetch_add(1000);
      p->process(f.data(), uint32_t(f.size()), 0, clock.load(), c);
    }
  };
  std::thread a(worker, std::ref(c0), 0), b(worker, std::ref(c1), 1);
  a.join();
  b.join();
  uint64_t elapsed = clock.load() - kSec;
  auto snap = p->snapshot({&c0, &c1});
  uint64_t admitted = snap.rules[0].traffic.pkts(Outcome::conformed);
  EXPECT_LE(admitted, 100 + elapsed * 100000 / kSec);
  EXPECT_GE(admitted + 2, 100 + elapsed * 100000 / kSec);
}

TEST(Pipeline, BurstProcessingMatchesPacketByPacket) {
  const std::string rules = R"(
default: {action: "mark-dscp:CS1"}
rules:
  - {name: per-src, match: {proto: udp}, key: src-ip, rate: 1000pps, burst: 3, parent: agg}
  - {name: agg, match: {proto: tcp}, key: none, rate: 5000pps, burst: 20}
  - {name: flows, match: {dst: "2001:db8::/32"}, key: 5-tuple, rate: 100pps, burst: 2, action: "mark-dscp:AF11"}
)";
  Harness a(rules), b(rules);
  ASSERT_TRUE(a.p && b.p);
  std::vector<std::vector<uint8_t>> frames;
  uint64_t x = 7;
  for (int i = 0; i < 3000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::string src = "10.0.0." + std::to_string(1 + (x >> 33) % 40);
    switch ((x >> 20) % 4) {
      case 0: frames.push_back(udp_from(src)); break;
      case 1: frames.push_back(PacketBuilder().ipv4(src, "10.9.9.9").tcp(1, 2).build()); break;
      case 2:
        frames.push_back(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(uint16_t(x >> 48), 53).build());
        break;
      default: frames.push_back({1, 2, 3, 4, 5}); break;  // malformed
    }
  }
  expect_bursts_match_single(a, b, frames, 37, [](size_t) { return 3 * kMs; });
  if (HasFailure()) return;
  auto sa = a.p->snapshot({&a.c}), sb = b.p->snapshot({&b.c});
  for (size_t r = 0; r < sa.rules.size(); ++r) {
    EXPECT_EQ(sa.rules[r].traffic.packets, sb.rules[r].traffic.packets) << r;
    EXPECT_EQ(sa.rules[r].active_flows, sb.rules[r].active_flows) << r;
  }
  EXPECT_EQ(sa.default_rule.traffic.packets, sb.default_rule.traffic.packets);
}

// Aggregate policers without parent or child are charged once per burst (all their packets of
// the burst decided on one copy of the word): the verdicts, rewrites and counters must be
// exactly those of packet-by-packet processing, for every algorithm that takes this path.
class BurstableAggregate : public ::testing::TestWithParam<const char*> {};

TEST_P(BurstableAggregate, MatchesPacketByPacket) {
  const std::string rules = std::string(R"(
default: {action: pass}
rules:
  - {name: agg, match: {proto: udp}, key: none, )") + GetParam() + R"(, action: "mark-dscp:AF11"}
  - {name: dry, match: {proto: tcp}, key: none, rate: 2000pps, burst: 5, action: pass}
  - {name: per-src, match: {src: 10.0.0.0/8}, key: src-ip, rate: 1000pps, burst: 2}
)";
  Harness a(rules), b(rules);
  ASSERT_TRUE(a.p && b.p);
  std::vector<std::vector<uint8_t>> frames;
  uint64_t x = 11;
  for (int i = 0; i < 6000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const std::string src = "192.168.0." + std::to_string(1 + (x >> 33) % 9);
    switch ((x >> 20) % 5) {
      case 0: case 1: frames.push_back(PacketBuilder().ipv4(src, "192.0.2.1").udp(1, 2).payload(int((x >> 40) % 300)).build()); break;
      case 2: frames.push_back(PacketBuilder().ipv4(src, "192.0.2.1").tcp(1, 2).build()); break;
      case 3: frames.push_back(PacketBuilder().ipv4("10.1.1." + std::to_string(1 + (x >> 45) % 5), "192.0.2.1").icmp().build()); break;
      default: frames.push_back({1, 2, 3}); break;  // malformed
    }
  }
  // Sometimes no time passes between bursts.
  const size_t bursts = expect_bursts_match_single(a, b, frames, 32, [](size_t k) { return 200 * kUs * (k % 7); });
  if (HasFailure()) return;
  auto sa = a.p->snapshot({&a.c}), sb = b.p->snapshot({&b.c});
  for (size_t r = 0; r < sa.rules.size(); ++r) {
    EXPECT_EQ(sa.rules[r].traffic.packets, sb.rules[r].traffic.packets) << r;
    EXPECT_EQ(sa.rules[r].traffic.bytes, sb.rules[r].traffic.bytes) << r;
  }
  EXPECT_EQ(sa.default_rule.traffic.packets, sb.default_rule.traffic.packets);
  // The test is only worth something if the aggregate both admitted and refused.
  EXPECT_GT(sa.rules[0].traffic.pkts(Outcome::conformed), 100u);
  EXPECT_GT(sa.rules[0].traffic.pkts(Outcome::marked), 100u);
  EXPECT_GT(bursts, 100u);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, BurstableAggregate,
    ::testing::Values("rate: 3000pps, burst: 10", "algorithm: gcra, rate: 3000pps, burst: 10",
                      "rate: 2Mbit/s, burst: 3000B", "algorithm: fixed-window, window: 5ms, limit: 12",
                      "algorithm: sliding-window, window: 5ms, limit: 12"));

TEST(Pipeline, TwoWorkersShareOneAggregateBucketInBursts) {
  auto p = make(R"(
rules:
  - {name: agg, key: none, rate: 100000pps, burst: 100}
)");
  ASSERT_TRUE(p);
  std::atomic<uint64_t> clock{kSec};
  WorkerCounters c0 = p->make_counters(), c1 = p->make_counters();
  auto worker = [&](WorkerCounters& c, int id) {
    auto f = udp_from(id == 0 ? "192.168.0.1" : "192.168.0.2");
    std::vector<std::vector<uint8_t>> copies(32, f);
    Pipeline::Frame burst[32];
    Verdict v[32];
    for (int i = 0; i < 200000 / 32; ++i) {
      if (id == 0) clock.fetch_add(4000);
      for (int k = 0; k < 32; ++k) burst[k] = {copies[size_t(k)].data(), uint32_t(f.size())};
      p->process_burst(burst, 32, 0, clock.load(), c, v);
    }
  };
  std::thread a(worker, std::ref(c0), 0), b(worker, std::ref(c1), 1);
  a.join();
  b.join();
  const uint64_t elapsed = clock.load() - kSec;
  auto snap = p->snapshot({&c0, &c1});
  const uint64_t admitted = snap.rules[0].traffic.pkts(Outcome::conformed);
  EXPECT_LE(admitted, 100 + elapsed * 100000 / kSec);
  EXPECT_GE(admitted + 2, 100 + elapsed * 100000 / kSec) << "no lost updates";
  EXPECT_EQ(snap.rules[0].traffic.pkts(Outcome::matched), 2u * (200000 / 32) * 32);
}
