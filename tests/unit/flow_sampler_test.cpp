// FlowSampler over a real core Pipeline (the frames are parsed and classified against the
// snapshot the burst runs), rank_flows over its windows, and the keys as an operator reads
// them: the busiest keys in order with rates within the sampling error, window roll-over,
// rules filtered by name and by whether they still run, bytes against packets.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flow_key_text.hpp"
#include "flow_rates.hpp"
#include "flow_sampler.hpp"
#include "frame.hpp"
#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "pipeline_rules_target.hpp"
#include "rules_loader.hpp"

using namespace sluice;
using sluice::testing::PacketBuilder;

namespace {

constexpr uint64_t kSec = 1'000'000'000;

RuleSet rules_of(const std::string& yaml) {
  auto r = load_rules_text(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value();
}

const char* const kRules = R"(
default: {action: pass}
rules:
  - {name: per-src, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 1Mpps, burst: 1000}
  - {name: per-pair, match: {proto: udp, dst-port: 54}, key: 5-tuple, rate: 1Mpps, burst: 1000}
  - {name: total, match: {proto: tcp}, key: none, rate: 1Mpps, burst: 1000}
)";

std::vector<uint8_t> udp(const std::string& src, uint16_t dport, size_t size = 64) {
  return PacketBuilder().ipv4(src, "192.0.2.1").udp(1024, dport).frame_size(size).build();
}

struct Rig {
  std::unique_ptr<Pipeline> p;
  WorkerCounters c;
  FlowSampler sampler;
  uint64_t now_ns = kSec;

  explicit Rig(FlowSamplerOptions o, const char* yaml = kRules) : sampler(o) {
    PipelineOptions po;
    po.hash_seed = 5;
    po.single_writer = true;
    p = Pipeline::create(rules_of(yaml), po).value();
    c = p->make_counters();
    sampler.tick(now_ns);
  }

  // `frames` in bursts of 32 spread evenly over `seconds`, the sampler ticked between bursts.
  void run(std::vector<std::vector<uint8_t>> frames, double seconds) {
    const size_t bursts = (frames.size() + 31) / 32;
    const uint64_t gap_ns = uint64_t(seconds * double(kSec)) / std::max<size_t>(1, bursts);
    Pipeline::Frame burst[32];
    Verdict v[32];
    for (size_t at = 0; at < frames.size(); at += 32) {
      const size_t n = std::min<size_t>(32, frames.size() - at);
      for (size_t i = 0; i < n; ++i)
        burst[i] = {frames[at + i].data(), uint32_t(frames[at + i].size()), 0};
      const RulesSnapshot& snap = p->enter(c, now_ns);
      sampler.observe(snap, burst, n, 0);
      p->process_burst(snap, burst, n, 0, now_ns, c, v);
      now_ns += gap_ns;
      sampler.tick(now_ns);
    }
  }

  Result<std::vector<FlowRate>> top(size_t n, std::string rule = "", bool by_bytes = false) {
    TopFlowsQuery q;
    q.count = n;
    q.rule = std::move(rule);
    q.by_bytes = by_bytes;
    return rank_flows({sampler.last_window(now_ns)}, p->rule_identities(), q);
  }
};

// A:B:C = 4:2:1 of 70,000 packets, with 7,000 packets of 1,000 one-off sources between them.
std::vector<std::vector<uint8_t>> skewed(std::mt19937_64& rng) {
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 40000; ++i) frames.push_back(udp("10.0.0.1", 53));
  for (int i = 0; i < 20000; ++i) frames.push_back(udp("10.0.0.2", 53));
  for (int i = 0; i < 10000; ++i) frames.push_back(udp("10.0.0.3", 53));
  for (int i = 0; i < 7000; ++i) frames.push_back(udp("10.9." + std::to_string(i / 250) + "." + std::to_string(i % 250), 53));
  std::shuffle(frames.begin(), frames.end(), rng);
  return frames;
}

// Within 5 standard deviations of sampling one packet in N (plus one N of rounding).
void expect_near_rate(double estimate, double truth, uint32_t every) {
  const double bound = 5 * std::sqrt(truth * every) + every;
  EXPECT_NEAR(estimate, truth, bound) << "every " << every;
}

