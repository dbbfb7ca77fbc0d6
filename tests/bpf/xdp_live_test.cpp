// The XDP backend live (issue 12 item 6): XdpBackend attached in native and in skb mode to a
// veth end in a namespace the test creates, tools/sluice-sender pacing 4 flows at a known rate
// into the other end on the kernel clock. Per flow (one rule each, so the rule's counters are
// the flow's): the counters equal the packets sent, the admitted count matches the exact
// token-bucket model over the sender's actual first-to-last send time (within 3 packets or
// 3%), and a live rate change (set_rules, the bucket kept) takes effect at once.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "veth_namespace.hpp"
#include "xdp_backend.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using namespace xdp_test;

constexpr int kFlows = 4;
constexpr double kBurst = 100;         // per flow; B/r = 0.5 s absorbs a late sender wake-up
constexpr double kSendPpsPerFlow = 500;
constexpr double kSeconds = 2;

struct Sent {
  uint64_t packets = 0;
  double duration_s = 0;
};

double json_number(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  return at == std::string::npos ? -1 : std::atof(json.c_str() + at + key.size() + 4);
}

// sluice-sender on `iface`: kFlows flows from 198.18.0.1 + i, round robin.
Sent send(const std::string& iface) {
  const char* sender = std::getenv("SENDER");
  EXPECT_NE(sender, nullptr) << "SENDER (tools/sluice-sender) is not set; meson sets it";
  if (!sender) return {};
  testing::ChildProcess p({sender, "--iface", iface, "--pps", std::to_string(kFlows * kSendPpsPerFlow),
                           "--seconds", std::to_string(kSeconds), "--flows", std::to_string(kFlows)});
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(30)), 0) << p.err();
  Sent s;
  s.packets = uint64_t(json_number(p.out(), "packets"));
  s.duration_s = json_number(p.out(), "duration_s");
  EXPECT_GT(s.packets, 0u) << p.out();
  return s;
}

std::string rules_yaml(int rate_pps) {
  std::string y = "default: {action: pass}\nrules:\n";
  for (int i = 0; i < kFlows; ++i)
    y += "  - {name: flow" + std::to_string(i) + ", match: {src: 198.18.0." + std::to_string(i + 1) +
         "/32, proto: udp}, key: none, algorithm: token-bucket, rate: " + std::to_string(rate_pps) +
         "pps, burst: " + std::to_string(int(kBurst)) + ", action: drop}\n";
  return y;
}

// Packets of flow i among n sent round robin.
uint64_t flow_share(uint64_t n, int i) { return n / kFlows + (uint64_t(i) < n % kFlows ? 1 : 0); }

void expect_near(double got, double want, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), std::max(3.0, 0.03 * want)) << what << ": " << got
                                                                 << " admitted, model " << want;
}

void live(xdp::AttachMode mode) {
  VethNamespace ns;
  ASSERT_TRUE(ns.ok());
  constexpr int kRate = 200, kNewRate = 400;
  auto backend = xdp::XdpBackend::attach(ns.a(), mode, rules_from(rules_yaml(kRate)));
  ASSERT_TRUE(backend.ok()) << backend.error().message;

  // Phase 1: 500 pps per flow against 200 pps, burst 100, from a full bucket: the bucket never
  // fills again, so the model admits B + r * (last send - first send), capped at the sent.
  const Sent one = send(ns.b());
  auto c1 = (*backend)->counters();
  ASSERT_TRUE(c1.ok()) << c1.error().message;
  std::vector<uint64_t> admitted1(kFlows);
  for (int i = 0; i < kFlows; ++i) {
    const TrafficCounters& t = c1->per_rule[size_t(i)];
    const uint64_t sent = flow_share(one.packets, i);
    EXPECT_EQ(t.pkts(Outcome::matched), sent) << "flow " << i;
    EXPECT_EQ(t.pkts(Outcome::conformed) + t.pkts(Outcome::dropped), sent) << "flow " << i;
    admitted1[size_t(i)] = t.pkts(Outcome::conformed);
    expect_near(double(admitted1[size_t(i)]),
                std::min(double(sent), kBurst + kRate * one.duration_s), "flow " + std::to_string(i));
  }

  // Phase 2: the rate doubled live. The buckets are kept (tokens carried, at most B), so the
  // second run admits what they held plus 400 pps: at least r' * T, at most B + r' * T; the
  // old rate would give at most B + 200 * T.
  Status s = (*backend)->set_rules(rules_from(rules_yaml(kNewRate)));
  ASSERT_TRUE(s.ok()) << s.error().message;
  const Sent two = send(ns.b());
  auto c2 = (*backend)->counters();
  ASSERT_TRUE(c2.ok()) << c2.error().message;
  for (int i = 0; i < kFlows; ++i) {
    const TrafficCounters& t = c2->per_rule[size_t(i)];
    const uint64_t sent = flow_share(two.packets, i);
    EXPECT_EQ(t.pkts(Outcome::matched), flow_share(one.packets, i) + sent) << "flow " << i;
    const double admitted = double(t.pkts(Outcome::conformed) - admitted1[size_t(i)]);
    const double floor = kNewRate * two.duration_s;
    EXPECT_GE(admitted, floor - std::max(3.0, 0.03 * floor)) << "flow " << i;
    EXPECT_LE(admitted, kBurst + floor + std::max(3.0, 0.03 * floor)) << "flow " << i;
  }
  EXPECT_TRUE((*backend)->detach().ok());
}

TEST(XdpLive, NativeModeMatchesTheModelAndTakesALiveRateChange) { live(xdp::AttachMode::native); }

TEST(XdpLive, SkbModeMatchesTheModelAndTakesALiveRateChange) { live(xdp::AttachMode::skb); }

}  // namespace
}  // namespace sluice
