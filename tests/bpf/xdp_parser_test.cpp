// The XDP program's parser against the core's (SPEC §6), through BPF_PROG_TEST_RUN on the real
// verifier: the malformed cases of tests/unit/frame_parser_malformed_test.cpp, every truncation
// of valid frames and mutated / random frames, each judged by the core's parse_frame as the
// reference. A malformed frame is counted `malformed` on the default slot and gets the default
// action; nothing else is.
#include <random>

#include "frame_parser_fixtures.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using namespace parser_test;
using namespace xdp_test;

struct Case {
  std::string name;
  Bytes frame;
};

// The SPEC §6 cases of the core's malformed suite (frames of at least 14 bytes: the kernel's
// BPF_PROG_TEST_RUN refuses shorter input, as no NIC delivers it).
std::vector<Case> malformed_cases() {
  std::vector<Case> c;
  Bytes one = PacketBuilder().vlan(10).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  for (size_t n = 14; n < 18; ++n) c.push_back({"truncated vlan tag", Bytes(one.begin(), one.begin() + n)});
  Bytes two = PacketBuilder().vlan(10).vlan(20).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  for (size_t n = 18; n < 22; ++n) c.push_back({"truncated inner tag", Bytes(two.begin(), two.begin() + n)});
  Bytes three = PacketBuilder().vlan(1).vlan(2).vlan(3).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  c.push_back({"three vlan tags", three});
  Bytes good = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  for (uint8_t ihl = 0; ihl < 5; ++ihl) {
    Bytes f = good;
    f[14] = uint8_t(0x40 | ihl);
    fix_ipv4_checksum(f, 14);
    c.push_back({"IHL " + std::to_string(ihl), f});
  }
  Bytes ihl_past = good;
  ihl_past[14] = 0x4f;
  c.push_back({"IHL past frame", ihl_past});
  Bytes v4 = good;
  v4[14] = 0x65;
  c.push_back({"version 6 under 0x0800", v4});
  Bytes v6 = PacketBuilder().ipv6("::1", "::2").udp(1, 2).build();
  v6[14] = uint8_t(0x40 | (v6[14] & 0x0f));
  c.push_back({"version 4 under 0x86dd", v6});
  Bytes v4h = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").build();
  for (size_t n = 14; n < 34; ++n) c.push_back({"truncated ipv4 header", Bytes(v4h.begin(), v4h.begin() + n)});
  Bytes v6h = PacketBuilder().ipv6("::1", "::2").build();
  for (size_t n = 14; n < 54; ++n) c.push_back({"truncated ipv6 header", Bytes(v6h.begin(), v6h.begin() + n)});
  Bytes tl = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(10).build();
  put16(tl, 16, uint16_t(tl.size() - 14 + 1));
  fix_ipv4_checksum(tl, 14);
  c.push_back({"ipv4 total length one past", tl});
  put16(tl, 16, 0xffff);
  fix_ipv4_checksum(tl, 14);
  c.push_back({"ipv4 total length 0xffff", tl});
  Bytes below = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_options(8).udp(1, 2).build();
  put16(below, 16, 24);
  fix_ipv4_checksum(below, 14);
  c.push_back({"ipv4 total length below IHL", below});
  Bytes pl = PacketBuilder().ipv6("::1", "::2").udp(1, 2).payload(10).build();
  put16(pl, 18, uint16_t(pl.size() - 54 + 1));
  c.push_back({"ipv6 payload length one past", pl});
  const std::pair<uint8_t, size_t> cut[] = {{6, 19}, {17, 7}, {132, 11}, {6, 0}, {17, 3}, {1, 3}};
  for (auto [proto, have] : cut) {
    const std::string n = "proto " + std::to_string(proto) + " cut at " + std::to_string(have);
    c.push_back({n + " v4", PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").proto(proto).payload(have).build()});
    c.push_back({n + " v6", PacketBuilder().ipv6("::1", "::2").proto(proto == 1 ? 58 : proto).payload(have).build()});
    c.push_back({n + " vlan v6", PacketBuilder().vlan(3).ipv6("::1", "::2").proto(proto).payload(have).build()});
  }
  PacketBuilder nine;
  nine.ipv6("::1", "::2").udp(1, 2);
  for (int i = 0; i < 9; ++i) nine.ipv6_ext(60, 8);
  c.push_back({"nine extension headers", nine.build()});
  Bytes base = PacketBuilder().ipv6("::1", "::2").ipv6_ext(0, 8).ipv6_ext(43, 16).udp(1, 2).build();
  Bytes rh = base;
  rh[54 + 8 + 1] = 200;
  c.push_back({"ext length past payload", rh});
  Bytes mid(base.begin(), base.begin() + 54 + 8 + 12);
  put16(mid, 18, 8 + 12);
  c.push_back({"payload ends inside a header", mid});
  Bytes none_left(base.begin(), base.begin() + 54 + 8);
  put16(none_left, 18, 8);
  c.push_back({"chain announces a header with no bytes left", none_left});
  Bytes shorter = base;
  put16(shorter, 18, 8 + 4);
  c.push_back({"payload length shorter than the chain", shorter});
  c.push_back({"ipv4 first fragment with cut L4", PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(0, true).proto(6).payload(10).build()});
  c.push_back({"ipv6 first fragment with cut L4", PacketBuilder().ipv6("::1", "::2").ipv6_fragment(0, true).proto(17).payload(5).build()});
  return c;
}

// Valid frames of every shape the parser knows, and their truncations.
std::vector<Bytes> valid_frames() {
  return {
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(5).frame_size(60).build(),
      PacketBuilder().vlan(1).vlan(2).ipv4("10.0.0.1", "10.0.0.2").ipv4_options(12).tcp(1, 2).build(),
      PacketBuilder().vlan(9).ipv6("::1", "::2").ipv6_ext(0, 8).ipv6_ext(51, 16).ipv6_fragment(0, true).sctp(1, 2).build(),
      PacketBuilder().ipv6("::1", "::2").ipv6_ext(60, 8).ipv6_fragment(3, true).udp(1, 2).build(),
      PacketBuilder().ipv6("::1", "::2").icmp().build(),
      PacketBuilder().ipv6("::1", "::2").ipv6_ext(60, 2048).udp(3, 4).build(),
      PacketBuilder().ipv4("10.9.8.7", "10.6.5.4").ipv4_fragment(185, true).udp(4000, 53).payload(20).build(),
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(1, false).proto(6).payload(2).build(),
      PacketBuilder().ipv6("::1", "::2").proto(50).payload(16, 0x00).build(),
      PacketBuilder().vlan(4).ethertype(0x0806).payload(28).build(),
      PacketBuilder().vlan_tpid(7, 0x8100).vlan(8).ipv6("2001:db8::1", "2001:db8::2").tcp(80, 443).build(),
  };
}

class XdpParser : public ::testing::Test {
 protected:
  void SetUp() override {
    prog_ = load_test_program();
    ASSERT_NE(prog_, nullptr);
    ASSERT_TRUE(prog_->set_rules(rules_from("default: {action: pass}\nrules: []\n")).ok());
  }

  // Runs the frame and checks it against the core's parse: malformed counted exactly when the
  // core says so, and the frame passed untouched (default action pass).
  void expect_same_as_core(const Bytes& f, const std::string& what) {
    SCOPED_TRACE(what + " (" + std::to_string(f.size()) + " bytes)");
    const bool core_malformed = parse_exact(f).status == FrameStatus::malformed;
    auto r = run_at(*prog_, f, 1000);
    EXPECT_EQ(r.verdict, uint32_t(XDP_PASS));
    EXPECT_EQ(r.frame, f);
    const TrafficCounters d = counters_of(*prog_, 0);
    EXPECT_EQ(d.pkts(Outcome::malformed) - malformed_, core_malformed ? 1u : 0u);
    EXPECT_EQ(d.pkts(Outcome::matched) - matched_, 1u);
    malformed_ = d.pkts(Outcome::malformed);
    matched_ = d.pkts(Outcome::matched);
    seen_malformed_ += core_malformed;
  }

  std::unique_ptr<xdp::XdpProgram> prog_;
  uint64_t malformed_ = 0, matched_ = 0, seen_malformed_ = 0;
};

TEST_F(XdpParser, MalformedCasesOfSpec6AreMalformed) {
  for (const Case& c : malformed_cases()) {
    ASSERT_EQ(parse_exact(c.frame).status, FrameStatus::malformed) << c.name;  // the fixture holds
    expect_same_as_core(c.frame, c.name);
  }
  const TrafficCounters d = counters_of(*prog_, 0);
  EXPECT_EQ(d.pkts(Outcome::malformed), malformed_cases().size());
  EXPECT_EQ(d.pkts(Outcome::passed), malformed_cases().size());
}

TEST_F(XdpParser, ValidFramesAreNotMalformed) {
  for (const Bytes& f : valid_frames()) {
    ASSERT_EQ(parse_exact(f).status, FrameStatus::ok);
    expect_same_as_core(f, "valid");
  }
  EXPECT_EQ(counters_of(*prog_, 0).pkts(Outcome::malformed), 0u);
}

TEST_F(XdpParser, EveryTruncationAgreesWithTheCore) {
  for (const Bytes& f : valid_frames())
    for (size_t n = 14; n <= f.size(); ++n) expect_same_as_core(Bytes(f.begin(), f.begin() + n), "truncation");
  EXPECT_GT(seen_malformed_, 100u);
}

TEST_F(XdpParser, MutatedAndRandomFramesAgreeWithTheCore) {
  std::mt19937 rng(12);
  const std::vector<Bytes> seeds = valid_frames();
  for (int i = 0; i < 1500; ++i) {
    Bytes f = seeds[rng() % seeds.size()];
    for (int flips = 1 + int(rng() % 4); flips > 0; --flips) {
      // Flip bytes in the headers (the first 80), where the parser looks.
      f[rng() % std::min<size_t>(f.size(), 80)] = uint8_t(rng());
    }
    if (rng() % 3 == 0) f.resize(14 + rng() % (f.size() - 13));
    expect_same_as_core(f, "mutation #" + std::to_string(i));
    if (HasFailure()) return;
  }
  EXPECT_GT(seen_malformed_, 100u);
}

}  // namespace
}  // namespace sluice
