// End-to-end `sluiced --replay`: classification, bad frames, actions, keys, report, determinism.
#include "replay_common.hpp"

namespace sluice::testing {
namespace {

// ------------------------------------------------------------------ classification (§2)

TEST(ReplayClassification, VlanQinqAndIpv6ClassifiedByInnerHeaders) {
  Replay r;
  r.set_rules(R"(default: {action: pass}
rules:
  - name: outer100-tcp
    match: {vlan: 100, proto: tcp, dst-port: 80}
    key: none
    rate: 10pps
    burst: 2
    action: drop
  - name: v6-dns
    match: {dst: 2001:db8::/32, proto: udp, dst-port: 53}
    key: none
    rate: 10pps
    burst: 3
    action: drop
  - name: v4-dns
    match: {dst: 192.0.2.0/24, proto: udp, dst-port: 53}
    key: none
    rate: 10pps
    burst: 4
    action: drop
)");
  std::vector<Frame> trace;
  auto add = [&](int n, auto build) {
    for (int i = 0; i < n; ++i) {
      auto f = build();
      set_seq(f, uint32_t(trace.size()));
      trace.push_back(Frame{kT0 + trace.size() * kNsPerUs, f});
    }
  };
  auto v6 = [](PacketBuilder b) { return b.ipv6("2001:db8:1::5", "2001:db8::10").udp(999, 53).frame_size(100).build(); };
  auto v4 = [](PacketBuilder b) { return b.ipv4("10.1.0.1", "192.0.2.10").udp(999, 53).frame_size(100).build(); };
  add(10, [&] { return v6(PacketBuilder()); });
  add(10, [&] { return v6(PacketBuilder().vlan(7)); });
  add(10, [&] { return v4(PacketBuilder().vlan(7)); });
  add(10, [&] { return v4(PacketBuilder().vlan(100).vlan(200)); });
  add(10, [&] { return PacketBuilder().vlan(100).vlan(200).ipv6("2001:db8:1::5", "2001:db8::80").tcp(999, 80).frame_size(100).build(); });
  r.set_input(trace);
  run_ok(r);
  EXPECT_EQ(r.rule("outer100-tcp").u64("matched_packets"), 10u);
  EXPECT_EQ(r.rule("outer100-tcp").u64("passed_packets"), 2u);
  EXPECT_EQ(r.rule("v6-dns").u64("matched_packets"), 20u);
  EXPECT_EQ(r.rule("v6-dns").u64("passed_packets"), 3u);
  EXPECT_EQ(r.rule("v4-dns").u64("matched_packets"), 20u);
  EXPECT_EQ(r.rule("v4-dns").u64("passed_packets"), 4u);
  Json d = r.rule("default");
  EXPECT_EQ(d.u64("matched_packets"), 0u);
  EXPECT_EQ(d.u64("malformed_packets"), 0u);
  EXPECT_EQ(r.output().size(), 9u);
}

// ------------------------------------------------------------------ bad frames (§6)

class ReplayMalformed : public ::testing::TestWithParam<const char*> {};

TEST_P(ReplayMalformed, CountedUnderDefaultAndFollowTheDefaultAction) {
  const std::string default_action = GetParam();
  Replay r;
  r.set_rules("default: {action: " + default_action + "}\n" + R"(rules:
  - name: all-udp
    match: {proto: udp}
    key: none
    rate: 1Mpps
    burst: 1000
    action: drop
)");
  // 200 packets from tracegen, every 5th malformed (truncated / bad IHL / length past the
  // frame, IPv4 and IPv6), then hand-made ones: short Ethernet, a runaway IPv6 extension
  // chain, an IPv4 header cut short.
  std::string tracegen = env_or_die("TRACEGEN");
  std::string gen = r.dir().file("gen.pcap");
  ProcessResult g = run_process({tracegen, "--out", gen, "--packets", "200", "--flows", "8",
                                 "--ipv6-share", "0.5", "--malformed-every", "5", "--size", "120"},
                                r.dir());
  ASSERT_EQ(g.exit_code, 0) << g.err;
  std::vector<Frame> trace = read_pcap(gen);
  ASSERT_EQ(trace.size(), 200u);
  uint64_t t = trace.back().ts_ns;
  std::vector<uint8_t> short_eth(10, 0xff);
  auto runaway = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0, 16).udp(1, 53).build();
  runaway.resize(14 + 40 + 10);  // the hop-by-hop header runs off the end
  auto cut = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 53).build();
  cut.resize(14 + 12);
  for (auto* f : {&short_eth, &runaway, &cut}) trace.push_back(Frame{t += kNsPerUs, *f});
  r.set_input(trace);
  run_ok(r);

