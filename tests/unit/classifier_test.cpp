// First-match classification over every match field (SPEC §2).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "classifier.hpp"
#include "frame.hpp"
#include "frame_fast_v4.hpp"
#include "interval_index.hpp"
#include "linear_classifier.hpp"
#include "packet_builder.hpp"
#include "random_rules.hpp"
#include "rules_loader.hpp"

using namespace sluice;
using sluice::testing::LinearClassifier;
using sluice::testing::PacketBuilder;
using sluice::testing::RandomRules;

namespace {

RuleSet load(const std::string& yaml) {
  auto r = load_rules_text(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : RuleSet{};
}

int classify(const Classifier& c, const std::vector<uint8_t>& f, uint16_t port = 0) {
  ParsedFrame pf = parse_frame(f.data(), uint32_t(f.size()));
  return c.classify(pf, port);
}

const char* kRules = R"(
rules:
  - {name: dns, match: {proto: udp, dst-port: 53, dst: 192.0.2.0/24}, rate: 10pps, burst: 1}
  - {name: v6web, match: {dst: "2001:db8::/32", proto: tcp, dst-port: 80-443}, rate: 10pps, burst: 1}
  - {name: vlan7, match: {vlan: 7}, rate: 10pps, burst: 1}
  - {name: ef, match: {dscp: EF}, rate: 10pps, burst: 1}
  - {name: port3, match: {port: 3}, rate: 10pps, burst: 1}
  - {name: src-net, match: {src: 10.1.0.0/16, src-port: 1000-2000}, rate: 10pps, burst: 1}
  - {name: icmp, match: {proto: icmp}, rate: 10pps, burst: 1}
)";

}  // namespace

TEST(Classifier, FirstMatchOverEveryField) {
  RuleSet rs = load(kRules);
  ASSERT_EQ(rs.rules.size(), 7u);
  Classifier c(rs.rules);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.0.0.1", "192.0.2.9").udp(5, 53).build()), 0);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.0.0.1", "192.0.3.9").udp(5, 53).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.0.0.1", "192.0.2.9").tcp(5, 53).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("2001::1", "2001:db8::5").tcp(9, 443).build()), 1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("2001::1", "2001:db8::5").tcp(9, 444).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("2001::1", "2001:db9::5").tcp(9, 80).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().vlan(7).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), 2);
  EXPECT_EQ(classify(c, PacketBuilder().vlan(8).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), -1);
  // QinQ: the outer (service) tag is the one matched, inner headers are classified.
  EXPECT_EQ(classify(c, PacketBuilder().vlan(7).vlan(100).ipv4("1.1.1.1", "192.0.2.1").udp(1, 53).build()), 0);
  EXPECT_EQ(classify(c, PacketBuilder().vlan(7).vlan(100).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), 2);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("1.1.1.1", "2.2.2.2", 46).udp(1, 2).build()), 3);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("1.1.1.1", "2.2.2.2", 10).udp(1, 2).build(), 3), 4);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.1.200.3", "2.2.2.2").tcp(1500, 2).build()), 5);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.1.200.3", "2.2.2.2").tcp(999, 2).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.2.0.3", "2.2.2.2").tcp(1500, 2).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.2.0.3", "2.2.2.2").icmp().build()), 6);
  // ICMPv6 is not "icmp".
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("::1", "::2").icmp().build()), -1);
}

TEST(Classifier, NonIpFramesOnlyMatchRulesWithoutIpFields) {
  RuleSet rs = load(R"(
rules:
  - {name: ip, match: {proto: udp}, rate: 10pps, burst: 1}
  - {name: everything, rate: 10pps, burst: 1}
)");
  Classifier c(rs.rules);
  EXPECT_EQ(classify(c, PacketBuilder().ethertype(0x0806).payload(28).build()), 1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), 0);
}

// The reference for prefixes: byte by byte, as the rules file states them.
bool cidr_contains(const Cidr& c, uint8_t ip_version, const std::array<uint8_t, 16>& addr) {
  if (c.family != ip_version) return false;
  unsigned full = c.prefix_len / 8, rest = c.prefix_len % 8;
  for (unsigned i = 0; i < full; ++i)
    if (c.addr[i] != addr[i]) return false;
  if (rest == 0) return true;
  uint8_t mask = uint8_t(0xff00u >> rest);
  return (c.addr[full] & mask) == (addr[full] & mask);
}