TEST(FlowSampler, NamesTheHeavyKeysInOrderWithRatesWithinTheSamplingError) {
  FlowSamplerOptions o;
  o.fixed_every = 8;
  o.window_ns = 2 * kSec;
  Rig r(o);
  std::mt19937_64 rng(1);
  r.run(skewed(rng), 1.0);  // one second of traffic, the window not yet complete
  auto top = r.top(3);
  ASSERT_TRUE(top) << top.error().message;
  ASSERT_EQ(top->size(), 3u);
  EXPECT_EQ((*top)[0].key, "10.0.0.1");
  EXPECT_EQ((*top)[1].key, "10.0.0.2");
  EXPECT_EQ((*top)[2].key, "10.0.0.3");
  for (const FlowRate& f : *top) EXPECT_EQ(f.rule, "per-src");
  // The current window's rates are over its time so far (1 s less one burst gap).
  const double seconds = double(r.now_ns - kSec) / 1e9;
  expect_near_rate((*top)[0].packets_per_sec * seconds, 40000, 8);
  expect_near_rate((*top)[1].packets_per_sec * seconds, 20000, 8);
  expect_near_rate((*top)[2].packets_per_sec * seconds, 10000, 8);
  EXPECT_NEAR((*top)[0].bits_per_sec / (*top)[0].packets_per_sec, 64 * 8, 1e-6);
}

TEST(FlowSampler, CountsEveryPacketWhenTheRateIsLow) {
  FlowSamplerOptions o;  // adaptive: starts at one in one
  Rig r(o);
  std::vector<std::vector<uint8_t>> frames(300, udp("10.0.0.1", 53));
  for (int i = 0; i < 100; ++i) frames.push_back(udp("10.0.0.2", 53));
  r.run(frames, 0.5);
  EXPECT_EQ(r.sampler.every(), 1u);
  auto top = r.top(10);
  ASSERT_TRUE(top);
  ASSERT_EQ(top->size(), 2u);
  const double seconds = double(r.now_ns - kSec) / 1e9;
  EXPECT_NEAR((*top)[0].packets_per_sec * seconds, 300, 1e-6);
  EXPECT_NEAR((*top)[1].packets_per_sec * seconds, 100, 1e-6);
}

TEST(FlowSampler, AdaptsItsIntervalToTheRateAndStaysWithinTheError) {
  FlowSamplerOptions o;
  o.window_ns = 10 * kSec;
  Rig r(o);
  std::mt19937_64 rng(2);
  std::vector<std::vector<uint8_t>> frames;
  for (int rep = 0; rep < 8; ++rep)
    for (auto& f : skewed(rng)) frames.push_back(std::move(f));
  r.run(frames, 1.0);  // 616,000 packets
  EXPECT_GE(r.sampler.every(), 8u) << "more packets than the sample budget: it sampled fewer";
  auto top = r.top(3);
  ASSERT_TRUE(top);
  ASSERT_EQ(top->size(), 3u);
  EXPECT_EQ((*top)[0].key, "10.0.0.1");
  EXPECT_EQ((*top)[1].key, "10.0.0.2");
  EXPECT_EQ((*top)[2].key, "10.0.0.3");
  const double seconds = double(r.now_ns - kSec) / 1e9;
  // The interval grew during the window: bound by the largest one used.
  expect_near_rate((*top)[0].packets_per_sec * seconds, 320000, r.sampler.every());
  expect_near_rate((*top)[2].packets_per_sec * seconds, 80000, r.sampler.every());
}

TEST(FlowSampler, HandsOverTheLastCompleteWindow) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  o.window_ns = kSec;
  Rig r(o);
  r.run(std::vector<std::vector<uint8_t>>(100, udp("10.0.0.1", 53)), 0.5);
  // Before any window completed: the current one.
  auto first = r.top(5);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->size(), 1u);
  // The window closes at the first tick past its end: later traffic goes into the next.
  r.now_ns = 2 * kSec + 1;
  r.sampler.tick(r.now_ns);
  r.run(std::vector<std::vector<uint8_t>>(64, udp("10.0.0.2", 53)), 0.2);
  auto second = r.top(5);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].key, "10.0.0.1");
  EXPECT_NEAR((*second)[0].packets_per_sec, 100.0 / (double(kSec + 1) / 1e9), 1e-6)
      << "100 packets over the window's real duration";
  // Another window ends: only the second source is in it; then one without traffic.
  r.now_ns += kSec;
  r.sampler.tick(r.now_ns);
  auto third = r.top(5);
  ASSERT_TRUE(third);
  ASSERT_EQ(third->size(), 1u);
  EXPECT_EQ((*third)[0].key, "10.0.0.2");
  r.now_ns += kSec;
  r.sampler.tick(r.now_ns);
  auto idle = r.top(5);
  ASSERT_TRUE(idle);
  EXPECT_TRUE(idle->empty());
}

