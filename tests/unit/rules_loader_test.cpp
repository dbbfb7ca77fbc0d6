// Rules file loader: valid files load with every field as written, files are read from disk,
// and dump -> load round-trips. Error cases are rules_loader_errors_test.cpp.
#include "rules_loader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice {
namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSec = 1000000000;

RuleSet load_ok(const std::string& text) {
  Result<RuleSet> r = load_rules_text(text, "rules.yaml");
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : RuleSet{};
}

Cidr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t len) {
  Cidr x;
  x.family = 4;
  x.addr = {a, b, c, d};
  x.prefix_len = len;
  return x;
}

// SPEC §2, verbatim.
const char* const kSpecExample =
    R"(default: {action: pass}            # what happens to packets that match no rule
rules:
  - name: dns-per-source           # unique, [A-Za-z0-9_.-]{1,63}
    match: {proto: udp, dst-port: 53, dst: 192.0.2.0/24}
    key: src-ip                    # one bucket per distinct key value (see below)
    rate: 1000pps                  # pps/kpps/Mpps, or bit/s: 64kbit, 10Mbit, 2.5Gbit, or bytes/s: 125kB/s
    burst: 50                      # packets for a pps rate, bytes for a bit/byte rate ("64KiB", "1500")
    algorithm: token-bucket        # token-bucket | gcra | leaky-bucket | srtcm | trtcm | sliding-window | fixed-window
    action: drop                   # drop | mark-dscp:<0-63 or CSn/AFxy/EF> | pass (dry run: count, never drop)
    parent: tenant-a               # optional: also charge this aggregate rule (hierarchy)
    max-flows: 100000              # optional cap on buckets this rule may hold
  - name: tenant-a
    match: {src: 10.1.0.0/16}
    key: none                      # one shared aggregate bucket for all matching packets
    rate: 1Gbit
    burst: 256KiB
    algorithm: leaky-bucket        # shape: delay instead of drop ...
    max-delay: 5ms                 # ... drop only what would wait longer than this
)";

TEST(RulesLoader, SpecExample) {
  RuleSet rs = load_ok(kSpecExample);
  EXPECT_EQ(rs.default_action, (Action{ActionKind::pass, 0}));
  ASSERT_EQ(rs.rules.size(), 2u);

  const Rule& dns = rs.rules[0];
  EXPECT_EQ(dns.name, "dns-per-source");
  EXPECT_EQ(dns.line, 3);
  EXPECT_EQ(dns.match.proto, std::optional<uint8_t>(17));
  EXPECT_EQ(dns.match.dst_port, (std::optional<PortRange>(PortRange{53, 53})));
  EXPECT_EQ(dns.match.dst, std::optional<Cidr>(v4(192, 0, 2, 0, 24)));
  EXPECT_FALSE(dns.match.src.has_value());
  EXPECT_FALSE(dns.match.src_port.has_value());
  EXPECT_EQ(dns.key, KeyMode::src_ip);
  EXPECT_EQ(dns.rate, (Rate{CostUnit::packets, 1000, 1}));
  EXPECT_EQ(dns.burst, 50u);
  EXPECT_EQ(dns.algorithm, Algorithm::token_bucket);
  EXPECT_EQ(dns.action, (Action{ActionKind::drop, 0}));
  EXPECT_EQ(dns.parent, "tenant-a");
  EXPECT_EQ(dns.parent_index, 1);  // the parent appears later in the file
  EXPECT_EQ(dns.max_flows, 100000u);
  EXPECT_EQ(dns.idle_timeout_ns, kDefaultIdleTimeoutNs);
  EXPECT_FALSE(dns.overflow.has_value());

  const Rule& tenant = rs.rules[1];
  EXPECT_EQ(tenant.name, "tenant-a");
  EXPECT_EQ(tenant.line, 12);
  EXPECT_EQ(tenant.match.src, std::optional<Cidr>(v4(10, 1, 0, 0, 16)));
  EXPECT_EQ(tenant.key, KeyMode::none);
  EXPECT_EQ(tenant.rate, (Rate{CostUnit::bytes, 125000000, 1}));  // 1 Gbit/s in bytes/s
  EXPECT_EQ(tenant.burst, 262144u);
  EXPECT_EQ(tenant.algorithm, Algorithm::leaky_bucket);
  EXPECT_EQ(tenant.max_delay_ns, 5 * kMs);
  EXPECT_EQ(tenant.parent_index, -1);
  EXPECT_EQ(tenant.max_flows, 0u);
}

