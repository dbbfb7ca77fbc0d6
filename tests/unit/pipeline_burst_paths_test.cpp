// process_burst's shortcuts against the per-packet path: the same verdicts and the same
// counters, frame by frame, for the snapshot shapes that process_burst handles apart (no rule
// with a pass or drop default: no parse beyond well-formedness).
#include <gtest/gtest.h>

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

void expect_same_as_one_by_one(const std::string& yaml) {
  auto burst_p = make(yaml), single_p = make(yaml);
  ASSERT_TRUE(burst_p && single_p);
  WorkerCounters burst_c = burst_p->make_counters(), single_c = single_p->make_counters();
  std::vector<std::vector<uint8_t>> frames = mixed_frames();
  std::vector<Pipeline::Frame> burst;
  for (auto& f : frames) burst.push_back({f.data(), uint32_t(f.size()), uint32_t(f.size())});
  // A truncated capture record: no bytes to parse, a wire length (malformed).
  burst.push_back({frames[0].data(), 0, 64});
  std::vector<Verdict> verdicts(burst.size());
  const uint64_t now = 1'000'000'000;
  burst_p->process_burst(burst.data(), burst.size(), 0, now, burst_c, verdicts.data());
  for (size_t i = 0; i < burst.size(); ++i) {
    const Verdict v = single_p->process(burst[i], 0, now, single_c);
    EXPECT_EQ(verdicts[i].kind, v.kind) << "frame " << i;
    EXPECT_EQ(verdicts[i].depart_ns, v.depart_ns) << "frame " << i;
  }
  const CountersSnapshot a = burst_p->snapshot({&burst_c}), b = single_p->snapshot({&single_c});
  EXPECT_EQ(a.default_rule.traffic.packets, b.default_rule.traffic.packets);
  EXPECT_EQ(a.default_rule.traffic.bytes, b.default_rule.traffic.bytes);
  // The mix holds malformed frames, so the comparison covers that counter too.
  EXPECT_EQ(a.default_rule.traffic.pkts(Outcome::malformed), 5u);
  EXPECT_EQ(a.default_rule.traffic.pkts(Outcome::matched), burst.size());
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

}  // namespace
