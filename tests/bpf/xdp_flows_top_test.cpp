// `flows top` on the XDP backend: traces through BPF_PROG_TEST_RUN with the test clock, the
// flow table sampled before and after (XdpProgram::sample_flows), ranked by rank_flows. Known
// heavy keys come first with their exact rates over the interval; what came before the first
// sample does not count; filters by rule, order by bits, count, key formats.
#include "frame_parser_fixtures.hpp"
#include "xdp_flows_top.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using namespace xdp_test;

constexpr uint64_t kT0 = 5'000'000'000;
constexpr uint64_t kSecond = 1'000'000'000;

class XdpFlowsTop : public ::testing::Test {
 protected:
  void SetUp() override {
    prog_ = load_test_program();
    ASSERT_NE(prog_, nullptr);
    // Limits far above the trace: every packet is charged to its flow and passes.
    Status s = prog_->set_rules(rules_from(
        "rules:\n"
        "  - {name: dns, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 1Mpps, "
        "burst: 1000, algorithm: token-bucket, action: drop}\n"
        "  - {name: web, match: {proto: tcp}, key: 5-tuple, rate: 1Gbit, burst: 1MiB, "
        "algorithm: gcra, action: drop}\n"
        "  - {name: all-udp, match: {proto: udp}, key: none, rate: 1Mpps, burst: 1000, "
        "algorithm: token-bucket, action: drop}\n"));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  // n frames spread evenly over [from, from + span).
  void send(const Bytes& f, int n, uint64_t from, uint64_t span = kSecond) {
    for (int i = 0; i < n; ++i) run_at(*prog_, f, from + span * uint64_t(i) / uint64_t(n));
  }
  xdp::FlowSample sample_at(uint64_t now_ns) {
    EXPECT_TRUE(prog_->set_test_now(now_ns).ok());
    auto s = prog_->sample_flows();
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return s.ok() ? *s : xdp::FlowSample{};
  }
  std::vector<FlowRate> top(const xdp::FlowSample& a, const xdp::FlowSample& b,
                            TopFlowsQuery q) {
    auto r = xdp::rank_flows(prog_->rules().rules, prog_->entries(), a, b, q);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : std::vector<FlowRate>{};
  }
  static Bytes dns_from(const std::string& src, size_t payload = 20) {
    return PacketBuilder().ipv4(src, "192.0.2.53").udp(4000, 53).payload(payload).build();
  }
  std::unique_ptr<xdp::XdpProgram> prog_;
};

TEST_F(XdpFlowsTop, HeavyKeysFirstWithTheirRatesOverTheInterval) {
  const Bytes heavy = dns_from("10.0.0.1"), medium = dns_from("10.0.0.2"),
              light = dns_from("10.0.0.3"), idle = dns_from("10.0.0.4");
  // Before the first sample: the light and idle flows were busy; that must not count.
  send(light, 300, kT0 - kSecond);
  send(idle, 200, kT0 - kSecond);
  const xdp::FlowSample before = sample_at(kT0);
  send(heavy, 50, kT0);
  send(medium, 20, kT0);
  send(light, 5, kT0);
  const xdp::FlowSample after = sample_at(kT0 + kSecond);

  TopFlowsQuery q;
  q.count = 10;
  const std::vector<FlowRate> t = top(before, after, q);
  ASSERT_EQ(t.size(), 3u);  // the idle flow sent nothing in the interval
  EXPECT_EQ(t[0].key, "10.0.0.1");
  EXPECT_EQ(t[1].key, "10.0.0.2");
  EXPECT_EQ(t[2].key, "10.0.0.3");
  EXPECT_EQ(t[0].rule, "dns");
  EXPECT_DOUBLE_EQ(t[0].packets_per_sec, 50);
  EXPECT_DOUBLE_EQ(t[1].packets_per_sec, 20);
  EXPECT_DOUBLE_EQ(t[2].packets_per_sec, 5);
  EXPECT_DOUBLE_EQ(t[0].bits_per_sec, 50.0 * double(heavy.size()) * 8);

  q.count = 2;
  const std::vector<FlowRate> two = top(before, after, q);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].key, "10.0.0.2");
}

TEST_F(XdpFlowsTop, ByBitsRanksBigFramesFirst) {
  const Bytes small = dns_from("10.0.0.1", 20), big = dns_from("10.0.0.2", 1200);
  const xdp::FlowSample before = sample_at(kT0);
  send(small, 100, kT0);
  send(big, 10, kT0);
  const xdp::FlowSample after = sample_at(kT0 + 2 * kSecond);
  TopFlowsQuery q;
  std::vector<FlowRate> t = top(before, after, q);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].key, "10.0.0.1");  // by packets: 50 pps against 5
  EXPECT_DOUBLE_EQ(t[0].packets_per_sec, 50);
  q.by_bytes = true;
  t = top(before, after, q);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].key, "10.0.0.2");  // by bits: 5 x 1242 B/s against 50 x 62 B/s
  EXPECT_DOUBLE_EQ(t[0].bits_per_sec, 5.0 * double(big.size()) * 8);
}