// Every field and algorithm, with values that differ from the defaults.
const char* const kFullFile = R"(default: {action: mark-dscp:CS1}
rules:
  - name: web.v6
    match:
      src: 2001:db8::/32
      dst: "2001:db8:1::1"
      proto: tcp
      src-port: 1024-65535
      dst-port: 443
      vlan: 100
      dscp: AF41
      port: 1
    key: 5-tuple
    algorithm: gcra
    rate: 10Mbit/s
    burst: 64KiB
    overhead: 24
    action: mark-dscp:EF
    overflow: drop
    max-flows: 5000
    idle-timeout: 30s
    parent: agg
  - name: agg
    match: {src: 10.0.0.0/8, proto: 132}
    key: src-prefix/24
    rate: 2.5Gbit
    burst: 1MB
  - name: colour_2
    match: {dst: 192.0.2.7}
    key: dst-ip
    algorithm: srtcm
    rate: 1kpps
    burst: 10
    excess-burst: 20
    actions: {green: pass, yellow: mark-dscp:AF13, red: drop}
  - name: tri
    key: src-dst
    algorithm: trtcm
    rate: 1Mbit
    burst: 1500
    peak-rate: 2Mbit
    peak-burst: 3000B
    actions: {yellow: mark-dscp:10}
    overflow: pass
  - name: win-s
    match: {proto: icmp}
    key: src-ip
    algorithm: sliding-window
    window: 1s
    limit: 100
  - name: win-f
    key: dst-prefix/64
    algorithm: fixed-window
    window: 250ms
    limit: 64KiB
    overhead: 4
    action: pass
  - name: shaper
    algorithm: leaky-bucket
    rate: 100kB/s
    burst: 1500
    max-delay: 1.5ms
)";

