// process_burst's shortcuts against the per-packet path: the same verdicts and the same
// counters, frame by frame, for the snapshot shapes that process_burst handles apart (no rule
// with a pass or drop default: no parse beyond well-formedness; keyed token buckets on
// common IPv4 frames: pipeline_fast_v4.cpp).
#include <gtest/gtest.h>

#include <random>

#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

std::unique_ptr<Pipeline> make(const std::string& yaml) {
  auto r = load_rules_text(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return nullptr;
  PipelineOptions opts;
  opts.hash_seed = 12345;
  auto p = Pipeline::create(*r, opts);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? std::move(p).value() : nullptr;
}

// Well-formed and malformed frames of every shape the parser tells apart.
std::vector<std::vector<uint8_t>> mixed_frames() {
  std::vector<std::vector<uint8_t>> f;
  f.push_back(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame_size(64).build());
  f.push_back(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2).payload(100).build());
  f.push_back(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(1, 2).build());
  f.push_back(PacketBuilder().vlan(7).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build());
  f.push_back(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").icmp().build());
  f.push_back(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(10, false).udp(1, 2).build());
  f.push_back(PacketBuilder().ethertype(0x0806).payload(28).build());  // ARP: not IP, fine
  std::vector<uint8_t> short_ip = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  short_ip.resize(30);  // IPv4 header cut short: malformed
  f.push_back(short_ip);
  std::vector<uint8_t> bad_ihl = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  bad_ihl[14] = 0x44;  // IHL 4: malformed
  f.push_back(bad_ihl);
  std::vector<uint8_t> long_total = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  long_total[16] = 0x7f;  // total length past the frame: malformed
  f.push_back(long_total);
  f.push_back(std::vector<uint8_t>(10, 0));  // shorter than Ethernet: malformed
  return f;
}

// A verdict no path gives (every departure is at or after now): what the arrays hold before a
// burst, so that one left unwritten is seen.
constexpr Verdict kUnwritten{Verdict::Kind::drop, 1};
bool unwritten(const Verdict& v) { return v.kind == kUnwritten.kind && v.depart_ns == 1; }

// What a caller of VerdictFill::unless_all_now may take: a burst that returned 0 left its
// verdicts unwritten or wrote {forward, now}; any other burst wrote every verdict.
void take_unwritten_as_forward(std::vector<Verdict>& verdicts, VerdictFill fill, size_t not_now,
                               uint64_t now) {
  if (fill != VerdictFill::unless_all_now || not_now != 0) return;
  for (Verdict& v : verdicts)
    if (unwritten(v)) v = {Verdict::Kind::forward, now};
}

void expect_same_as_one_by_one(const std::string& yaml, VerdictFill fill) {
  auto burst_p = make(yaml), single_p = make(yaml);
  ASSERT_TRUE(burst_p && single_p);
  WorkerCounters burst_c = burst_p->make_counters(), single_c = single_p->make_counters();
  std::vector<std::vector<uint8_t>> frames = mixed_frames();
  std::vector<Pipeline::Frame> burst;
  for (auto& f : frames) burst.push_back({f.data(), uint32_t(f.size()), uint32_t(f.size())});
  // A truncated capture record: no bytes to parse, a wire length (malformed).
  burst.push_back({frames[0].data(), 0, 64});
  std::vector<Verdict> verdicts(burst.size(), kUnwritten);
  const uint64_t now = 1'000'000'000;
  const size_t not_now =
      burst_p->process_burst(burst.data(), burst.size(), 0, now, burst_c, verdicts.data(), fill);
  take_unwritten_as_forward(verdicts, fill, not_now, now);
  size_t not_now_seen = 0;
  for (size_t i = 0; i < burst.size(); ++i) {
    const Verdict v = single_p->process(burst[i], 0, now, single_c);
    EXPECT_EQ(verdicts[i].kind, v.kind) << "frame " << i;
    EXPECT_EQ(verdicts[i].depart_ns, v.depart_ns) << "frame " << i;
    not_now_seen += !forwards_now(v, now);
  }
  // What a worker relies on to send the burst whole: the count of verdicts not "forward now".
  EXPECT_EQ(not_now, not_now_seen);
  const CountersSnapshot a = burst_p->snapshot({&burst_c}), b = single_p->snapshot({&single_c});
  EXPECT_EQ(a.default_rule.traffic.packets, b.default_rule.traffic.packets);
  EXPECT_EQ(a.default_rule.traffic.bytes, b.default_rule.traffic.bytes);
  // The mix holds malformed frames, so the comparison covers that counter too.
  EXPECT_EQ(a.default_rule.traffic.pkts(Outcome::malformed), 5u);
  EXPECT_EQ(a.default_rule.traffic.pkts(Outcome::matched), burst.size());
}

void expect_same_as_one_by_one(const std::string& yaml) {
  for (VerdictFill fill : {VerdictFill::all, VerdictFill::unless_all_now}) {
    SCOPED_TRACE(fill == VerdictFill::all ? "every verdict" : "verdicts unless all forward now");
    expect_same_as_one_by_one(yaml, fill);
  }
}

TEST(PipelineBurstPaths, NoRulePassDefaultMatchesOneByOne) {
  expect_same_as_one_by_one("default: {action: pass}\nrules: []\n");
}

TEST(PipelineBurstPaths, NoRuleDropDefaultMatchesOneByOne) {
  expect_same_as_one_by_one("default: {action: drop}\nrules: []\n");
}

TEST(PipelineBurstPaths, NoRuleMarkDefaultMatchesOneByOne) {
  expect_same_as_one_by_one("default: {action: \"mark-dscp:EF\"}\nrules: []\n");
}

// A burst of well-formed frames with a pass default returns 0: with unless_all_now it writes
// no verdict (the stores the worker saves), and every packet forwards now.
TEST(PipelineBurstPaths, AllForwardedBurstWritesNoVerdictUnlessAsked) {
  auto p = make("default: {action: pass}\nrules: []\n");
  ASSERT_TRUE(p);
  WorkerCounters c = p->make_counters();
  std::vector<uint8_t> f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  std::vector<Pipeline::Frame> burst(8, Pipeline::Frame{f.data(), uint32_t(f.size()), uint32_t(f.size())});
  std::vector<Verdict> verdicts(burst.size(), kUnwritten);
  EXPECT_EQ(p->process_burst(burst.data(), burst.size(), 0, 5, c, verdicts.data(),
                             VerdictFill::unless_all_now),
            0u);
  for (const Verdict& v : verdicts) EXPECT_TRUE(unwritten(v));
  EXPECT_EQ(p->process_burst(burst.data(), burst.size(), 0, 5, c, verdicts.data()), 0u);
  for (const Verdict& v : verdicts) {
    EXPECT_EQ(v.kind, Verdict::Kind::forward);
    EXPECT_EQ(v.depart_ns, 5u);
  }
}

// A trace for keyed rules: flows of common IPv4 frames (UDP and TCP, several sizes), the
// same flows' frames with IP options or a VLAN tag (the general parser; the same keys), and
// frames no fast path takes (IPv6, fragments, ICMP, malformed), interleaved.
std::vector<std::vector<uint8_t>> keyed_trace(std::mt19937_64& rng, size_t frames) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < frames; ++i) {
    const unsigned flow = unsigned(rng() % 40);
    const std::string src = "10.0." + std::to_string(flow % 5) + "." + std::to_string(flow);
    const std::string dst = "192.0.2." + std::to_string(flow % 7);
    const uint16_t sport = uint16_t(1000 + flow % 3), dport = uint16_t(flow % 2 ? 53 : 80);
    PacketBuilder b;
    const unsigned kind = unsigned(rng() % 16);
    if (kind == 0) b.vlan(7);
    if (kind == 1) {
      b.ipv6("2001:db8::" + std::to_string(flow), "2001:db8::1");
    } else {
      b.ipv4(src, dst, uint8_t(rng() % 3 == 0 ? 46 : 0));
      if (kind == 2) b.ipv4_options(4);
      if (kind == 3) b.ipv4_fragment(uint16_t(rng() % 2 * 10), true);
    }
    if (kind == 4) b.icmp();
    else if (flow % 4 == 0) b.tcp(sport, dport);
    else b.udp(sport, dport);
    std::vector<uint8_t> f = b.payload(rng() % 3 * 200).build();
    if (kind == 5) f.resize(30);              // IPv4 header cut short: malformed
    if (kind == 6) f[16] = 0x7f;              // total length past the frame: malformed
    out.push_back(std::move(f));
  }
  return out;
}