std::string address_text(const std::array<uint8_t, 16>& a, uint8_t family) {
  char buf[64];
  inet_ntop(family == 4 ? AF_INET : AF_INET6, a.data(), buf, sizeof buf);
  return buf;
}

// The classifier compares prefixes as masked 64-bit words: it must agree with the byte-wise
// reference at every prefix length, for addresses on both sides of the prefix boundary, for
// source and destination alike.
TEST(Classifier, PrefixesMatchTheByteWiseReferenceAtEveryLength) {
  std::mt19937_64 rng(42);
  size_t matched = 0, refused = 0;
  for (uint8_t family : {uint8_t{4}, uint8_t{6}}) {
    const unsigned max_len = family == 4 ? 32 : 128;
    for (unsigned len = 0; len <= max_len; ++len) {
      for (int trial = 0; trial < 8; ++trial) {
        Cidr net;
        net.family = family;
        net.prefix_len = uint8_t(len);
        for (unsigned i = 0; i < (family == 4 ? 4u : 16u); ++i) net.addr[i] = uint8_t(rng());
        // An address inside the network, then one bit flipped at a random position (inside
        // the prefix: outside the network; after it: still inside).
        std::array<uint8_t, 16> addr = net.addr;
        const unsigned flip = unsigned(rng() % max_len);
        addr[flip / 8] ^= uint8_t(0x80u >> (flip % 8));
        // The rules file holds the network masked to its prefix, as the loader keeps it.
        std::array<uint8_t, 16> masked{};
        for (unsigned b = 0; b < len; ++b) masked[b / 8] |= net.addr[b / 8] & (0x80u >> (b % 8));
        net.addr = masked;
        const std::string cidr = address_text(net.addr, family) + "/" + std::to_string(len);
        for (bool on_source : {true, false}) {
          RuleSet rs = load(std::string("rules:\n  - {name: n, match: {") +
                            (on_source ? "src" : "dst") + ": \"" + cidr +
                            "\"}, rate: 10pps, burst: 1}\n");
          ASSERT_EQ(rs.rules.size(), 1u) << cidr;
          Classifier c(rs.rules);
          const std::string a = address_text(addr, family);
          const std::string other = family == 4 ? "192.0.2.1" : "2001:db8::1";
          PacketBuilder pb;
          if (family == 4) pb.ipv4(on_source ? a : other, on_source ? other : a);
          else pb.ipv6(on_source ? a : other, on_source ? other : a);
          const bool expected = cidr_contains(net, family, addr);
          EXPECT_EQ(classify(c, pb.udp(1, 2).build()), expected ? 0 : -1)
              << (on_source ? "src " : "dst ") << cidr << " vs " << a;
          (expected ? matched : refused) += 1;
        }
      }
    }
  }
  EXPECT_GT(matched, 500u);
  EXPECT_GT(refused, 500u);
}

// The hot path parses into reused burst entries without clearing them: an IPv4 frame's
// address array may hold an earlier IPv6 frame's bytes after its first four.
TEST(Classifier, IPv4PrefixesIgnoreTheRestOfTheAddressArray) {
  RuleSet rs = load(R"(
rules:
  - {name: net, match: {src: 10.1.128.0/17}, rate: 10pps, burst: 1}
  - {name: all, match: {src: 0.0.0.0/0}, rate: 10pps, burst: 1}
)");
  Classifier c(rs.rules);
  auto frame = PacketBuilder().ipv4("10.1.200.1", "2.2.2.2").udp(1, 2).build();
  ParsedFrame pf = parse_frame(frame.data(), uint32_t(frame.size()));
  for (size_t i = 4; i < 16; ++i) pf.src[i] = 0xa5;
  EXPECT_EQ(c.classify(pf, 0), 0);
  pf.src[2] = 127;  // 10.1.127.x: outside the /17
  EXPECT_EQ(c.classify(pf, 0), 1);
}