TEST(RulesLoader, FullFileEveryField) {
  RuleSet rs = load_ok(kFullFile);
  EXPECT_EQ(rs.default_action, (Action{ActionKind::mark_dscp, 8}));
  ASSERT_EQ(rs.rules.size(), 7u);

  const Rule& web = rs.rules[0];
  EXPECT_EQ(web.line, 3);
  ASSERT_TRUE(web.match.src.has_value());
  EXPECT_EQ(web.match.src->family, 6);
  EXPECT_EQ(web.match.src->prefix_len, 32);
  EXPECT_EQ(web.match.src->addr, (std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8}));
  ASSERT_TRUE(web.match.dst.has_value());
  EXPECT_EQ(web.match.dst->prefix_len, 128);  // a bare address is a host route
  EXPECT_EQ(web.match.dst->addr,
            (std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(web.match.proto, std::optional<uint8_t>(6));
  EXPECT_EQ(web.match.src_port, (std::optional<PortRange>(PortRange{1024, 65535})));
  EXPECT_EQ(web.match.dst_port, (std::optional<PortRange>(PortRange{443, 443})));
  EXPECT_EQ(web.match.vlan, std::optional<uint16_t>(100));
  EXPECT_EQ(web.match.dscp, std::optional<uint8_t>(34));
  EXPECT_EQ(web.match.port, std::optional<uint16_t>(1));
  EXPECT_EQ(web.key, KeyMode::five_tuple);
  EXPECT_EQ(web.algorithm, Algorithm::gcra);
  EXPECT_EQ(web.rate, (Rate{CostUnit::bytes, 1250000, 1}));
  EXPECT_EQ(web.burst, 65536u);
  EXPECT_EQ(web.overhead_bytes, 24u);
  EXPECT_EQ(web.action, (Action{ActionKind::mark_dscp, 46}));
  EXPECT_EQ(web.overflow, std::optional<Action>(Action{ActionKind::drop, 0}));
  EXPECT_EQ(web.max_flows, 5000u);
  EXPECT_EQ(web.idle_timeout_ns, 30 * kSec);
  EXPECT_EQ(web.parent_index, 1);

  const Rule& agg = rs.rules[1];
  EXPECT_EQ(agg.match.src, std::optional<Cidr>(v4(10, 0, 0, 0, 8)));
  EXPECT_EQ(agg.match.proto, std::optional<uint8_t>(132));
  EXPECT_EQ(agg.key, KeyMode::src_prefix);
  EXPECT_EQ(agg.key_prefix_len, 24);
  EXPECT_EQ(agg.algorithm, Algorithm::token_bucket);  // the default
  EXPECT_EQ(agg.rate, (Rate{CostUnit::bytes, 312500000, 1}));
  EXPECT_EQ(agg.burst, 1000000u);
  EXPECT_EQ(agg.action, (Action{ActionKind::drop, 0}));  // the default

  const Rule& sr = rs.rules[2];
  EXPECT_EQ(sr.match.dst, std::optional<Cidr>(v4(192, 0, 2, 7, 32)));
  EXPECT_EQ(sr.key, KeyMode::dst_ip);
  EXPECT_EQ(sr.algorithm, Algorithm::srtcm);
  EXPECT_EQ(sr.rate, (Rate{CostUnit::packets, 1000, 1}));
  EXPECT_EQ(sr.burst, 10u);
  EXPECT_EQ(sr.excess_burst, 20u);
  EXPECT_EQ(sr.colour_actions.green, (Action{ActionKind::pass, 0}));
  EXPECT_EQ(sr.colour_actions.yellow, (Action{ActionKind::mark_dscp, 14}));
  EXPECT_EQ(sr.colour_actions.red, (Action{ActionKind::drop, 0}));

  const Rule& tri = rs.rules[3];
  EXPECT_EQ(tri.key, KeyMode::src_dst);
  EXPECT_EQ(tri.algorithm, Algorithm::trtcm);
  EXPECT_EQ(tri.rate, (Rate{CostUnit::bytes, 125000, 1}));
  EXPECT_EQ(tri.burst, 1500u);
  EXPECT_EQ(tri.peak_rate, (Rate{CostUnit::bytes, 250000, 1}));
  EXPECT_EQ(tri.peak_burst, 3000u);
  EXPECT_EQ(
      tri.colour_actions,
      (ColourActions{{ActionKind::pass, 0}, {ActionKind::mark_dscp, 10}, {ActionKind::drop, 0}}));
  EXPECT_EQ(tri.overflow, std::optional<Action>(Action{ActionKind::pass, 0}));

  const Rule& ws = rs.rules[4];
  EXPECT_EQ(ws.match.proto, std::optional<uint8_t>(1));
  EXPECT_EQ(ws.algorithm, Algorithm::sliding_window);
  EXPECT_EQ(ws.window_ns, kSec);
  EXPECT_EQ(ws.limit, 100u);
  EXPECT_EQ(ws.limit_unit, CostUnit::packets);
  EXPECT_EQ(ws.cost_unit(), CostUnit::packets);

  const Rule& wf = rs.rules[5];
  EXPECT_EQ(wf.key, KeyMode::dst_prefix);
  EXPECT_EQ(wf.key_prefix_len, 64);
  EXPECT_EQ(wf.algorithm, Algorithm::fixed_window);
  EXPECT_EQ(wf.window_ns, 250 * kMs);
  EXPECT_EQ(wf.limit, 65536u);
  EXPECT_EQ(wf.limit_unit, CostUnit::bytes);
  EXPECT_EQ(wf.overhead_bytes, 4u);
  EXPECT_EQ(wf.action, (Action{ActionKind::pass, 0}));

  const Rule& sh = rs.rules[6];
  EXPECT_EQ(sh.line, 58);
  EXPECT_EQ(sh.algorithm, Algorithm::leaky_bucket);
  EXPECT_EQ(sh.rate, (Rate{CostUnit::bytes, 100000, 1}));
  EXPECT_EQ(sh.max_delay_ns, 1500000u);
}

TEST(RulesLoader, DefaultsWhenOmitted) {
  RuleSet rs = load_ok("rules:\n  - name: a\n    rate: 10pps\n    burst: 5\n");
  EXPECT_EQ(rs.default_action, (Action{ActionKind::pass, 0}));
  ASSERT_EQ(rs.rules.size(), 1u);
  const Rule& r = rs.rules[0];
  EXPECT_EQ(r.match, Match{});
  EXPECT_EQ(r.key, KeyMode::none);
  EXPECT_EQ(r.algorithm, Algorithm::token_bucket);
  EXPECT_EQ(r.action, (Action{ActionKind::drop, 0}));
  EXPECT_EQ(r.colour_actions, ColourActions{});
  EXPECT_EQ(r.idle_timeout_ns, kDefaultIdleTimeoutNs);
  EXPECT_EQ(r.max_flows, 0u);
  EXPECT_EQ(r.overhead_bytes, 0u);
  EXPECT_EQ(r.parent_index, -1);
}

TEST(RulesLoader, EmptyRuleListAndDefaultOnly) {
  EXPECT_TRUE(load_ok("rules: []\n").rules.empty());
  RuleSet rs = load_ok("default: {action: drop}\n");
  EXPECT_EQ(rs.default_action, (Action{ActionKind::drop, 0}));
  EXPECT_TRUE(rs.rules.empty());
}

TEST(RulesLoader, DscpNames) {
  const std::vector<std::pair<std::string, uint8_t>> cases = {
      {"0", 0},     {"63", 63},   {"CS0", 0},   {"CS7", 56},  {"AF11", 10},
      {"AF12", 12}, {"AF13", 14}, {"AF21", 18}, {"AF33", 30}, {"AF43", 38},
      {"EF", 46},   {"ef", 46},   {"af41", 34},
  };
  for (const auto& [name, value] : cases) {
    RuleSet rs = load_ok("rules:\n  - name: a\n    match: {dscp: " + name +
                         "}\n    rate: 1pps\n    burst: 1\n    action: mark-dscp:" + name + "\n");
    ASSERT_EQ(rs.rules.size(), 1u) << name;
    EXPECT_EQ(rs.rules[0].match.dscp, std::optional<uint8_t>(value)) << name;
    EXPECT_EQ(rs.rules[0].action, (Action{ActionKind::mark_dscp, value})) << name;
  }
}

TEST(RulesLoader, ProtocolsAndPrefixes) {
  const std::vector<std::pair<std::string, uint8_t>> protos = {
      {"tcp", 6},    {"udp", 17}, {"icmp", 1},  {"icmpv6", 58},
      {"sctp", 132}, {"0", 0},    {"255", 255}, {"47", 47},
  };
  for (const auto& [name, value] : protos) {
    RuleSet rs = load_ok("rules:\n  - name: a\n    match: {proto: " + name +
                         "}\n    rate: 1pps\n    burst: 1\n");
    ASSERT_EQ(rs.rules.size(), 1u) << name;
    EXPECT_EQ(rs.rules[0].match.proto, std::optional<uint8_t>(value)) << name;
  }
  RuleSet rs = load_ok(
      "rules:\n  - name: a\n    match: {src: 0.0.0.0/0, dst: 10.0.0.1}\n"
      "    key: src-prefix/128\n    rate: 1pps\n    burst: 1\n");
  ASSERT_EQ(rs.rules.size(), 1u);
  EXPECT_EQ(rs.rules[0].match.src, std::optional<Cidr>(v4(0, 0, 0, 0, 0)));
  EXPECT_EQ(rs.rules[0].match.dst, std::optional<Cidr>(v4(10, 0, 0, 1, 32)));
  EXPECT_EQ(rs.rules[0].key_prefix_len, 128);
}

// --- files ---

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/sluice-rules-XXXXXX";
    int fd = mkstemp(tmpl);
    path_ = tmpl;
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, text.data(), text.size()), ssize_t(text.size()));
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RulesLoaderFile, LoadsAFile) {
  TempFile f(kSpecExample);
  Result<RuleSet> r = load_rules_file(f.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->rules.size(), 2u);
}