// Frames arrive on ingress port `port`; `both_verdicts`: the rates are such that some
// frames are forwarded and some dropped.
void expect_keyed_same_as_one_by_one_as(const std::string& yaml, size_t max_flows,
                                        bool single_writer, uint16_t port = 0,
                                        bool both_verdicts = true) {
  auto make_sized = [&] {
    auto r = load_rules_text(yaml, "test.yaml");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    PipelineOptions opts;
    opts.hash_seed = 12345;
    opts.default_max_flows = max_flows;
    opts.single_writer = single_writer;
    auto p = Pipeline::create(*r, opts);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    return std::move(p).value();
  };
  auto burst_p = make_sized(), single_p = make_sized();
  WorkerCounters burst_c = burst_p->make_counters(), single_c = single_p->make_counters();
  std::mt19937_64 rng(99);
  std::vector<std::vector<uint8_t>> a = keyed_trace(rng, 4000), b = a;
  uint64_t now = 1'000'000'000;
  size_t forwarded = 0, dropped = 0;
  for (size_t done = 0; done < a.size();) {
    const size_t n = std::min<size_t>(1 + rng() % 64, a.size() - done);
    std::vector<Pipeline::Frame> burst;
    for (size_t i = 0; i < n; ++i) {
      auto& f = a[done + i];
      burst.push_back({f.data(), uint32_t(f.size()), uint32_t(f.size())});
    }
    // Both fills, burst by burst: a worker's (verdicts only when some packet does not leave
    // now) and every verdict.
    const VerdictFill fill = done % 2 ? VerdictFill::all : VerdictFill::unless_all_now;
    std::vector<Verdict> verdicts(n, kUnwritten);
    const size_t not_now =
        burst_p->process_burst(burst.data(), n, port, now, burst_c, verdicts.data(), fill);
    take_unwritten_as_forward(verdicts, fill, not_now, now);
    size_t not_now_seen = 0;
    for (size_t i = 0; i < n; ++i) {
      auto& f = b[done + i];
      const Verdict v = single_p->process(f.data(), uint32_t(f.size()), port, now, single_c);
      not_now_seen += !forwards_now(v, now);
      ASSERT_EQ(verdicts[i].kind, v.kind) << "frame " << done + i;
      ASSERT_EQ(verdicts[i].depart_ns, v.depart_ns) << "frame " << done + i;
      ASSERT_EQ(a[done + i], f) << "frame " << done + i << " rewritten differently";
      (v.kind == Verdict::Kind::forward ? forwarded : dropped) += 1;
    }
    ASSERT_EQ(not_now, not_now_seen) << "burst at " << done;
    done += n;
    now += rng() % 400'000;
  }
  const CountersSnapshot x = burst_p->snapshot({&burst_c}), y = single_p->snapshot({&single_c});
  ASSERT_EQ(x.rules.size(), y.rules.size());
  for (size_t r = 0; r < x.rules.size(); ++r) {
    EXPECT_EQ(x.rules[r].traffic.packets, y.rules[r].traffic.packets) << x.rules[r].name;
    EXPECT_EQ(x.rules[r].traffic.bytes, y.rules[r].traffic.bytes) << x.rules[r].name;
    EXPECT_EQ(x.rules[r].active_flows, y.rules[r].active_flows) << x.rules[r].name;
    EXPECT_EQ(x.rules[r].flows_evicted, y.rules[r].flows_evicted) << x.rules[r].name;
  }
  EXPECT_EQ(x.default_rule.traffic.packets, y.default_rule.traffic.packets);
  EXPECT_EQ(x.default_rule.traffic.bytes, y.default_rule.traffic.bytes);
  // The rates are set so that both verdicts happen.
  EXPECT_GT(forwarded, 100u);
  if (both_verdicts) {
    EXPECT_GT(dropped, 100u);
  } else {
    EXPECT_EQ(dropped, 0u);
  }
}