TEST_F(XdpFlowsTop, OneRulesFlowsWithTheirKeysAsAnOperatorReadsThem) {
  const Bytes tcp =
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80).payload(10).build();
  const Bytes tcp6 =
      PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").tcp(40001, 443).payload(10).build();
  const xdp::FlowSample before = sample_at(kT0);
  send(dns_from("10.0.0.9"), 90, kT0);  // busier, but another rule's
  send(tcp, 30, kT0);
  send(tcp6, 20, kT0);
  const xdp::FlowSample after = sample_at(kT0 + kSecond);
  TopFlowsQuery q;
  q.rule = "web";
  const std::vector<FlowRate> t = top(before, after, q);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].rule, "web");
  EXPECT_EQ(t[0].key, "tcp 10.0.0.1:40000 > 10.0.0.2:80");
  EXPECT_EQ(t[1].key, "tcp [2001:db8::1]:40001 > [2001:db8::2]:443");
  EXPECT_DOUBLE_EQ(t[1].packets_per_sec, 20);
}

TEST_F(XdpFlowsTop, CountsEveryPacketChargedIncludingRefusedOnes) {
  Status s = prog_->set_rules(rules_from(
      "rules:\n  - {name: tight, match: {proto: udp}, key: src-ip, rate: 1pps, burst: 2, "
      "algorithm: token-bucket, action: drop}\n"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  const xdp::FlowSample before = sample_at(kT0);
  send(dns_from("10.0.0.1"), 40, kT0);  // 2 or 3 pass, the rest dropped: all 40 are its traffic
  const xdp::FlowSample after = sample_at(kT0 + kSecond);
  const std::vector<FlowRate> t = top(before, after, TopFlowsQuery{});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0].packets_per_sec, 40);
}

// stats' active flows: a rule's flows in the table not idle past its idle timeout (60 s).
TEST_F(XdpFlowsTop, ActiveFlowsAreTheOnesNotIdlePastTheTimeout) {
  send(dns_from("10.0.0.1"), 1, kT0);
  send(dns_from("10.0.0.2"), 1, kT0);
  const Bytes tcp = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80).build();
  send(tcp, 1, kT0);
  std::vector<uint64_t> active = xdp::active_flows(prog_->entries(), sample_at(kT0 + kSecond));
  ASSERT_EQ(active.size(), 3u);
  EXPECT_EQ(active[0], 2u);  // dns: 10.0.0.1, 10.0.0.2
  EXPECT_EQ(active[1], 1u);  // web
  EXPECT_EQ(active[2], 0u);  // all-udp is an aggregate: no flows
  send(dns_from("10.0.0.3"), 1, kT0 + 30 * kSecond);
  active = xdp::active_flows(prog_->entries(), sample_at(kT0 + 61 * kSecond));
  EXPECT_EQ(active[0], 1u);  // only 10.0.0.3 seen within the last 60 s
  EXPECT_EQ(active[1], 0u);
}

TEST_F(XdpFlowsTop, AnUnknownRuleOrNoIntervalIsRefused) {
  const xdp::FlowSample a = sample_at(kT0);
  TopFlowsQuery q;
  q.rule = "no-such-rule";
  auto r = xdp::rank_flows(prog_->rules().rules, prog_->entries(), a, sample_at(kT0 + 1), q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no-such-rule"), std::string::npos);
  EXPECT_FALSE(xdp::rank_flows(prog_->rules().rules, prog_->entries(), a, a, TopFlowsQuery{}).ok());
}

TEST(XdpFlowKeyFormat, EveryKeyMode) {
  sl_flow_key k{};
  const uint8_t src[4] = {198, 18, 1, 7}, dst[4] = {192, 0, 2, 53};
  std::memcpy(&k.w[1], src, 4);
  std::memcpy(reinterpret_cast<uint8_t*>(&k.w[1]) + 4, dst, 4);
  auto with = [&](uint64_t meta) {
    sl_flow_key c = k;
    c.w[0] = meta | uint64_t(4) << 8;
    return xdp::format_flow_key(c);
  };
  EXPECT_EQ(with(SL_KEY_SRC_IP), "198.18.1.7");
  EXPECT_EQ(with(SL_KEY_DST_IP), "192.0.2.53");
  EXPECT_EQ(with(SL_KEY_SRC_DST), "198.18.1.7 > 192.0.2.53");
  EXPECT_EQ(with(SL_KEY_SRC_PREFIX | uint64_t(24) << 16), "198.18.1.7/24");
  EXPECT_EQ(with(SL_KEY_FIVE_TUPLE | uint64_t(17) << 24 | uint64_t(5353) << 32 |
                 uint64_t(53) << 48),
            "udp 198.18.1.7:5353 > 192.0.2.53:53");
}

}  // namespace
}  // namespace sluice
