// Every action of the XDP program, frame in -> verdict and frame out, through
// BPF_PROG_TEST_RUN with the test clock: drop, DSCP marking (IPv4 with its checksum, IPv6
// traffic class, through VLAN tags), dry run, meter colours, the default action; and what the
// loader refuses (shaping, too many rules) changes nothing.
#include "frame.hpp"
#include "frame_parser_fixtures.hpp"
#include "frame_rewrite.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using namespace xdp_test;

constexpr uint64_t kT0 = 5'000'000'000;

class XdpActions : public ::testing::Test {
 protected:
  void load(const std::string& yaml) {
    prog_ = load_test_program();
    ASSERT_NE(prog_, nullptr);
    Status s = prog_->set_rules(rules_from(yaml));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  xdp::XdpProgram::RunResult run(const Bytes& f, uint64_t now = kT0) { return run_at(*prog_, f, now); }
  std::unique_ptr<xdp::XdpProgram> prog_;
};

// The core's marking of the same frame: the XDP output must be byte for byte the same.
Bytes core_marked(Bytes f, uint8_t dscp) {
  ParsedFrame pf = parse_frame(f.data(), uint32_t(f.size()));
  EXPECT_TRUE(mark_dscp(f.data(), uint32_t(f.size()), pf, dscp));
  return f;
}

bool ipv4_checksum_ok(const Bytes& f, size_t l3) {
  const size_t ihl = (f[l3] & 0x0f) * 4u;
  uint32_t sum = 0;
  for (size_t i = 0; i < ihl; i += 2) sum += uint32_t(f[l3 + i] << 8 | f[l3 + i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

TEST_F(XdpActions, DropAfterTheBurst) {
  load("rules:\n  - {name: r, match: {proto: udp}, key: none, rate: 1pps, burst: 2, "
       "algorithm: token-bucket, action: drop}\n");
  const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  auto a = run(f), b = run(f), c = run(f);
  EXPECT_EQ(a.verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(a.frame, f);
  EXPECT_EQ(b.verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(c.verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(run(f, kT0 + 1'000'000'000).verdict, uint32_t(XDP_PASS));  // one token a second
  const TrafficCounters t = counters_of(*prog_, 0);
  EXPECT_EQ(t.pkts(Outcome::matched), 4u);
  EXPECT_EQ(t.pkts(Outcome::conformed), 3u);
  EXPECT_EQ(t.pkts(Outcome::passed), 3u);
  EXPECT_EQ(t.pkts(Outcome::exceeded), 1u);
  EXPECT_EQ(t.pkts(Outcome::dropped), 1u);
  EXPECT_EQ(t.byts(Outcome::matched), 4 * f.size());
}

TEST_F(XdpActions, MarkIPv4RewritesTosAndChecksum) {
  load("rules:\n  - {name: r, match: {proto: tcp}, key: src-ip, rate: 1pps, burst: 1, "
       "algorithm: gcra, action: mark-dscp:EF}\n");
  Bytes f = PacketBuilder().vlan(5).ipv4("10.0.0.1", "10.0.0.2", 10).tcp(1, 2).payload(30).build();
  f[18 + 1] |= 0x02;  // an ECN bit, which marking must keep
  parser_test::fix_ipv4_checksum(f, 18);
  ASSERT_TRUE(ipv4_checksum_ok(f, 18));
  EXPECT_EQ(run(f).frame, f);  // conforming: untouched
  auto r = run(f);
  EXPECT_EQ(r.verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(r.frame[18 + 1], uint8_t(46 << 2 | 0x02));
  EXPECT_TRUE(ipv4_checksum_ok(r.frame, 18));
  EXPECT_EQ(r.frame, core_marked(f, 46));
  EXPECT_EQ(counters_of(*prog_, 0).pkts(Outcome::marked), 1u);
}

TEST_F(XdpActions, MarkIPv6RewritesTrafficClassOnly) {
  load("rules:\n  - {name: r, match: {src: 2001:db8::/32}, key: 5-tuple, window: 1s, limit: 1, "
       "algorithm: fixed-window, action: mark-dscp:AF11}\n");
  Bytes f = PacketBuilder().vlan(1).vlan(2).ipv6("2001:db8::1", "2001:db8::2", 63).udp(7, 8).build();
  f[22 + 1] |= 0x3f;  // ECN and the flow label's top nibble
  f[22 + 2] = 0xa5;
  run(f);
  auto r = run(f);
  EXPECT_EQ(r.verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(r.frame, core_marked(f, 10));
  EXPECT_NE(r.frame, f);
  EXPECT_EQ(counters_of(*prog_, 0).pkts(Outcome::marked), 1u);
}

TEST_F(XdpActions, PassIsADryRun) {
  load("rules:\n  - {name: r, match: {}, key: none, rate: 1pps, burst: 1, "
       "algorithm: token-bucket, action: pass}\n");
  const Bytes f = PacketBuilder().ipv6("::1", "::2").icmp().build();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run(f).verdict, uint32_t(XDP_PASS));
  const TrafficCounters t = counters_of(*prog_, 0);
  EXPECT_EQ(t.pkts(Outcome::exceeded), 2u);
  EXPECT_EQ(t.pkts(Outcome::passed), 3u);
  EXPECT_EQ(t.pkts(Outcome::dropped), 0u);
}

TEST_F(XdpActions, MeterColoursTakeTheirActions) {
  load("rules:\n  - {name: m, match: {proto: udp}, key: none, algorithm: srtcm, rate: 1pps, "
       "burst: 1, excess-burst: 1, actions: {green: pass, yellow: mark-dscp:AF13, red: drop}}\n");
  const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  auto g = run(f), y = run(f), r = run(f);
  EXPECT_EQ(g.verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(g.frame, f);
  EXPECT_EQ(y.verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(y.frame, core_marked(f, 14));
  EXPECT_EQ(r.verdict, uint32_t(XDP_DROP));
  const TrafficCounters t = counters_of(*prog_, 0);
  EXPECT_EQ(t.pkts(Outcome::green), 1u);
  EXPECT_EQ(t.pkts(Outcome::yellow), 1u);
  EXPECT_EQ(t.pkts(Outcome::red), 1u);
  EXPECT_EQ(t.pkts(Outcome::conformed), 1u);
  EXPECT_EQ(t.pkts(Outcome::exceeded), 2u);
}

TEST_F(XdpActions, DefaultActionForUnmatchedAndMalformed) {
  load("default: {action: drop}\nrules:\n  - {name: r, match: {proto: tcp}, key: none, "
       "rate: 1pps, burst: 1, algorithm: token-bucket, action: drop}\n");
  const Bytes udp = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  Bytes bad = udp;
  bad[14] = 0x44;  // IHL 4
  EXPECT_EQ(run(udp).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(run(bad).verdict, uint32_t(XDP_DROP));
  const TrafficCounters d = counters_of(*prog_, 1);  // the default slot follows the one rule
  EXPECT_EQ(d.pkts(Outcome::matched), 2u);
  EXPECT_EQ(d.pkts(Outcome::malformed), 1u);
  EXPECT_EQ(d.pkts(Outcome::dropped), 2u);
  EXPECT_EQ(counters_of(*prog_, 0).pkts(Outcome::matched), 0u);
}

TEST_F(XdpActions, DefaultMarkPassesWhatIsNotIP) {
  load("default: {action: mark-dscp:CS1}\nrules: []\n");
  const Bytes arp = PacketBuilder().ethertype(0x0806).payload(28).build();
  const Bytes v4 = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  EXPECT_EQ(run(arp).frame, arp);
  EXPECT_EQ(run(v4).frame, core_marked(v4, 8));
  const TrafficCounters d = counters_of(*prog_, 0);
  EXPECT_EQ(d.pkts(Outcome::passed), 1u);
  EXPECT_EQ(d.pkts(Outcome::marked), 1u);
}

TEST_F(XdpActions, ShapingIsRefusedNamingTheDpdkBackend) {
  load("rules:\n  - {name: r, match: {proto: udp}, key: none, rate: 1pps, burst: 1, "
       "algorithm: token-bucket, action: drop}\n");
  const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  EXPECT_EQ(run(f).verdict, uint32_t(XDP_PASS));
  Status s = prog_->set_rules(rules_from(
      "rules:\n  - {name: shaper, match: {}, key: none, rate: 1Mbit, burst: 16KiB, "
      "algorithm: leaky-bucket, max-delay: 5ms}\n"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("\"shaper\""), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("DPDK backend"), std::string::npos) << s.error().message;
  EXPECT_EQ(run(f).verdict, uint32_t(XDP_DROP));  // the old rule still holds, its bucket too
}

TEST_F(XdpActions, MoreRulesThanTheLimitAreRefused) {
  load("rules: []\n");
  std::string yaml = "rules:\n";
  for (int i = 0; i <= SL_XDP_MAX_RULES; ++i)
    yaml += "  - {name: r" + std::to_string(i) + ", match: {dst-port: " + std::to_string(i + 1) +
            "}, key: none, rate: 1pps, burst: 1, algorithm: token-bucket, action: drop}\n";
  Status s = prog_->set_rules(rules_from(yaml));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("at most 256 rules"), std::string::npos) << s.error().message;
}

TEST_F(XdpActions, TheLastOfTheMostRulesMatches) {
  std::string yaml = "rules:\n";
  for (int i = 0; i < SL_XDP_MAX_RULES; ++i)
    yaml += "  - {name: r" + std::to_string(i) + ", match: {proto: udp, dst-port: " +
            std::to_string(i + 1) + "}, key: none, rate: 1pps, burst: 1, algorithm: token-bucket, "
            "action: drop}\n";
  load(yaml);
  const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(9, SL_XDP_MAX_RULES).build();
  EXPECT_EQ(run(f).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(run(f).verdict, uint32_t(XDP_DROP));
  auto all = prog_->counters();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->per_rule[SL_XDP_MAX_RULES - 1].pkts(Outcome::matched), 2u);
  EXPECT_EQ(all->per_rule[0].pkts(Outcome::matched), 0u);
}

}  // namespace
}  // namespace sluice