  const uint64_t malformed = 40 + 3;
  Json d = r.rule("default");
  EXPECT_EQ(d.u64("malformed_packets"), malformed);
  EXPECT_EQ(r.rule("all-udp").u64("matched_packets"), trace.size() - malformed);
  auto out = r.output();
  if (default_action == "drop") {
    EXPECT_EQ(out.size(), trace.size() - malformed);
    EXPECT_EQ(d.u64("dropped_packets"), malformed);
  } else {
    EXPECT_EQ(out.size(), trace.size());
    EXPECT_EQ(d.u64("dropped_packets"), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(DefaultAction, ReplayMalformed, ::testing::Values("drop", "pass"));

// ------------------------------------------------------------------ actions (§2, §5)

TEST(ReplayActions, DryRunCountsExceededButDropsNothing) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "10pps", "5", "pass"));
  std::vector<Frame> trace;
  add_run(trace, kT0, kNsPerUs, 30, [](uint32_t s) { return udp4(s); });
  r.set_input(trace);
  run_ok(r);
  Json rule = r.rule("limit");
  EXPECT_EQ(rule.u64("exceeded_packets"), 25u);
  EXPECT_EQ(rule.u64("conformed_packets"), 5u);
  EXPECT_EQ(rule.u64("dropped_packets"), 0u);
  EXPECT_EQ(rule.u64("passed_packets"), 30u);
  auto out = r.output();
  ASSERT_EQ(out.size(), 30u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].bytes, trace[i].bytes);
}

TEST(ReplayActions, MarkDscpRewritesExceedingPackets) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "10pps", "5", "mark-dscp:EF"));
  std::vector<Frame> trace;
  for (uint32_t i = 0; i < 40; ++i) {
    std::vector<uint8_t> f;
    if (i % 2 == 0) {
      f = udp4(i, {.dscp = 10});
      f[kL3 + 1] |= 1;  // ECN ECT(1): marking must keep it
      f[kL3 + 10] = f[kL3 + 11] = 0;
      uint16_t ck = PacketBuilder::ipv4_checksum(f.data() + kL3, 20);
      f[kL3 + 10] = uint8_t(ck >> 8), f[kL3 + 11] = uint8_t(ck);
    } else {
      f = PacketBuilder().ipv6("2001:db8::1", "2001:db8::53", 10).udp(1000, 53).frame_size(100).build();
      f[kL3 + 1] |= 0x20;  // ECN ECT(0) in the traffic class
      set_seq(f, i);
    }
    trace.push_back(Frame{kT0 + i * kNsPerUs, f});
  }
  r.set_input(trace);
  run_ok(r);
  Json rule = r.rule("limit");
  EXPECT_EQ(rule.u64("exceeded_packets"), 35u);
  EXPECT_EQ(rule.u64("marked_packets"), 35u);
  EXPECT_EQ(rule.u64("dropped_packets"), 0u);
  auto out = r.output();
  ASSERT_EQ(out.size(), 40u);
  uint64_t ef = 0;
  for (const Frame& f : out) {
    uint32_t seq = seq_of(f.bytes);
    const auto& orig = trace[seq].bytes;
    uint8_t d = dscp_of(f.bytes);
    EXPECT_TRUE(d == 46 || d == 10) << "packet " << seq << " dscp " << int(d);
    ef += d == 46;
    EXPECT_EQ(ecn_of(f.bytes), ecn_of(orig)) << "ECN bits changed on packet " << seq;
    if (is_ipv4(f.bytes)) { EXPECT_TRUE(ipv4_checksum_ok(f.bytes)) << "packet " << seq; }
    // Nothing but the DSCP (and the IPv4 checksum) may change.
    std::vector<uint8_t> a = f.bytes, b = orig;
    for (auto* v : {&a, &b}) {
      (*v)[kL3] &= is_ipv6(*v) ? 0xf0 : 0xff;
      (*v)[kL3 + 1] &= is_ipv6(*v) ? 0x3f : 0x03;
      if (is_ipv4(*v)) (*v)[kL3 + 10] = (*v)[kL3 + 11] = 0;
    }
    EXPECT_EQ(a, b) << "packet " << seq << " changed beyond its DSCP";
  }
  EXPECT_EQ(ef, 35u);
  // The first five conformed and kept their DSCP.
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(dscp_of(out[i].bytes), 10);
}

// ------------------------------------------------------------------ keys and flows (§2, §3)