namespace {

// The fields frame_fast_v4.hpp reads of a frame whose match word is a common IPv4 frame's,
// with ECN bits `ecn` (no rule matches on them).
std::optional<Ipv4Fields> common_ipv4_fields(const ParsedFrame& pf, uint8_t ecn) {
  if (pf.ip_version != 4 || (pf.proto != 6 && pf.proto != 17)) return std::nullopt;
  Ipv4Fields f;
  f.proto = pf.proto;
  f.tos = uint8_t(pf.dscp << 2 | (ecn & 3));
  uint8_t addrs[8];
  std::memcpy(addrs, pf.src.data(), 4);
  std::memcpy(addrs + 4, pf.dst.data(), 4);
  std::memcpy(&f.addrs, addrs, 8);
  f.ports = uint32_t(pf.src_port) | uint32_t(pf.dst_port) << 16;
  if (match_word_of(f) != pf.match_word) return std::nullopt;  // tagged, portless, ...
  return f;
}

// The match-table classifier against the linear walk it replaced, frame by frame.
size_t expect_same_as_linear(const std::vector<Rule>& rules, RandomRules& gen, size_t frames,
                             size_t* common_frames) {
  const Classifier c(rules);
  const LinearClassifier linear(rules);
  size_t matched = 0;
  for (size_t f = 0; f < frames; ++f) {
    const ParsedFrame pf = gen.frame();
    const uint16_t port = gen.ingress();
    const int want = linear.classify(pf, port);
    EXPECT_EQ(c.classify(pf, port), want)
        << rules.size() << " rules, frame " << f << ": version " << int(pf.ip_version)
        << " proto " << int(pf.proto) << " ports " << pf.has_ports << " vlan "
        << int(pf.vlan_count) << "/" << pf.outer_vlan << " dscp " << int(pf.dscp);
    // A frame the common-IPv4 burst takes is classified from its fields alone, the same way.
    if (const auto fields = common_ipv4_fields(pf, uint8_t(f))) {
      ++*common_frames;
      EXPECT_EQ(c.classify_common_ipv4(*fields, port), want)
          << rules.size() << " rules, common IPv4 frame " << f;
      // The one-rule burst's step for the first rule: whether that rule holds.
      if (c.linear() && !rules.empty()) {
        EXPECT_EQ(Classifier::common_ipv4_matches(c.common_ipv4_rule(0, port), *fields), want == 0)
            << rules.size() << " rules, common IPv4 frame " << f << " dscp " << int(pf.dscp)
            << " proto " << int(pf.proto);
      }
    }
    if (want >= 0) ++matched;
    if (::testing::Test::HasFailure()) break;
  }
  return matched;
}

Rule src_rule(uint32_t addr, uint8_t len) {
  Rule r;
  Cidr c;
  c.family = 4;
  c.prefix_len = len;
  for (int i = 0; i < 4; ++i) c.addr[size_t(i)] = uint8_t(addr >> (24 - 8 * i));
  r.match.src = c;
  return r;
}

}  // namespace

// Sizes around the one-word fast path (64) and the summary words (64 words = 4096 rules).
TEST(Classifier, AgreesWithTheLinearWalkOnRandomRuleSets) {
  size_t matched = 0, frames = 0, common = 0;
  for (uint64_t seed = 1; seed <= 36; ++seed) {
    RandomRules gen(seed * 7919);
    const size_t n = std::array<size_t, 9>{0, 1, 3, 20, 63, 64, 65, 129, 700}[seed % 9];
    std::vector<Rule> rules = gen.rules(n, 0.1 + 0.1 * double(seed % 5));
    matched += expect_same_as_linear(rules, gen, 3000, &common);
    frames += 3000;
    if (HasFailure()) return;
  }
  EXPECT_GT(matched, frames / 10);
  EXPECT_LT(matched, frames);
  EXPECT_GT(common, frames / 20);  // the common-IPv4 comparison ran
}