TEST(FlowSampler, TheWorkersAnswerIsTheLastWindowAsOfItsTick) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  Rig r(o);
  r.run(std::vector<std::vector<uint8_t>>(10, udp("10.0.0.1", 53)), 0.1);
  r.sampler.ask();
  EXPECT_FALSE(r.sampler.answered());
  r.sampler.tick(r.now_ns);
  ASSERT_TRUE(r.sampler.answered());
  ASSERT_EQ(r.sampler.answer().by_packets.size(), 1u);
  EXPECT_EQ(r.sampler.answer().by_packets[0].packets, 10u);
  EXPECT_EQ(r.sampler.answer().by_bytes[0].bytes, 640u);
}

// A worker thread forwarding while another thread asks again and again: every answer is one
// window as the worker held it at a tick (never a half-copied one: under ThreadSanitizer a
// read before the worker's release would be reported), and the asker never waits for more
// than the worker's next tick.
TEST(FlowSampler, AnswersAReaderWhileTheWorkerRuns) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  o.window_ns = kSec / 100;
  Rig r(o);
  std::atomic<bool> done{false};
  std::thread worker([&] {
    std::vector<std::vector<uint8_t>> frames;
    for (int i = 0; i < 64; ++i) frames.push_back(udp("10.0.0." + std::to_string(1 + i % 3), 53));
    for (int round = 0; round < 2000; ++round) r.run(frames, 0.0001);
    done = true;
  });
  int answers = 0;
  while (!done.load()) {
    r.sampler.ask();
    while (!r.sampler.answered() && !done.load()) std::this_thread::yield();
    if (!r.sampler.answered()) break;
    const FlowWindow& w = r.sampler.answer();
    ASSERT_LE(w.start_ns, w.end_ns);
    ASSERT_LE(w.by_packets.size(), 3u);
    uint64_t packets = 0;
    for (const FlowCount& c : w.by_packets) {
      ASSERT_EQ(c.bytes, 64 * c.packets) << "a counter copied in halves";
      packets += c.packets;
    }
    ASSERT_EQ(packets % 32, 0u) << "a window holds whole bursts (32 frames between ticks)";
    ++answers;
  }
  worker.join();
  EXPECT_GT(answers, 0);
}

TEST(RankFlows, FiltersByRuleAndRefusesRulesWithoutFlows) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  Rig r(o);
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 30; ++i) frames.push_back(udp("10.0.0.1", 53));
  for (int i = 0; i < 20; ++i) frames.push_back(udp("10.0.0.7", 54));
  for (int i = 0; i < 50; ++i)
    frames.push_back(PacketBuilder().ipv4("10.0.0.8", "192.0.2.1").tcp(1, 2).build());
  r.run(frames, 0.1);
  auto all = r.top(10);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u) << "the key: none rule lists no flows";
  EXPECT_EQ((*all)[0].rule, "per-src");
  EXPECT_EQ((*all)[1].rule, "per-pair");
  EXPECT_EQ((*all)[1].key, "udp 10.0.0.7:1024 > 192.0.2.1:54");
  auto pair = r.top(10, "per-pair");
  ASSERT_TRUE(pair);
  ASSERT_EQ(pair->size(), 1u);
  EXPECT_EQ((*pair)[0].rule, "per-pair");
  auto none = r.top(10, "total");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("key: none"), std::string::npos);
  auto unknown = r.top(10, "nope");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("no rule named \"nope\""), std::string::npos);
}

TEST(RankFlows, FlowsOfRulesNoLongerRunningAreNotListed) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  Rig r(o);
  r.run(std::vector<std::vector<uint8_t>>(10, udp("10.0.0.1", 53)), 0.1);
  ASSERT_EQ(r.top(10)->size(), 1u);
  // Renamed: a new state identity, so the window's flows belong to no running rule.
  auto d = r.p->apply(rules_of(R"(
default: {action: pass}
rules:
  - {name: renamed, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 1Mpps, burst: 1000}
)"), r.now_ns);
  ASSERT_TRUE(d);
  auto after = r.top(10);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->empty());
  // A kept rule (new rate only) keeps its identity, and its flows.
  Rig k(o);
  k.run(std::vector<std::vector<uint8_t>>(10, udp("10.0.0.1", 53)), 0.1);
  std::string yaml = kRules;
  yaml.replace(yaml.find("rate: 1Mpps"), 11, "rate: 2Mpps");
  ASSERT_TRUE(k.p->apply(rules_of(yaml), k.now_ns));
  ASSERT_EQ(k.top(10)->size(), 1u);
}

TEST(RankFlows, TheSameFlowOnTwoWorkersAddsUp) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  Rig r(o);
  r.run(std::vector<std::vector<uint8_t>>(10, udp("10.0.0.1", 53)), 0.1);
  const FlowWindow w = r.sampler.last_window(r.now_ns);
  FlowWindow other = w;  // a second worker, same flow, twice the time
  other.end_ns = other.start_ns + 2 * (w.end_ns - w.start_ns);
  TopFlowsQuery q;
  auto one = rank_flows({w}, r.p->rule_identities(), q);
  auto two = rank_flows({w, other}, r.p->rule_identities(), q);
  ASSERT_TRUE(one && two);
  ASSERT_EQ(two->size(), 1u);
  EXPECT_NEAR((*two)[0].packets_per_sec, 1.5 * (*one)[0].packets_per_sec, 1e-6);
}

