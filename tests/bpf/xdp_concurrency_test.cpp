// Buckets shared by CPUs: threads drive BPF_PROG_TEST_RUN (each run `repeat` times in the
// kernel, on whichever CPU the thread is on) against one aggregate bucket at one test-clock
// instant, so nothing refills: exactly the burst conforms however the CPUs interleave, for the
// single-word compare-and-swap (token-bucket, gcra, windows) and for the meters' sequence claim.
// The bursts are large enough that both threads are still being admitted while they overlap.
#include <thread>
#include <vector>

#include "packet_builder.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using namespace xdp_test;

constexpr int kThreads = 4;
constexpr uint32_t kPerThread = 200000;
constexpr uint64_t kTotal = uint64_t(kThreads) * kPerThread + 1;

TrafficCounters hammer(const std::string& rule) {
  auto prog = load_test_program();
  if (!prog) return {};
  EXPECT_TRUE(prog->set_rules(rules_from("rules:\n  - " + rule + "\n")).ok());
  EXPECT_TRUE(prog->set_test_now(7'000'000'000).ok());
  const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  auto drive = [&] {
    for (int i = 0; i < 4; ++i) {
      auto r = prog->test_run(f.data(), uint32_t(f.size()), kPerThread / 4);
      EXPECT_TRUE(r.ok());
    }
  };
  // One packet first, alone: it initialises the bucket (a race of its own, checked elsewhere).
  EXPECT_TRUE(prog->test_run(f.data(), uint32_t(f.size()), 1).ok());
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(drive);
  for (std::thread& t : threads) t.join();
  TrafficCounters t = counters_of(*prog, 0);
  EXPECT_EQ(t.pkts(Outcome::matched), kTotal);
  return t;
}

TEST(XdpConcurrency, TokenBucketAdmitsExactlyItsBurst) {
  const TrafficCounters t = hammer("{name: r, match: {}, key: none, rate: 1000pps, burst: 300000, "
                                   "algorithm: token-bucket, action: drop}");
  EXPECT_EQ(t.pkts(Outcome::conformed), 300000u);
  EXPECT_EQ(t.pkts(Outcome::dropped), kTotal - 300000);
}

TEST(XdpConcurrency, FixedWindowCountsEveryCharge) {
  const TrafficCounters t = hammer("{name: r, match: {}, key: src-ip, window: 1h, limit: 300000, "
                                   "algorithm: fixed-window, action: drop}");
  EXPECT_EQ(t.pkts(Outcome::conformed), 300000u);
}

TEST(XdpConcurrency, MeterColoursExactlyItsBuckets) {
  const TrafficCounters t = hammer("{name: r, match: {}, key: none, algorithm: srtcm, "
                                   "rate: 1000pps, burst: 200000, excess-burst: 250000, "
                                   "actions: {green: pass, yellow: pass, red: drop}}");
  EXPECT_EQ(t.pkts(Outcome::green), 200000u);
  EXPECT_EQ(t.pkts(Outcome::yellow), 250000u);
  EXPECT_EQ(t.pkts(Outcome::red), kTotal - 450000);
}

// New flows claimed by several CPUs at once: threads send the same new sources in the same
// order at one instant, so most flows are first seen by two or more CPUs together. A flow
// created twice would have a second full bucket: exactly one packet per source conforms only
// if each flow has one slot, and the table then holds each source once.
void expect_each_flow_created_once(const std::string& rule) {
  constexpr int kSources = 3000;
  auto prog = load_test_program();
  ASSERT_NE(prog, nullptr);
  ASSERT_TRUE(prog->set_rules(rules_from("rules:\n  - " + rule + "\n")).ok());
  ASSERT_TRUE(prog->set_test_now(7'000'000'000).ok());
  std::vector<Bytes> frames;
  for (int i = 0; i < kSources; ++i)
    frames.push_back(PacketBuilder()
                         .ipv4("10." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ".1",
                               "10.255.0.2")
                         .udp(1, 2)
                         .build());
  auto drive = [&] {
    for (const Bytes& f : frames) EXPECT_TRUE(prog->test_run(f.data(), uint32_t(f.size()), 2).ok());
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(drive);
  for (std::thread& t : threads) t.join();
  const TrafficCounters t = counters_of(*prog, 0);
  EXPECT_EQ(t.pkts(Outcome::matched), uint64_t(kThreads) * kSources * 2);
  EXPECT_EQ(t.pkts(Outcome::conformed), uint64_t(kSources));
  auto flows = prog->flow_counts();
  ASSERT_TRUE(flows.ok()) << flows.error().message;
  EXPECT_EQ((*flows)[0].active, uint64_t(kSources));
  EXPECT_EQ((*flows)[0].evicted, 0u);
}

// A hashed table (sluice_flow_table.bpf.h sl_ft_claim: the claim's CAS and the re-read of the
// other candidates).
TEST(XdpConcurrency, FlowsCreatedOnSeveralCpusAtOnceAreCreatedOnce) {
  expect_each_flow_created_once("{name: r, match: {}, key: src-ip, rate: 1pps, burst: 1, "
                                "algorithm: token-bucket, action: drop, max-flows: 8192}");
}

// A dense table (sl_ft_claim_dense: one CAS on the key's own tag word): the sources' /24s
// under 10.0.0.0/12, 4,096 keys.
TEST(XdpConcurrency, DenseFlowsCreatedOnSeveralCpusAtOnceAreCreatedOnce) {
  expect_each_flow_created_once("{name: r, match: {src: 10.0.0.0/12}, key: src-prefix/24, "
                                "rate: 1pps, burst: 1, algorithm: token-bucket, action: drop, "
                                "max-flows: 8192}");
}

}  // namespace
}  // namespace sluice