TEST(ReplayKeys, PerSourceKeysGiveOneBucketPerSource) {
  Replay r;
  r.set_rules(R"(default: {action: pass}
rules:
  - name: per-src
    match: {dst-port: 53}
    key: src-ip
    rate: 10pps
    burst: 5
    action: drop
  - name: per-24
    match: {dst-port: 54}
    key: src-prefix/24
    rate: 10pps
    burst: 5
    action: drop
)");
  const std::vector<std::string> srcs = {"10.1.0.1", "10.1.0.2", "10.1.1.1", "10.1.2.1"};
  std::vector<Frame> trace;
  for (uint16_t port : {53, 54})
    for (int i = 0; i < 20; ++i)
      for (const auto& s : srcs)
        add_run(trace, kT0 + trace.size() * kNsPerUs, 0, 1,
                [&](uint32_t seq) { return udp4(seq, {.src = s, .dport = port}); });
  r.set_input(trace);
  run_ok(r);
  std::map<std::pair<int, std::string>, int> passed;
  for (const Frame& f : r.output()) passed[{f.bytes[kL3 + 23], ipv4_src(f.bytes)}]++;
  for (const auto& s : srcs) EXPECT_EQ((passed[{53, s}]), 5) << s;
  // /24 keys: 10.1.0.1 and 10.1.0.2 share one bucket of 5.
  EXPECT_EQ((passed[{54, "10.1.0.1"}] + passed[{54, "10.1.0.2"}]), 5);
  EXPECT_EQ((passed[{54, "10.1.1.1"}]), 5);
  EXPECT_EQ((passed[{54, "10.1.2.1"}]), 5);
  EXPECT_EQ(r.rule("per-src").u64("active_flows"), 4u);
  EXPECT_EQ(r.rule("per-24").u64("active_flows"), 3u);
}

// ------------------------------------------------------------------ report shape (§5)

TEST(ReplayReport, HasEveryCounterForEveryRule) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "10pps", "5", "drop"));
  std::vector<Frame> trace;
  add_run(trace, kT0, kNsPerUs, 10, [](uint32_t s) { return udp4(s); });
  add_run(trace, kT0 + kNsPerMs, kNsPerUs, 3, [](uint32_t s) { return udp4(s, {.dport = 80}); });
  r.set_input(trace);
  run_ok(r);
  Json rep = r.report_json();
  ASSERT_EQ(rep.at("rules").items.size(), 1u);
  std::vector<const Json*> objs = {&rep.at("rules").items[0], &rep.at("default")};
  for (const Json* o : objs) {
    for (const char* base : {"matched", "conformed", "exceeded", "passed", "dropped", "marked",
                             "delayed", "malformed", "green", "yellow", "red"}) {
      EXPECT_TRUE(o->has(std::string(base) + "_packets")) << base;
      EXPECT_TRUE(o->has(std::string(base) + "_bytes")) << base;
    }
    EXPECT_TRUE(o->has("active_flows"));
    EXPECT_TRUE(o->has("flows_evicted"));
  }
  EXPECT_EQ(rep.at("rules").items[0].at("name").str, "limit");
  EXPECT_EQ(rep.at("default").at("name").str, "default");
  EXPECT_EQ(rep.at("default").u64("matched_packets"), 3u);
  EXPECT_EQ(rep.at("default").u64("passed_packets"), 3u);
  EXPECT_EQ(rep.at("default").u64("matched_bytes"), 300u);
  ASSERT_TRUE(rep.has("ports"));
  EXPECT_EQ(rep.at("ports").items.at(0).u64("rx_packets"), 13u);
  EXPECT_EQ(rep.at("ports").items.at(0).u64("tx_packets"), 8u);
}

// ------------------------------------------------------------------ determinism (§1)

TEST(ReplayDeterminism, SameSeedSameOutput) {
  TempDir dir;
  std::string tracegen = env_or_die("TRACEGEN");
  std::string in = dir.file("in.pcap");
  ProcessResult g = run_process({tracegen, "--out", in, "--packets", "20000", "--flows", "300",
                                 "--random-flows", "--pps", "20000", "--poisson", "--size-mix",
                                 "--ipv6-share", "0.3", "--malformed-every", "97", "--seed", "11"},
                                dir);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const std::string rules = R"(default: {action: pass}
rules:
  - name: per-src
    match: {src: 10.1.0.0/24, proto: udp}
    key: src-ip
    rate: 50pps
    burst: 10
    max-flows: 64
    action: mark-dscp:CS1
    parent: agg
  - name: v6
    match: {src: 2001:db8:1::/48}
    key: src-ip
    rate: 100pps
    burst: 5
    algorithm: gcra
    action: drop
  - name: tenant
    match: {src: 10.1.0.0/16}
    key: none
    rate: 2Mbit
    burst: 16KiB
    algorithm: leaky-bucket
    max-delay: 5ms
  - name: agg
    match: {dst-port: 9999}
    key: none
    rate: 5000pps
    burst: 100
    action: drop
)";
  std::vector<std::string> outs, reports;
  for (int run = 0; run < 2; ++run) {
    Replay r;
    r.set_rules(rules);
    std::filesystem::copy_file(in, r.in());
    run_ok(r, {"--hash-seed", "0x5eed"});
    outs.push_back(read_file(r.out()));
    reports.push_back(read_file(r.report()));
  }
  EXPECT_GT(outs[0].size(), 1000u);
  EXPECT_TRUE(outs[0] == outs[1]) << "OUT.pcap differs between two runs with the same seed";
  EXPECT_EQ(reports[0], reports[1]);
}

}  // namespace
}  // namespace sluice::testing