// Both ways of publishing a bucket word: plain stores (one worker) and compare-and-swap.
void expect_keyed_same_as_one_by_one(const std::string& yaml) {
  for (bool single_writer : {true, false}) {
    SCOPED_TRACE(single_writer ? "single writer" : "shared");
    expect_keyed_same_as_one_by_one_as(yaml, 65536, single_writer);
  }
}

}  // namespace

TEST(PipelineBurstPaths, KeyedTokenBucketEveryKeyModeMatchesOneByOne) {
  for (const char* key : {"5-tuple", "src-ip", "dst-ip", "src-dst", "src-prefix/24",
                          "dst-prefix/28"}) {
    SCOPED_TRACE(key);
    expect_keyed_same_as_one_by_one(std::string(R"(
default: {action: pass}
rules:
  - name: per-key
    match: {dst: 192.0.2.0/24}
    key: )") + key + R"(
    rate: 200pps
    burst: 3
    algorithm: token-bucket
    action: drop
)");
  }
}

TEST(PipelineBurstPaths, KeyedTokenBucketOnDscpPortsAndIngressPortMatchesOneByOne) {
  // The one-rule loop folds the match word's constant part (the ingress port among it) into
  // the rule once per burst, tests what varies (protocol, DSCP), then the port ranges on the
  // frame's packed port pair: a rule on each of them, on the port it names (it matches some
  // frames) and on another (it matches none: everything takes the pass default).
  const std::string yaml = R"(
default: {action: pass}
rules:
  - name: per-flow
    match: {proto: udp, dscp: EF, src-port: 1000-1001, dst-port: 53, port: 3}
    key: 5-tuple
    rate: 200pps
    burst: 3
    algorithm: token-bucket
    action: drop
)";
  for (bool single_writer : {true, false}) {
    SCOPED_TRACE(single_writer ? "single writer" : "shared");
    expect_keyed_same_as_one_by_one_as(yaml, 65536, single_writer, 3);
    expect_keyed_same_as_one_by_one_as(yaml, 65536, single_writer, 0, false);
  }
}