TEST(RulesLoaderFile, ErrorsNameThePath) {
  TempFile f("rules:\n  - name: a\n    rate: 10pps\n");
  Result<RuleSet> r = load_rules_file(f.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind(f.path() + ":2: ", 0), 0u) << r.error().message;
}

TEST(RulesLoaderFile, MissingFile) {
  Result<RuleSet> r = load_rules_file("/nonexistent/sluice/rules.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "/nonexistent/sluice/rules.yaml: cannot open: No such file or directory");
}

TEST(RulesLoaderFile, DirectoryIsNotAFile) {
  Result<RuleSet> r = load_rules_file("/tmp");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "/tmp: cannot open: Is a directory");
}

// --- dump ---

// Every field but Rule::line, which is where the rule sits in the new text.
void expect_same_rule(const Rule& a, const Rule& b) {
  SCOPED_TRACE("rule " + a.name);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.match, b.match);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.key_prefix_len, b.key_prefix_len);
  EXPECT_EQ(a.algorithm, b.algorithm);
  EXPECT_EQ(a.rate, b.rate);
  EXPECT_EQ(a.burst, b.burst);
  EXPECT_EQ(a.excess_burst, b.excess_burst);
  EXPECT_EQ(a.peak_rate, b.peak_rate);
  EXPECT_EQ(a.peak_burst, b.peak_burst);
  EXPECT_EQ(a.window_ns, b.window_ns);
  EXPECT_EQ(a.limit, b.limit);
  EXPECT_EQ(a.limit_unit, b.limit_unit);
  EXPECT_EQ(a.max_delay_ns, b.max_delay_ns);
  EXPECT_EQ(a.overhead_bytes, b.overhead_bytes);
  EXPECT_EQ(a.action, b.action);
  EXPECT_EQ(a.colour_actions, b.colour_actions);
  EXPECT_EQ(a.overflow, b.overflow);
  EXPECT_EQ(a.parent, b.parent);
  EXPECT_EQ(a.parent_index, b.parent_index);
  EXPECT_EQ(a.max_flows, b.max_flows);
  EXPECT_EQ(a.idle_timeout_ns, b.idle_timeout_ns);
}

