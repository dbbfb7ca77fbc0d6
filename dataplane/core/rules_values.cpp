// Spellings of rule values (SPEC §2), both directions: each name table sits next to the
// parser that reads it and the formatter that writes it, so the two cannot drift apart.
#include "rules_values.hpp"

#include <arpa/inet.h>

#include <string>
#include <string_view>
#include <utility>

#include "rules_loader.hpp"

namespace sluice {
namespace {

struct AlgorithmName {
  Algorithm algorithm;
  const char* name;
};
constexpr AlgorithmName kAlgorithmNames[] = {
    {Algorithm::token_bucket, "token-bucket"},
    {Algorithm::gcra, "gcra"},
    {Algorithm::leaky_bucket, "leaky-bucket"},
    {Algorithm::srtcm, "srtcm"},
    {Algorithm::trtcm, "trtcm"},
    {Algorithm::sliding_window, "sliding-window"},
    {Algorithm::fixed_window, "fixed-window"},
};

struct KeyName {
  KeyMode mode;
  const char* name;
};
constexpr KeyName kKeyNames[] = {
    {KeyMode::none, "none"},       {KeyMode::src_ip, "src-ip"},      {KeyMode::dst_ip, "dst-ip"},
    {KeyMode::src_dst, "src-dst"}, {KeyMode::five_tuple, "5-tuple"},
};
constexpr std::string_view kSrcPrefix = "src-prefix/";
constexpr std::string_view kDstPrefix = "dst-prefix/";
static_assert(kSrcPrefix.size() == kDstPrefix.size(), "parse_key reads N after either prefix");

struct ProtoName {
  uint8_t number;
  const char* name;
};
constexpr ProtoName kProtoNames[] = {
    {1, "icmp"}, {6, "tcp"}, {17, "udp"}, {58, "icmpv6"}, {132, "sctp"},
};

constexpr std::string_view kMarkDscp = "mark-dscp:";

char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; }

}  // namespace