TEST(PipelineBurstPaths, KeyedTokenBucketsOfSeveralRulesMatchOneByOne) {
  // Byte rates, a mark action, port and protocol matches, a meter and an aggregate beside the
  // keyed buckets, a marking default: frames of every rule in one burst.
  expect_keyed_same_as_one_by_one(R"(
default: {action: "mark-dscp:CS1"}
rules:
  - name: tcp-bytes
    match: {proto: tcp, src: 10.0.0.0/16}
    key: src-dst
    rate: 200kbit
    burst: 3000
    overhead: 24
    algorithm: token-bucket
    action: "mark-dscp:AF11"
  - name: dns
    match: {proto: udp, dst-port: 53}
    key: 5-tuple
    rate: 100pps
    burst: 2
    algorithm: token-bucket
    action: drop
  - name: meter
    match: {proto: udp, src-port: 1000-1001}
    key: dst-ip
    rate: 100kbit
    burst: 2000
    excess-burst: 2000
    algorithm: srtcm
    actions: {green: pass, yellow: "mark-dscp:AF13", red: drop}
  - name: pass-rule
    match: {proto: udp}
    key: src-ip
    rate: 50pps
    burst: 2
    algorithm: token-bucket
    action: pass
)");
}

TEST(PipelineBurstPaths, KeyedTokenBucketOnAFullTableMatchesOneByOne) {
  // Eight flows of capacity for forty: new flows evict or find no slot (the overflow action).
  expect_keyed_same_as_one_by_one(R"(
default: {action: drop}
rules:
  - name: per-flow
    match: {proto: udp}
    key: 5-tuple
    rate: 300pps
    burst: 4
    algorithm: token-bucket
    action: drop
    overflow: pass
    max-flows: 8
)");
}