void expect_round_trip(const std::string& text) {
  RuleSet original = load_ok(text);
  std::string dumped = dump_rules_yaml(original);
  Result<RuleSet> again = load_rules_text(dumped, "dump.yaml");
  ASSERT_TRUE(again.ok()) << again.error().message << "\n" << dumped;
  EXPECT_EQ(again->default_action, original.default_action);
  ASSERT_EQ(again->rules.size(), original.rules.size()) << dumped;
  for (size_t i = 0; i < original.rules.size(); ++i)
    expect_same_rule(original.rules[i], again->rules[i]);
  EXPECT_EQ(dump_rules_yaml(*again), dumped) << "dump is not stable";
}

TEST(RulesDump, RoundTripsTheSpecExample) { expect_round_trip(kSpecExample); }
TEST(RulesDump, RoundTripsEveryField) { expect_round_trip(kFullFile); }
TEST(RulesDump, RoundTripsAnEmptySet) { expect_round_trip("default: {action: drop}\nrules: []\n"); }

TEST(RulesDump, RoundTripsOddValues) {
  expect_round_trip(
      "rules:\n"
      "  - name: \"null\"\n"  // a YAML keyword as a name
      "    match: {src: \"::/0\", dst-port: 0-65535, dscp: 0, vlan: 0, port: 0}\n"
      "    rate: 0.5pps\n    burst: 1\n"
      "  - name: \"123\"\n"
      "    rate: 1bit\n    burst: 100\n    idle-timeout: 1.5ms\n    parent: \"null\"\n"
      "  - name: b\n    algorithm: fixed-window\n    window: 90s\n    limit: 1500B\n"
      "  - name: c\n    algorithm: sliding-window\n    window: 7us\n    limit: 3\n");
}

// Found by fuzz_rules_loader: as bits this rate has 26 digits, more than the loader takes.
TEST(RulesDump, RoundTripsARateWithALongBinaryFraction) {
  expect_round_trip("{rules: [{name: gcba, rate: 0.11427788801779539013MiB/s, burst: 15GiB}]}\n");
}

TEST(RulesDump, WritesReadableText) {
  std::string text = dump_rules_yaml(load_ok(kSpecExample));
  EXPECT_NE(text.find("rate: 1kpps"), std::string::npos) << text;
  EXPECT_NE(text.find("rate: 1Gbit"), std::string::npos) << text;
  EXPECT_NE(text.find("burst: 256KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("max-delay: 5ms"), std::string::npos) << text;
  EXPECT_NE(text.find("dst: \"192.0.2.0/24\""), std::string::npos) << text;
  std::string full = dump_rules_yaml(load_ok(kFullFile));
  EXPECT_NE(full.find("burst: 1MB"), std::string::npos) << full;
  EXPECT_NE(full.find("burst: 1500B"), std::string::npos) << full;
  EXPECT_NE(full.find("limit: 64KiB"), std::string::npos) << full;
}

TEST(RulesFormat, Helpers) {
  EXPECT_STREQ(algorithm_name(Algorithm::sliding_window), "sliding-window");
  EXPECT_EQ(key_name(KeyMode::dst_prefix, 48), "dst-prefix/48");
  EXPECT_EQ(key_name(KeyMode::five_tuple, 0), "5-tuple");
  EXPECT_EQ(format_action(Action{ActionKind::mark_dscp, 46}), "mark-dscp:46");
  EXPECT_EQ(format_cidr(v4(192, 0, 2, 0, 24)), "192.0.2.0/24");
  EXPECT_EQ(format_duration(5 * kMs), "5ms");
  EXPECT_EQ(format_duration(90 * kSec), "90s");
  EXPECT_EQ(format_duration(7200 * kSec), "2h");
  EXPECT_EQ(format_duration(1500), "1500ns");
  EXPECT_EQ(format_duration(0), "0ns");
}

}  // namespace
}  // namespace sluice
