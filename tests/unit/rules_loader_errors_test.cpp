// Rules file loader errors: each class of error is reported as "FILE:LINE: message" at the
// offending line, with a key phrase of the message.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "rules_loader.hpp"

namespace sluice {
namespace {

// One case per class, with the exact line and a key phrase.

struct ErrorCase {
  const char* name;
  const char* text;
  int line;
  const char* phrase;
};

std::ostream& operator<<(std::ostream& o, const ErrorCase& c) { return o << c.name; }

class RulesLoaderError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RulesLoaderError, ReportsFileLineAndReason) {
  const ErrorCase& c = GetParam();
  Result<RuleSet> r = load_rules_text(c.text, "rules.yaml");
  ASSERT_FALSE(r.ok()) << "loaded, expected an error at line " << c.line;
  const std::string& m = r.error().message;
  std::string prefix = "rules.yaml:" + std::to_string(c.line) + ": ";
  EXPECT_EQ(m.substr(0, prefix.size()), prefix) << m;
  EXPECT_NE(m.find(c.phrase), std::string::npos) << m;
}

// A valid token-bucket body, for cases about other fields.
#define TB "    rate: 10pps\n    burst: 5\n"

const ErrorCase kErrorCases[] = {
    // The document.
    {"yaml_syntax", "rules:\n  - name: a\n\trate: 1pps\n", 3, "YAML syntax error: found a tab character"},
    {"yaml_bad_indent", "rules:\n  - name: a\n    rate: 1pps\n   burst: 5\n", 4,
     "YAML syntax error"},
    {"empty_file", "", 1, "empty rules file"},
    {"comment_only", "# nothing here\n", 1, "empty rules file"},
    {"top_not_map", "- a\n- b\n", 1, "expected a map with \"rules:\""},
    {"unknown_top_field", "default: {action: pass}\nrulez: []\n", 2,
     "top level: unknown field \"rulez\" (expected default, rules)"},
    {"two_documents", "rules: []\n---\nrules: []\n", 3, "more than one YAML document"},
    {"rules_not_list", "rules: {name: a}\n", 1, "\"rules\" must be a list"},
    {"rule_not_map", "rules:\n  - just-a-name\n", 2, "rule #1: expected a map of fields"},
    {"default_unknown_field", "default: {action: pass, log: true}\nrules: []\n", 1,
     "default: unknown field \"log\""},
    {"default_bad_action", "rules: []\ndefault:\n  action: reject\n", 3,
     "default: action \"reject\": expected drop, pass or mark-dscp"},
    {"default_not_map", "default: pass\n", 1, "\"default\" must be a map"},
    // Names.
    {"missing_name", "rules:\n  - name: a\n" TB "  - rate: 10pps\n    burst: 5\n", 5,
     "rule #2: missing \"name\""},
    {"invalid_name", "rules:\n  - name: \"bad name\"\n" TB, 2, "invalid name \"bad name\""},
    {"name_too_long",
     "rules:\n  - name: a234567890123456789012345678901234567890123456789012345678901234\n" TB, 2,
     "invalid name"},
    {"name_without_value", "rules:\n  - name:\n" TB, 2, "\"name\" has no value"},
    {"duplicate_name", "rules:\n  - name: a\n" TB "  - name: b\n" TB "  - name: a\n" TB, 8,
     "rule \"a\": duplicate name (first used at line 2)"},
    // Fields.
    {"unknown_rule_field", "rules:\n  - name: a\n" TB "    burts: 6\n", 5,
     "rule \"a\": unknown field \"burts\" (expected name, algorithm, match"},
    {"duplicate_field", "rules:\n  - name: a\n" TB "    rate: 20pps\n", 5,
     "duplicate field \"rate\" (first at line 3)"},
    {"unknown_match_field",
     "rules:\n  - name: a\n    match:\n      proto: udp\n      dport: 53\n" TB, 5,
     "rule \"a\" match: unknown field \"dport\""},
    {"match_not_map", "rules:\n  - name: a\n    match: udp\n" TB, 3, "\"match\" must be a map"},
    {"field_is_a_map", "rules:\n  - name: a\n    rate: {pps: 10}\n    burst: 5\n", 3,
     "\"rate\" must be a single value, not a map"},
    {"field_is_a_list", "rules:\n  - name: a\n    rate: [10pps]\n    burst: 5\n", 3,
     "\"rate\" must be a single value, not a list"},
    {"field_without_value", "rules:\n  - name: a\n    rate:\n    burst: 5\n", 3,
     "\"rate\" has no value"},
    // Algorithms and their fields.
    {"unknown_algorithm",
     "default: {action: pass}\nrules:\n  - name: dns\n    match: {proto: udp, dst-port: 53}\n"
     "    rate: 1000pps\n    burst: 50\n    algorithm: tokenbucket\n",
     7,
     "rules.yaml:7: rule \"dns\": unknown algorithm \"tokenbucket\" (expected token-bucket, gcra, "
     "leaky-bucket, srtcm, trtcm, sliding-window, fixed-window)"},
    {"missing_rate", "rules:\n  - name: a\n    burst: 5\n", 2,
     "algorithm token-bucket needs \"rate\""},
    {"missing_burst", "rules:\n  - name: a\n    algorithm: gcra\n    rate: 10pps\n", 2,
     "algorithm gcra needs \"burst\""},
    {"window_with_rate",
     "rules:\n  - name: a\n    algorithm: fixed-window\n    window: 1s\n    limit: 10\n"
     "    rate: 10pps\n",
     6, "\"rate\" is not used by algorithm fixed-window"},
    {"window_missing_limit", "rules:\n  - name: a\n    algorithm: sliding-window\n    window: 1s\n",
     2, "algorithm sliding-window needs \"limit\""},
    {"max_delay_on_token_bucket", "rules:\n  - name: a\n" TB "    max-delay: 5ms\n", 5,
     "\"max-delay\" is not used by algorithm token-bucket (only by leaky-bucket)"},
    {"leaky_without_max_delay", "rules:\n  - name: a\n    algorithm: leaky-bucket\n" TB, 2,
     "algorithm leaky-bucket needs \"max-delay\""},
    {"action_on_meter", "rules:\n  - name: a\n    algorithm: srtcm\n" TB "    action: drop\n", 6,
     "meters take per-colour actions"},
    {"actions_on_token_bucket", "rules:\n  - name: a\n" TB "    actions: {red: drop}\n", 5,
     "\"actions\" is not used by algorithm token-bucket"},
    {"unknown_colour",
     "rules:\n  - name: a\n    algorithm: srtcm\n" TB
     "    actions:\n      green: pass\n      blue: drop\n",
     8, "rule \"a\" actions: unknown field \"blue\" (expected green, yellow, red)"},
    {"excess_burst_on_trtcm",
     "rules:\n  - name: a\n    algorithm: trtcm\n" TB "    excess-burst: 5\n", 6,
     "\"excess-burst\" is not used by algorithm trtcm (only by srtcm)"},
    {"trtcm_missing_peak_rate",
     "rules:\n  - name: a\n    algorithm: trtcm\n" TB "    peak-burst: 5\n", 2,
     "algorithm trtcm needs \"peak-rate\""},
    {"pir_below_cir",
     "rules:\n  - name: a\n    algorithm: trtcm\n" TB "    peak-rate: 5pps\n    peak-burst: 5\n", 6,
     "peak-rate 5pps is below rate 10pps"},
    {"peak_rate_other_unit",
     "rules:\n  - name: a\n    algorithm: trtcm\n" TB "    peak-rate: 1Mbit\n    peak-burst: 5\n",
     6, "peak-rate and rate must both be pps"},
    {"peak_burst_below_packet",
     "rules:\n  - name: a\n    algorithm: trtcm\n" TB "    peak-rate: 20pps\n    peak-burst: 0\n",
     7, "peak-burst 0 is below the minimum of 1 packet"},
    // Rates, bursts, durations.
    {"bad_rate_unit", "rules:\n  - name: a\n    rate: 10Mbps\n    burst: 5\n", 3,
     "rate \"10Mbps\": unknown unit \"Mbps\""},
    {"zero_rate", "rules:\n  - name: a\n    rate: 0pps\n    burst: 5\n", 3,
     "rate \"0pps\": must be positive"},
    {"negative_rate", "rules:\n  - name: a\n    rate: -5pps\n    burst: 5\n", 3,
     "rate \"-5pps\": must be positive"},
    {"burst_below_packet", "rules:\n  - name: a\n    rate: 10pps\n    burst: 0\n", 4,
     "burst 0 is below the minimum of 1 packet"},
    {"burst_below_64_bytes", "rules:\n  - name: a\n    rate: 1Mbit\n    burst: 63\n", 4,
     "burst 63 is below the minimum of 64 bytes"},
    {"burst_unit_mismatch", "rules:\n  - name: a\n    rate: 10pps\n    burst: 64KiB\n", 4,
     "burst \"64KiB\": a burst for a pps rate is a whole number of packets"},
    {"bad_burst_unit", "rules:\n  - name: a\n    rate: 1Mbit\n    burst: 64KB\n", 4,
     "unknown unit \"KB\""},
    {"max_delay_zero",
     "rules:\n  - name: a\n    algorithm: leaky-bucket\n" TB "    max-delay: 0ms\n", 6,
     "max-delay must be positive"},
    {"bad_duration", "rules:\n  - name: a\n    algorithm: leaky-bucket\n" TB "    max-delay: 5\n",
     6, "max-delay \"5\": missing unit"},
    {"window_zero",
     "rules:\n  - name: a\n    algorithm: fixed-window\n    window: 0s\n    limit: 5\n", 4,
     "window must be positive"},
    {"limit_zero",
     "rules:\n  - name: a\n    algorithm: fixed-window\n    window: 1s\n    limit: 0\n", 5,
     "limit must be positive"},
    {"limit_fractional_packets",
     "rules:\n  - name: a\n    algorithm: fixed-window\n    window: 1s\n    limit: 2.5\n", 5,
     "limit \"2.5\": expected a whole number of packets"},
    {"limit_bad_unit",
     "rules:\n  - name: a\n    algorithm: fixed-window\n    window: 1s\n    limit: 10 packets\n", 5,
     "limit \"10 packets\""},
    {"idle_timeout_zero", "rules:\n  - name: a\n" TB "    idle-timeout: 0s\n", 5,
     "idle-timeout must be positive"},
    {"max_flows_zero", "rules:\n  - name: a\n" TB "    max-flows: 0\n", 5,
     "max-flows \"0\": expected a positive whole number"},
    {"overhead_too_big",
     "rules:\n  - name: a\n    rate: 1Mbit\n    burst: 1500\n    overhead: 1001\n", 5,
     "overhead \"1001\": expected a whole number from 0 to 1000"},
    {"overhead_on_pps", "rules:\n  - name: a\n" TB "    overhead: 24\n", 5,
     "overhead only applies to byte costs"},
    // Match values.
    {"prefix_too_long", "rules:\n  - name: a\n    match: {src: 10.1.0.0/33}\n" TB, 3,
     "src \"10.1.0.0/33\": prefix length must be from 0 to 32"},
    {"host_bits_set", "rules:\n  - name: a\n    match:\n      dst: 10.1.2.3/16\n" TB, 4,
     "dst \"10.1.2.3/16\": host bits set"},
    {"host_bits_set_v6", "rules:\n  - name: a\n    match:\n      src: 2001:db8::1/64\n" TB, 4,
     "host bits set"},
    {"not_an_address", "rules:\n  - name: a\n    match: {dst: example.com}\n" TB, 3,
     "expected an IPv4 or IPv6 address"},
    {"family_mismatch",
     "rules:\n  - name: a\n    match:\n      src: 10.0.0.0/8\n"
     "      dst: 2001:db8::/32\n" TB,
     5, "src and dst must be the same IP family"},
    {"bad_proto", "rules:\n  - name: a\n    match: {proto: tcpp}\n" TB, 3,
     "proto \"tcpp\": expected tcp, udp, icmp, icmpv6, sctp or a protocol number"},
    {"proto_256", "rules:\n  - name: a\n    match: {proto: 256}\n" TB, 3, "proto \"256\""},
    {"port_without_port_proto",
     "rules:\n  - name: a\n    match:\n      proto: icmp\n      dst-port: 53\n" TB, 5,
     "dst-port needs proto tcp, udp or sctp"},
    {"port_range_reversed", "rules:\n  - name: a\n    match: {dst-port: 2000-1000}\n" TB, 3,
     "dst-port \"2000-1000\": expected a port (0-65535) or a range lo-hi with lo <= hi"},
    {"port_too_big", "rules:\n  - name: a\n    match: {src-port: 65536}\n" TB, 3,
     "src-port \"65536\""},
    {"vlan_4096", "rules:\n  - name: a\n    match: {vlan: 4096}\n" TB, 3,
     "vlan \"4096\": expected a whole number from 0 to 4095"},
    {"dscp_64", "rules:\n  - name: a\n    match: {dscp: 64}\n" TB, 3,
     "dscp \"64\": expected a DSCP from 0 to 63, CS0-CS7, AF11-AF43 or EF"},
    {"dscp_bad_name", "rules:\n  - name: a\n    match: {dscp: AF44}\n" TB, 3, "dscp \"AF44\""},
    {"ingress_port_negative", "rules:\n  - name: a\n    match: {port: -1}\n" TB, 3,
     "port \"-1\": expected a whole number from 0 to 65535"},
    // Keys and actions.
    {"bad_key", "rules:\n  - name: a\n    key: src\n" TB, 3,
     "key \"src\": expected none, src-ip, dst-ip, src-dst, 5-tuple, src-prefix/N or dst-prefix/N"},
    {"prefix_key_zero", "rules:\n  - name: a\n    key: src-prefix/0\n" TB, 3,
     "key \"src-prefix/0\""},
    {"prefix_key_129", "rules:\n  - name: a\n    key: dst-prefix/129\n" TB, 3,
     "key \"dst-prefix/129\""},
    {"bad_action", "rules:\n  - name: a\n" TB "    action: reject\n", 5,
     "action \"reject\": expected drop, pass or mark-dscp:<0-63, CSn, AFxy or EF>"},
    {"mark_dscp_64", "rules:\n  - name: a\n" TB "    action: mark-dscp:64\n", 5,
     "action \"mark-dscp:64\": expected a DSCP"},
    {"bad_overflow", "rules:\n  - name: a\n" TB "    overflow: evict\n", 5, "overflow \"evict\""},
    // Hierarchy.
    {"unknown_parent", "rules:\n  - name: a\n" TB "    parent: nobody\n", 5,
     "rule \"a\": unknown parent \"nobody\""},
    {"parent_cycle",
     "rules:\n  - name: c\n" TB "  - name: a\n" TB "    parent: b\n  - name: b\n" TB
     "    parent: a\n",
     8, "rule \"a\": parent cycle a -> b -> a"},
    {"self_parent", "rules:\n  - name: a\n" TB "    parent: a\n", 5, "parent cycle a -> a"},
    {"meter_with_parent",
     "rules:\n  - name: p\n" TB "  - name: m\n    algorithm: srtcm\n" TB "    parent: p\n", 9,
     "meter rules (srtcm, trtcm) cannot have a parent"},
    {"meter_as_parent",
     "rules:\n  - name: m\n    algorithm: trtcm\n" TB "    peak-rate: 20pps\n    peak-burst: 5\n"
     "  - name: c\n" TB "    parent: m\n",
     11, "parent \"m\" is a trtcm meter; meters cannot be parents"},
    {"leaky_with_parent",
     "rules:\n  - name: p\n" TB "  - name: s\n    algorithm: leaky-bucket\n" TB
     "    max-delay: 1ms\n    parent: p\n",
     10, "leaky-bucket rules cannot have a parent"},
    // Numeric ranges from check_rule_limits (limiter_profile.hpp), prefixed with the rule.
    {"profile_limits",
     "rules:\n  - name: ok\n" TB "  - name: slow\n    algorithm: leaky-bucket\n" TB
     "    max-delay: 61s\n",
     5, "rule \"slow\": "},
};

#undef TB

INSTANTIATE_TEST_SUITE_P(Cases, RulesLoaderError, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace sluice