TEST(PipelineBurstPaths, KeyedSrtcmMatchesOneByOne) {
  // A meter per destination (the qos_meter shape), then one whose green is marked.
  for (const char* green : {"pass", "\"mark-dscp:AF11\""}) {
    SCOPED_TRACE(green);
    expect_keyed_same_as_one_by_one(std::string(R"(
default: {action: pass}
rules:
  - name: per-dst
    match: {proto: udp}
    key: dst-ip
    rate: 400kbit
    burst: 3000
    excess-burst: 3000
    algorithm: srtcm
    actions: {green: )") + green + R"(, yellow: "mark-dscp:AF13", red: drop}
)");
  }
}

TEST(PipelineBurstPaths, KeyedRulesAmongAHundredMatchOneByOne) {
  // Above Classifier::kLinearRules the common-IPv4 burst classifies by the match tables: the
  // several-rules set spread among 96 rules that take no frame of the trace (prefixes, port
  // ranges, protocol and DSCP), plus two filler-shaped rules that do, so frames of a burst go
  // to rules far apart in the file and more rules than the burst's shares (8) meet in one.
  std::string yaml = "default: {action: \"mark-dscp:CS1\"}\nrules:\n";
  const char* real[] = {
      R"(  - {name: tcp-bytes, match: {proto: tcp, src: 10.0.0.0/16}, key: src-dst, rate: 200kbit,
     burst: 3000, overhead: 24, algorithm: token-bucket, action: "mark-dscp:AF11"}
)",
      R"(  - {name: dns, match: {proto: udp, dst-port: 53}, key: 5-tuple, rate: 100pps, burst: 2,
     algorithm: token-bucket, action: drop}
)",
      R"(  - {name: meter, match: {proto: udp, src-port: 1000-1001}, key: dst-ip, rate: 100kbit,
     burst: 2000, excess-burst: 2000, algorithm: srtcm,
     actions: {green: pass, yellow: "mark-dscp:AF13", red: drop}}
)",
      R"(  - {name: pass-rule, match: {proto: udp}, key: src-ip, rate: 50pps, burst: 2,
     algorithm: token-bucket, action: pass}
)"};
  size_t next_real = 0;
  for (int i = 0; i < 100; ++i) {
    if (i % 25 == 24 && next_real < 4) {
      yaml += real[next_real++];
      continue;
    }
    std::string match;
    switch (i % 5) {
      case 0: match = "src: 10." + std::to_string(100 + i) + ".0.0/16"; break;
      case 1: match = "dst-port: " + std::to_string(40000 + i) + "-" + std::to_string(40100 + i); break;
      case 2: match = "proto: tcp, dscp: " + std::to_string(i % 64) + ", dst: 198.51.100.0/24"; break;
      // Frames of the trace, on one source each: 10.0.<flow % 5>.<flow>.
      case 3: match = "src: 10.0." + std::to_string(i % 5) + "." + std::to_string(i % 40) + "/32"; break;
      default: match = "dst: 192.0.2." + std::to_string(i % 7) + "/32, proto: udp"; break;
    }
    yaml += "  - {name: r" + std::to_string(i) + ", match: {" + match +
            "}, key: 5-tuple, rate: " + std::to_string(50 + i) +
            "pps, burst: 2, algorithm: token-bucket, action: drop, max-flows: 64}\n";
  }
  expect_keyed_same_as_one_by_one(yaml);
}

TEST(PipelineBurstPaths, KeyedTokenBucketsAllKeyedAlikeAmongAHundredMatchOneByOne) {
  // Every fast rule a token bucket of one key mode (RulesSnapshot::uniform_token_bucket_key):
  // the loops specialised on it. Packet and byte rates, a marking rule, and a gcra rule
  // (not a fast rule: the general stages, in its place in the burst) among them.
  for (const char* key : {"5-tuple", "src-ip", "dst-prefix/28"}) {
    SCOPED_TRACE(key);
    std::string yaml = "default: {action: pass}\nrules:\n";
    for (int i = 0; i < 100; ++i) {
      std::string match;
      switch (i % 4) {
        case 0: match = "src: 10." + std::to_string(100 + i) + ".0.0/16"; break;
        case 1: match = "src: 10.0." + std::to_string(i % 5) + "." + std::to_string(i % 40) + "/32"; break;
        case 2: match = "dst: 192.0.2." + std::to_string(i % 7) + "/32, proto: udp"; break;
        default: match = "proto: tcp, dst-port: " + std::to_string(i % 3 == 0 ? 80 : 9000 + i); break;
      }
      std::string limit = i % 3 == 0 ? "rate: " + std::to_string(20 + i) + "kbit, burst: 1500"
                                      : "rate: " + std::to_string(50 + i) + "pps, burst: 2";
      const std::string algorithm = i == 37 ? "gcra" : "token-bucket";
      const std::string action = i % 10 == 5 ? "\"mark-dscp:AF11\"" : "drop";
      yaml += "  - {name: r" + std::to_string(i) + ", match: {" + match + "}, key: " + key +
              ", " + limit + ", algorithm: " + algorithm + ", action: " + action +
              ", max-flows: 64}\n";
    }
    expect_keyed_same_as_one_by_one(yaml);
  }
}