TEST(Classifier, AgreesWithTheLinearWalkOnTenThousandRules) {
  size_t common = 0;
  for (double p : {0.05, 0.3, 0.6}) {
    RandomRules gen(uint64_t(p * 1000));
    std::vector<Rule> rules = gen.rules(10'000, p);
    EXPECT_GT(expect_same_as_linear(rules, gen, 1500, &common), 0u);
    if (HasFailure()) return;
  }
  // More than 64 * 64 rules: two summary words and beyond.
  RandomRules gen(4097);
  EXPECT_GT(expect_same_as_linear(gen.rules(4097 + 64, 0.2), gen, 2000, &common), 0u);
  EXPECT_GT(common, 100u);
}

// The benchmark's shape: thousands of /32 source rules that miss, the match last in the file.
TEST(Classifier, TheMatchingRuleLastAmongTenThousand) {
  std::vector<Rule> rules;
  for (uint32_t i = 0; i < 9'999; ++i) rules.push_back(src_rule(0x0a000000u + i, 32));
  rules.push_back(src_rule(0xc0000200u, 24));  // 192.0.2.0/24
  const Classifier c(rules);
  const LinearClassifier linear(rules);
  for (uint32_t host = 0; host < 256; ++host) {
    const std::string a = "192.0.2." + std::to_string(host);
    auto f = PacketBuilder().ipv4(a, "198.51.100.1").udp(1, 2).build();
    EXPECT_EQ(classify(c, f), 9'999) << a;
  }
  for (uint32_t i : {0u, 1u, 5000u, 9998u}) {
    const std::string a = "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256);
    auto f = PacketBuilder().ipv4(a, "198.51.100.1").udp(1, 2).build();
    EXPECT_EQ(classify(c, f), int(i)) << a;
    ParsedFrame pf = parse_frame(f.data(), uint32_t(f.size()));
    EXPECT_EQ(linear.classify(pf, 0), int(i));
  }
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.0.39.15", "1.1.1.1").udp(1, 2).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("::1", "::2").udp(1, 2).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ethertype(0x0806).payload(28).build()), -1);
}

TEST(Classifier, NoRulesMatchNothing) {
  const Classifier c(std::vector<Rule>{});
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ethertype(0x0806).payload(28).build()), -1);
}

// Thousands of rules each on a different field: every field lets most rules through, so the
// intersection visits many words and the classifier remembers the answer per thread. Two
// classifiers with the same layout but different answers must never see each other's.
TEST(Classifier, RememberedResultsBelongToTheirClassifier) {
  // The two differ only in the last rule's protocol: their bitmaps sit at the same offsets.
  auto rules_ending_with = [](uint8_t last_proto) {
    std::vector<Rule> rules(3000);
    for (size_t i = 0; i + 1 < rules.size(); ++i) {
      Match& m = rules[i].match;
      if (i % 3 == 0) m.src = src_rule(0x0a000000u + uint32_t(i << 8), 24).match.src;
      if (i % 3 == 1) m.dst_port = PortRange{uint16_t(1000 + 5 * i), uint16_t(1003 + 5 * i)};
      if (i % 3 == 2) m.proto = 6, m.dscp = uint8_t(i % 64);
    }
    rules.back().match.dst_port = PortRange{53, 53};
    if (last_proto) rules.back().match.proto = last_proto;
    return rules;
  };
  const Classifier matches(rules_ending_with(0)), misses(rules_ending_with(6));
  const auto f = PacketBuilder().ipv4("192.0.2.1", "198.51.100.1").udp(1234, 53).build();
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(classify(matches, f), 2999);
    EXPECT_EQ(classify(misses, f), -1);
  }
  // And from another thread, whose remembered results start empty.
  std::thread other([&] {
    EXPECT_EQ(classify(misses, f), -1);
    EXPECT_EQ(classify(matches, f), 2999);
  });
  other.join();
}

// IntervalIndex on clustered starts (its crowded buckets split up to 2^16) and spread ones:
// every lookup is the value of the last interval starting at or below the key, at every
// start, one below it, bucket edges, and random keys.
template <class Key>
Key random_key(std::mt19937_64& rng) {
  if constexpr (sizeof(Key) > 8) return Key(rng()) << 64 | Key(rng());
  else return Key(rng());
}