TEST(RankFlows, BitsPerSecondRanksBigFramesFirst) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  Rig r(o);
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 40; ++i) frames.push_back(udp("10.0.0.1", 53, 64));
  for (int i = 0; i < 10; ++i) frames.push_back(udp("10.0.0.2", 53, 1500));
  r.run(frames, 0.1);
  auto pps = r.top(2);
  auto bps = r.top(2, "", true);
  ASSERT_TRUE(pps && bps);
  ASSERT_EQ(pps->size(), 2u);
  ASSERT_EQ(bps->size(), 2u);
  EXPECT_EQ((*pps)[0].key, "10.0.0.1");
  EXPECT_EQ((*bps)[0].key, "10.0.0.2");
  EXPECT_NEAR((*bps)[0].bits_per_sec / (*bps)[0].packets_per_sec, 1500 * 8, 1e-6);
  auto cut = r.top(1, "", true);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->size(), 1u);
}

TEST(RankFlows, PipelineRulesTargetReadsItsSampler) {
  FlowSamplerOptions o;
  o.fixed_every = 1;
  Rig r(o);
  r.run(std::vector<std::vector<uint8_t>>(10, udp("10.0.0.4", 53)), 0.1);
  PipelineRulesTarget with(*r.p, [&] { return r.now_ns; }, &r.sampler);
  auto top = with.top_flows({});
  ASSERT_TRUE(top) << top.error().message;
  ASSERT_EQ(top->size(), 1u);
  EXPECT_EQ((*top)[0].key, "10.0.0.4");
  PipelineRulesTarget without(*r.p, [&] { return r.now_ns; });
  EXPECT_FALSE(without.top_flows({}));
}

std::string key_text(KeyMode mode, const std::vector<uint8_t>& frame, uint8_t prefix = 0) {
  const ParsedFrame pf = parse_frame(frame.data(), uint32_t(frame.size()));
  return flow_key_text(flow_key_for(mode, pf, prefix));
}

TEST(FlowKeyText, EveryKeyModeReadsAsAnOperatorWritesIt) {
  const auto v4 = PacketBuilder().ipv4("10.1.2.3", "192.0.2.9").udp(5353, 53).build();
  const auto v6 = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").tcp(80, 443).build();
  const auto icmp = PacketBuilder().ipv4("10.1.2.3", "192.0.2.9").icmp().build();
  const auto arp = PacketBuilder().ethertype(0x0806).payload(28).build();
  EXPECT_EQ(key_text(KeyMode::src_ip, v4), "10.1.2.3");
  EXPECT_EQ(key_text(KeyMode::dst_ip, v4), "192.0.2.9");
  EXPECT_EQ(key_text(KeyMode::src_dst, v4), "10.1.2.3 > 192.0.2.9");
  EXPECT_EQ(key_text(KeyMode::five_tuple, v4), "udp 10.1.2.3:5353 > 192.0.2.9:53");
  EXPECT_EQ(key_text(KeyMode::src_prefix, v4, 16), "10.1.0.0/16");
  EXPECT_EQ(key_text(KeyMode::dst_prefix, v4, 24), "192.0.2.0/24");
  EXPECT_EQ(key_text(KeyMode::src_ip, v6), "2001:db8::1");
  EXPECT_EQ(key_text(KeyMode::five_tuple, v6), "tcp [2001:db8::1]:80 > [2001:db8::2]:443");
  EXPECT_EQ(key_text(KeyMode::dst_prefix, v6, 32), "2001:db8::/32");
  EXPECT_EQ(key_text(KeyMode::five_tuple, icmp), "icmp 10.1.2.3 > 192.0.2.9");
  EXPECT_EQ(key_text(KeyMode::src_ip, arp), "non-IP");
}

TEST(FlowKeyText, ProtocolNamesAndTheNumberOfTheRest) {
  EXPECT_EQ(protocol_name(6), "tcp");
  EXPECT_EQ(protocol_name(17), "udp");
  EXPECT_EQ(protocol_name(1), "icmp");
  EXPECT_EQ(protocol_name(58), "icmpv6");
  EXPECT_EQ(protocol_name(132), "sctp");
  EXPECT_EQ(protocol_name(47), "proto 47");
  EXPECT_EQ(protocol_name(0), "proto 0");
}

}  // namespace