namespace rules_internal {

std::string quoted(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxQuotedBytes; ++i) {
    auto c = uint8_t(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  out += '"';
  if (s.size() > kMaxQuotedBytes) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string join(const std::vector<std::string_view>& words) {
  std::string s;
  for (std::string_view w : words) s += (s.empty() ? "" : ", ") + std::string(w);
  return s;
}

bool parse_uint(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = uint64_t(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

Result<uint64_t> parse_ranged(std::string_view s, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  if (!parse_uint(s, hi, &v) || v < lo)
    return invalid_input(hi == UINT64_MAX && lo == 1
                             ? std::string("expected a positive whole number")
                             : "expected a whole number from " + std::to_string(lo) + " to " +
                                   std::to_string(hi));
  return v;
}

bool parse_algorithm(std::string_view s, Algorithm* out) {
  for (const AlgorithmName& a : kAlgorithmNames)
    if (s == a.name) {
      *out = a.algorithm;
      return true;
    }
  return false;
}

Result<std::pair<KeyMode, uint8_t>> parse_key(std::string_view s) {
  // Built only when needed: most keys are good, and a message is an allocation.
  auto bad = [] {
    return invalid_input(
        "expected none, src-ip, dst-ip, src-dst, 5-tuple, src-prefix/N or dst-prefix/N "
        "(N from 1 to 128)");
  };
  for (const KeyName& k : kKeyNames)
    if (s == k.name) return std::pair{k.mode, uint8_t(0)};
  bool src = s.starts_with(kSrcPrefix);
  if (!src && !s.starts_with(kDstPrefix)) return bad();
  uint64_t n = 0;
  if (!parse_uint(s.substr(kSrcPrefix.size()), 128, &n) || n < 1) return bad();
  return std::pair{src ? KeyMode::src_prefix : KeyMode::dst_prefix, uint8_t(n)};
}

Result<uint8_t> parse_proto(std::string_view s) {
  for (const ProtoName& p : kProtoNames)
    if (s == p.name) return p.number;
  uint64_t v = 0;
  if (!parse_uint(s, 255, &v))
    return invalid_input(
        "expected tcp, udp, icmp, icmpv6, sctp or a protocol number from 0 to 255");
  return uint8_t(v);
}

bool has_ports(uint8_t proto) { return proto == 6 || proto == 17 || proto == 132; }

Result<PortRange> parse_port_range(std::string_view s) {
  auto bad = [] { return invalid_input("expected a port (0-65535) or a range lo-hi with lo <= hi"); };
  size_t dash = s.find('-');
  uint64_t lo = 0, hi = 0;
  if (dash == std::string_view::npos) {
    if (!parse_uint(s, 65535, &lo)) return bad();
    hi = lo;
  } else if (!parse_uint(s.substr(0, dash), 65535, &lo) ||
             !parse_uint(s.substr(dash + 1), 65535, &hi) || lo > hi) {
    return bad();
  }
  return PortRange{uint16_t(lo), uint16_t(hi)};
}

// 0-63 or a PHB name (RFC 2474/2597/3246): CSn = 8n, AFxy = 8x + 2y, EF = 46. Names are
// case-insensitive because both spellings are common in router configs.
Result<uint8_t> parse_dscp(std::string_view s) {
  uint64_t v = 0;
  if (parse_uint(s, 63, &v)) return uint8_t(v);
  std::string u;
  for (char c : s) u += ascii_upper(c);
  if (u == "EF") return uint8_t(46);
  if (u.size() == 3 && u.starts_with("CS") && u[2] >= '0' && u[2] <= '7')
    return uint8_t((u[2] - '0') * 8);
  if (u.size() == 4 && u.starts_with("AF") && u[2] >= '1' && u[2] <= '4' && u[3] >= '1' &&
      u[3] <= '3')
    return uint8_t((u[2] - '0') * 8 + (u[3] - '0') * 2);
  return invalid_input("expected a DSCP from 0 to 63, CS0-CS7, AF11-AF43 or EF");
}

Result<Action> parse_action(std::string_view s) {
  if (s == "drop" || s == "pass")
    return Action{s == "drop" ? ActionKind::drop : ActionKind::pass, 0};
  if (s.starts_with(kMarkDscp)) {
    Result<uint8_t> dscp = parse_dscp(s.substr(kMarkDscp.size()));
    if (!dscp) return dscp.error();
    return Action{ActionKind::mark_dscp, *dscp};
  }
  return invalid_input("expected drop, pass or mark-dscp:<0-63, CSn, AFxy or EF>");
}

// "10.1.0.0/16", "2001:db8::/32", or a bare address (a host route). Host bits set below the
// prefix are rejected rather than masked: "10.1.2.3/16" is more likely a typo than intent.
Result<Cidr> parse_cidr(std::string_view s) {
  size_t slash = s.find('/');
  std::string addr(s.substr(0, slash));
  Cidr c;
  if (inet_pton(AF_INET, addr.c_str(), c.addr.data()) == 1) {
    c.family = 4;
  } else if (inet_pton(AF_INET6, addr.c_str(), c.addr.data()) == 1) {
    c.family = 6;
  } else {
    return invalid_input(
        "expected an IPv4 or IPv6 address or prefix, such as 192.0.2.0/24 or 2001:db8::/32");
  }
  uint64_t max_len = c.family == 4 ? 32 : 128;
  uint64_t len = max_len;
  if (slash != std::string_view::npos && !parse_uint(s.substr(slash + 1), max_len, &len))
    return invalid_input("prefix length must be from 0 to " + std::to_string(max_len));
  c.prefix_len = uint8_t(len);
  for (uint64_t bit = len; bit < max_len; ++bit) {
    if (c.addr[bit / 8] & (0x80 >> (bit % 8)))
      return invalid_input("host bits set (the address must end where the /" +
                           std::to_string(len) + " prefix does)");
  }
  return c;
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string proto_name(uint8_t p) {
  for (const ProtoName& n : kProtoNames)
    if (n.number == p) return n.name;
  return std::to_string(p);
}

std::string format_ports(const PortRange& r) {
  return r.lo == r.hi ? std::to_string(r.lo) : std::to_string(r.lo) + "-" + std::to_string(r.hi);
}

}  // namespace rules_internal

// ---------------------------------------------------------------------------------------
// Public names (rules_loader.hpp).

const char* algorithm_name(Algorithm a) {
  for (const AlgorithmName& n : kAlgorithmNames)
    if (n.algorithm == a) return n.name;
  return "unknown";
}

std::string key_name(KeyMode mode, uint8_t prefix_len) {
  if (mode == KeyMode::src_prefix) return std::string(kSrcPrefix) + std::to_string(prefix_len);
  if (mode == KeyMode::dst_prefix) return std::string(kDstPrefix) + std::to_string(prefix_len);
  for (const KeyName& k : kKeyNames)
    if (k.mode == mode) return k.name;
  return "unknown";
}

std::string format_action(const Action& a) {
  switch (a.kind) {
    case ActionKind::pass:
      return "pass";
    case ActionKind::drop:
      return "drop";
    case ActionKind::mark_dscp:
      return std::string(kMarkDscp) + std::to_string(a.dscp);
  }
  return "unknown";
}

std::string format_cidr(const Cidr& c) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(c.family == 4 ? AF_INET : AF_INET6, c.addr.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(c.prefix_len);
}

}  // namespace sluice