template <class Key, unsigned kBits>
void expect_index_is_the_last_start_at_or_below(std::mt19937_64& rng) {
  Key mask = 0;
  for (unsigned b = 0; b < kBits; ++b) mask = Key(mask << 1 | 1);
  for (int trial = 0; trial < 300; ++trial) {
    const unsigned shift = unsigned(rng() % kBits);
    const Key base = random_key<Key>(rng) & mask;
    std::vector<Key> keys;
    for (size_t i = 0, n = rng() % 150; i < n; ++i)
      keys.push_back(Key((rng() % 3 == 0 ? Key(rng()) : base + (Key(rng() % 200) << shift)) & mask));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<std::pair<Key, uint32_t>> intervals{{0, 7}};
    for (Key k : keys)
      if (k != 0) intervals.emplace_back(k, uint32_t(rng() % 4));
    IntervalIndex<Key, kBits> index;
    index.build(intervals);
    auto naive = [&](Key key) {
      auto it = std::upper_bound(intervals.begin(), intervals.end(), key,
                                 [](Key k, const auto& iv) { return k < iv.first; });
      return std::prev(it)->second;
    };
    std::vector<Key> probes{0, mask};
    for (const auto& [start, value] : intervals) {
      probes.push_back(start);
      probes.push_back(Key(start - 1) & mask);
      probes.push_back(Key(start + 1) & mask);
    }
    for (unsigned b = 0; b < kBits; ++b) probes.push_back(Key(Key(1) << b) & mask);
    for (int i = 0; i < 200; ++i) probes.push_back(random_key<Key>(rng) & mask);
    for (Key key : probes)
      ASSERT_EQ(index.lookup(key), naive(key)) << "trial " << trial << " shift " << shift;
  }
}

// Buckets grow while they split crowded ones: 100 IPv4 /24s spread over a /8 take thousands
// of them (the /8's own 8 bits split nothing), 100 IPv6 /64s inside one /32 2^8 per interval
// at most (2^16 buckets would still leave them all in one: only the fill would grow).
// Lookups stay exact either way (the test above and below).
TEST(IntervalIndex, GrowsItsBucketsOnlyWhileThatSplitsCrowdedOnes) {
  using u128 = unsigned __int128;
  std::vector<std::pair<uint32_t, uint32_t>> v4{{0, 0}};
  for (uint32_t i = 1; i <= 100; ++i) v4.emplace_back((10u << 24) | (i * 613u % 65536u) << 8, i);
  std::sort(v4.begin(), v4.end());
  IntervalIndex<uint32_t, 32> spread;
  spread.build(v4);
  EXPECT_GE(spread.memory_bytes(), (size_t{1} << 12) * 4);
  for (const auto& [start, value] : v4) EXPECT_EQ(spread.lookup(start + 1), value);

  const u128 base = u128(0x20010db8) << 96;
  std::vector<std::pair<u128, uint32_t>> v6{{0, 0}};
  for (uint32_t i = 1; i <= 100; ++i) v6.emplace_back(base | u128(i) << 64, i);
  IntervalIndex<u128, 128> clustered;
  clustered.build(v6);
  EXPECT_LE(clustered.memory_bytes(), size_t{140} << 10);  // 2^15 + 1 buckets, 101 starts
  for (uint32_t i = 1; i <= 100; ++i) {
    EXPECT_EQ(clustered.lookup(base | u128(i) << 64), i);
    EXPECT_EQ(clustered.lookup((base | u128(i) << 64) + 5), i);
    EXPECT_EQ(clustered.lookup((base | u128(i) << 64) - 1), i - 1);
  }
  EXPECT_EQ(clustered.lookup(~u128(0)), 100u);
  EXPECT_EQ(clustered.lookup(1), 0u);
}

TEST(IntervalIndex, LookupIsTheLastStartAtOrBelowClusteredOrNot) {
  std::mt19937_64 rng(13);
  expect_index_is_the_last_start_at_or_below<uint32_t, 32>(rng);
  expect_index_is_the_last_start_at_or_below<uint32_t, 16>(rng);
  expect_index_is_the_last_start_at_or_below<unsigned __int128, 128>(rng);
}
