// Rules file loader (SPEC §2). Three layers, each with one job:
//   1. scalar parsers: text -> value, with a reason on failure (no YAML, no line numbers);
//   2. RuleParser: one YAML rule map -> Rule, driven by a field table that says which
//      algorithms use and require each field;
//   3. Loader: the document, duplicate names, parent resolution and cycles.
// Every error leaves as "FILE:LINE: message"; nothing throws past load_rules_text.
#include "rules_loader.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "limiter_profile.hpp"
#include "rate.hpp"

namespace sluice {
namespace {

// ---------------------------------------------------------------------------------------
// Layer 1: scalar parsers.

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Decimal digits only: no sign, no hex, no spaces, so "0x10" or "+5" are rejected.
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

// A whole number in [lo, hi], with the range in the reason.
bool parse_ranged(std::string_view s, uint64_t lo, uint64_t hi, uint64_t* out, std::string* why) {
  uint64_t v = 0;
  if (!parse_uint(s, hi, &v) || v < lo) {
    *why = hi == UINT64_MAX && lo == 1
               ? std::string("expected a positive whole number")
               : "expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
    return false;
  }
  *out = v;
  return true;
}

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
constexpr const char* kAlgorithmList =
    "token-bucket, gcra, leaky-bucket, srtcm, trtcm, sliding-window, fixed-window";

bool parse_algorithm(std::string_view s, Algorithm* out) {
  for (const AlgorithmName& a : kAlgorithmNames)
    if (s == a.name) {
      *out = a.algorithm;
      return true;
    }
  return false;
}

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

bool parse_key(std::string_view s, KeyMode* mode, uint8_t* prefix_len, std::string* why) {
  *why =
      "expected none, src-ip, dst-ip, src-dst, 5-tuple, src-prefix/N or dst-prefix/N "
      "(N from 1 to 128)";
  for (const KeyName& k : kKeyNames)
    if (s == k.name) {
      *mode = k.mode;
      *prefix_len = 0;
      return true;
    }
  bool src = s.starts_with(kSrcPrefix);
  if (!src && !s.starts_with(kDstPrefix)) return false;
  uint64_t n = 0;
  if (!parse_uint(s.substr(kSrcPrefix.size()), 128, &n) || n < 1) return false;
  *mode = src ? KeyMode::src_prefix : KeyMode::dst_prefix;
  *prefix_len = uint8_t(n);
  return true;
}

struct ProtoName {
  uint8_t number;
  const char* name;
};
constexpr ProtoName kProtoNames[] = {
    {1, "icmp"}, {6, "tcp"}, {17, "udp"}, {58, "icmpv6"}, {132, "sctp"},
};

bool parse_proto(std::string_view s, uint8_t* out, std::string* why) {
  for (const ProtoName& p : kProtoNames)
    if (s == p.name) {
      *out = p.number;
      return true;
    }
  uint64_t v = 0;
  if (!parse_uint(s, 255, &v)) {
    *why = "expected tcp, udp, icmp, icmpv6, sctp or a protocol number from 0 to 255";
    return false;
  }
  *out = uint8_t(v);
  return true;
}

// Port protocols: the only ones whose ports the classifier reads.
bool has_ports(uint8_t proto) { return proto == 6 || proto == 17 || proto == 132; }

bool parse_port_range(std::string_view s, PortRange* out, std::string* why) {
  *why = "expected a port (0-65535) or a range lo-hi with lo <= hi";
  size_t dash = s.find('-');
  uint64_t lo = 0, hi = 0;
  if (dash == std::string_view::npos) {
    if (!parse_uint(s, 65535, &lo)) return false;
    hi = lo;
  } else if (!parse_uint(s.substr(0, dash), 65535, &lo) ||
             !parse_uint(s.substr(dash + 1), 65535, &hi) || lo > hi) {
    return false;
  }
  *out = PortRange{uint16_t(lo), uint16_t(hi)};
  return true;
}

char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; }

// 0-63 or a PHB name (RFC 2474/2597/3246): CSn = 8n, AFxy = 8x + 2y, EF = 46. Names are
// case-insensitive because both spellings are common in router configs.
bool parse_dscp(std::string_view s, uint8_t* out, std::string* why) {
  *why = "expected a DSCP from 0 to 63, CS0-CS7, AF11-AF43 or EF";
  uint64_t v = 0;
  if (parse_uint(s, 63, &v)) {
    *out = uint8_t(v);
    return true;
  }
  std::string u;
  for (char c : s) u += ascii_upper(c);
  if (u == "EF") {
    *out = 46;
    return true;
  }
  if (u.size() == 3 && u.starts_with("CS") && u[2] >= '0' && u[2] <= '7') {
    *out = uint8_t((u[2] - '0') * 8);
    return true;
  }
  if (u.size() == 4 && u.starts_with("AF") && u[2] >= '1' && u[2] <= '4' && u[3] >= '1' &&
      u[3] <= '3') {
    *out = uint8_t((u[2] - '0') * 8 + (u[3] - '0') * 2);
    return true;
  }
  return false;
}

constexpr std::string_view kMarkDscp = "mark-dscp:";

bool parse_action(std::string_view s, Action* out, std::string* why) {
  if (s == "drop" || s == "pass") {
    *out = Action{s == "drop" ? ActionKind::drop : ActionKind::pass, 0};
    return true;
  }
  if (s.starts_with(kMarkDscp)) {
    uint8_t dscp = 0;
    if (!parse_dscp(s.substr(kMarkDscp.size()), &dscp, why)) return false;
    *out = Action{ActionKind::mark_dscp, dscp};
    return true;
  }
  *why = "expected drop, pass or mark-dscp:<0-63, CSn, AFxy or EF>";
  return false;
}

// "10.1.0.0/16", "2001:db8::/32", or a bare address (a host route). Host bits set below the
// prefix are rejected rather than masked: "10.1.2.3/16" is more likely a typo than intent.
bool parse_cidr(std::string_view s, Cidr* out, std::string* why) {
  size_t slash = s.find('/');
  std::string addr(s.substr(0, slash));
  Cidr c;
  if (inet_pton(AF_INET, addr.c_str(), c.addr.data()) == 1) {
    c.family = 4;
  } else if (inet_pton(AF_INET6, addr.c_str(), c.addr.data()) == 1) {
    c.family = 6;
  } else {
    *why = "expected an IPv4 or IPv6 address or prefix, such as 192.0.2.0/24 or 2001:db8::/32";
    return false;
  }
  uint64_t max_len = c.family == 4 ? 32 : 128;
  uint64_t len = max_len;
  if (slash != std::string_view::npos && !parse_uint(s.substr(slash + 1), max_len, &len)) {
    *why = "prefix length must be from 0 to " + std::to_string(max_len);
    return false;
  }
  c.prefix_len = uint8_t(len);
  for (uint64_t bit = len; bit < max_len; ++bit) {
    if (c.addr[bit / 8] & (0x80 >> (bit % 8))) {
      *why =
          "host bits set (the address must end where the /" + std::to_string(len) + " prefix does)";
      return false;
    }
  }
  *out = c;
  return true;
}

// [A-Za-z0-9_.-]{1,63}: names appear in counters, metrics labels and CLI arguments.
bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// a >= b for exact rationals (64-bit parts; the products fit in 128 bits).
bool rate_at_least(const Rate& a, const Rate& b) {
  using u128 = unsigned __int128;
  return u128(a.per_sec_num) * b.per_sec_den >= u128(b.per_sec_num) * a.per_sec_den;
}

// Smallest bucket that holds one packet: SPEC §2.
uint64_t min_burst(CostUnit unit) { return unit == CostUnit::packets ? 1 : kMinFrameBytes; }

const char* unit_words(CostUnit unit) {
  return unit == CostUnit::packets ? "1 packet (pps rates)" : "64 bytes (byte rates)";
}

// ---------------------------------------------------------------------------------------
// Layer 2: YAML maps -> fields -> Rule.

int line_of(const YAML::Node& n) { return n.Mark().line + 1; }

struct Field {
  std::string key;
  YAML::Node value;
  int line;  // of the key: a missing value has no position of its own
};

using Fields = std::vector<Field>;

const Field* find_field(const Fields& fields, std::string_view key) {
  for (const Field& f : fields)
    if (f.key == key) return &f;
  return nullptr;
}

std::string join(const std::vector<std::string_view>& words) {
  std::string s;
  for (std::string_view w : words) s += (s.empty() ? "" : ", ") + std::string(w);
  return s;
}

// Formats "FILE:LINE: message" for one file.
class Messages {
 public:
  explicit Messages(std::string file) : file_(std::move(file)) {}
  Error at(int line, const std::string& msg) const {
    return make_error(file_ + ":" + std::to_string(line < 1 ? 1 : line) + ": " + msg);
  }

 private:
  std::string file_;
};

// Lists a map's fields, rejecting duplicates and names outside `allowed`. `where` names the
// map in messages ("rule \"dns\"", "rule \"dns\" match").
Result<Fields> collect_fields(const Messages& msg, const YAML::Node& map,
                              const std::vector<std::string_view>& allowed,
                              const std::string& where) {
  Fields fields;
  for (auto it = map.begin(); it != map.end(); ++it) {
    int line = line_of(it->first);
    if (!it->first.IsScalar()) return msg.at(line, where + ": field names must be plain words");
    std::string key = it->first.Scalar();
    if (const Field* first = find_field(fields, key))
      return msg.at(line, where + ": duplicate field " + quoted(key) + " (first at line " +
                              std::to_string(first->line) + ")");
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known)
      return msg.at(line,
                    where + ": unknown field " + quoted(key) + " (expected " + join(allowed) + ")");
    fields.push_back(Field{key, it->second, line});
  }
  return fields;
}

Status require_map(const Messages& msg, const Field& f, const std::string& where) {
  if (!f.value.IsMap())
    return msg.at(f.line, where + ": " + quoted(f.key) + " must be a map of fields");
  return Ok{};
}

Result<std::string> scalar_of(const Messages& msg, const Field& f, const std::string& where) {
  if (f.value.IsNull()) return msg.at(f.line, where + ": " + quoted(f.key) + " has no value");
  if (!f.value.IsScalar())
    return msg.at(f.line, where + ": " + quoted(f.key) + " must be a single value, not a " +
                              (f.value.IsMap() ? "map" : "list"));
  return f.value.Scalar();
}

// Reads a scalar field with `parse(text, &value, &why)`; a failure reads
// `WHERE: KEY "TEXT": WHY`.
template <class T, class Parse>
Result<T> parse_field(const Messages& msg, const Field& f, const std::string& where, Parse parse) {
  Result<std::string> text = scalar_of(msg, f, where);
  if (!text) return text.error();
  T value{};
  std::string why;
  if (!parse(*text, &value, &why))
    return msg.at(f.line, where + ": " + f.key + " " + quoted(*text) + ": " + why);
  return value;
}

// Algorithm sets as bit masks, for the field table.
using AlgoMask = uint8_t;
constexpr AlgoMask algo_bit(Algorithm a) { return AlgoMask(1u << unsigned(a)); }
constexpr AlgoMask kAllAlgos = 0x7f;
static_assert(unsigned(Algorithm::fixed_window) == 6, "kAllAlgos must cover every algorithm");
constexpr AlgoMask kMeters = algo_bit(Algorithm::srtcm) | algo_bit(Algorithm::trtcm);
constexpr AlgoMask kWindows =
    algo_bit(Algorithm::sliding_window) | algo_bit(Algorithm::fixed_window);
constexpr AlgoMask kBuckets = kAllAlgos & AlgoMask(~kWindows);
constexpr AlgoMask kLeaky = algo_bit(Algorithm::leaky_bucket);
constexpr AlgoMask kSrtcm = algo_bit(Algorithm::srtcm);
constexpr AlgoMask kTrtcm = algo_bit(Algorithm::trtcm);

std::string algorithms_in(AlgoMask mask) {
  std::vector<std::string_view> names;
  for (const AlgorithmName& a : kAlgorithmNames)
    if (mask & algo_bit(a.algorithm)) names.push_back(a.name);
  return join(names);
}

class RuleParser;
using Apply = Status (RuleParser::*)(const Field&);

// One row per rule field: which algorithms use it, which require it, how to apply it. Rows
// are applied in table order, so a field's prerequisites (rate before burst) come first.
struct RuleField {
  std::string_view key;
  AlgoMask allowed;
  AlgoMask required;
  Apply apply;       // nullptr: read before the table is applied (name, algorithm)
  const char* hint;  // added when the field is used with an algorithm that has no use for it
};

// Parses one rule map. Checks that need other rules (names, parents) are the Loader's.
class RuleParser {
 public:
  RuleParser(const Messages& msg, const YAML::Node& node, size_t index)
      : msg_(msg), node_(node), index_(index) {}

  Result<Rule> parse();
  int parent_line() const { return parent_line_; }

  Status apply_match(const Field& f);
  Status apply_key(const Field& f);
  Status apply_rate(const Field& f);
  Status apply_peak_rate(const Field& f);
  Status apply_burst(const Field& f);
  Status apply_excess_burst(const Field& f);
  Status apply_peak_burst(const Field& f);
  Status apply_window(const Field& f);
  Status apply_limit(const Field& f);
  Status apply_max_delay(const Field& f);
  Status apply_overhead(const Field& f);
  Status apply_action(const Field& f);
  Status apply_actions(const Field& f);
  Status apply_overflow(const Field& f);
  Status apply_parent(const Field& f);
  Status apply_max_flows(const Field& f);
  Status apply_idle_timeout(const Field& f);

 private:
  std::string label_guess() const;
  Status read_name(const Fields& fields);
  Status read_algorithm(const Fields& fields);
  Status check_fields_for_algorithm(const Fields& fields) const;
  Status apply_fields(const Fields& fields);
  Status check_limits() const;
  Status apply_match_field(const Field& f, const std::string& where);
  Status check_match(const Fields& fields, const std::string& where) const;
  Result<uint64_t> bucket_size(const Field& f, CostUnit unit, bool allow_zero);
  Result<uint64_t> positive_duration(const Field& f);

  const Messages& msg_;
  YAML::Node node_;  // a handle: cheap to copy, shares the document
  size_t index_;
  std::string label_;  // "rule \"NAME\"" once the name is known, else "rule #N"
  Rule rule_;
  int parent_line_ = 0;
};

const std::vector<RuleField>& rule_fields() {
  static const std::vector<RuleField> table = {
      {"name", kAllAlgos, kAllAlgos, nullptr, nullptr},
      {"algorithm", kAllAlgos, 0, nullptr, nullptr},
      {"match", kAllAlgos, 0, &RuleParser::apply_match, nullptr},
      {"key", kAllAlgos, 0, &RuleParser::apply_key, nullptr},
      {"rate", kBuckets, kBuckets, &RuleParser::apply_rate, "windows take window and limit"},
      {"peak-rate", kTrtcm, kTrtcm, &RuleParser::apply_peak_rate, nullptr},
      {"burst", kBuckets, kBuckets, &RuleParser::apply_burst, "windows take window and limit"},
      {"excess-burst", kSrtcm, 0, &RuleParser::apply_excess_burst, nullptr},
      {"peak-burst", kTrtcm, kTrtcm, &RuleParser::apply_peak_burst, nullptr},
      {"window", kWindows, kWindows, &RuleParser::apply_window, nullptr},
      {"limit", kWindows, kWindows, &RuleParser::apply_limit, nullptr},
      {"max-delay", kLeaky, kLeaky, &RuleParser::apply_max_delay, nullptr},
      {"overhead", kAllAlgos, 0, &RuleParser::apply_overhead, nullptr},
      {"action", kAllAlgos & AlgoMask(~kMeters), 0, &RuleParser::apply_action,
       "meters take per-colour actions: {green: ..., yellow: ..., red: ...}"},
      {"actions", kMeters, 0, &RuleParser::apply_actions, "use action: for a single action"},
      {"overflow", kAllAlgos, 0, &RuleParser::apply_overflow, nullptr},
      {"parent", kAllAlgos, 0, &RuleParser::apply_parent, nullptr},
      {"max-flows", kAllAlgos, 0, &RuleParser::apply_max_flows, nullptr},
      {"idle-timeout", kAllAlgos, 0, &RuleParser::apply_idle_timeout, nullptr},
  };
  return table;
}

std::vector<std::string_view> rule_field_names() {
  std::vector<std::string_view> names;
  for (const RuleField& f : rule_fields()) names.push_back(f.key);
  return names;
}

Result<Rule> RuleParser::parse() {
  rule_.line = line_of(node_);
  label_ = "rule #" + std::to_string(index_ + 1);
  if (!node_.IsMap())
    return msg_.at(rule_.line, label_ + ": expected a map of fields (name, match, rate, ...)");
  label_ = label_guess();
  Result<Fields> fields = collect_fields(msg_, node_, rule_field_names(), label_);
  if (!fields) return fields.error();
  for (auto step :
       {&RuleParser::read_name, &RuleParser::read_algorithm, &RuleParser::apply_fields}) {
    if (Status s = (this->*step)(*fields); !s) return s.error();
  }
  if (Status s = check_limits(); !s) return s.error();
  return rule_;
}

// Names the rule in messages about its other fields, even before the name is validated.
std::string RuleParser::label_guess() const {
  const YAML::Node name = node_["name"];
  if (name && name.IsScalar() && valid_name(name.Scalar())) return "rule " + quoted(name.Scalar());
  return "rule #" + std::to_string(index_ + 1);
}

Status RuleParser::read_name(const Fields& fields) {
  const Field* f = find_field(fields, "name");
  if (f == nullptr) return msg_.at(rule_.line, label_ + ": missing \"name\"");
  Result<std::string> name = scalar_of(msg_, *f, label_);
  if (!name) return name.error();
  if (!valid_name(*name))
    return msg_.at(f->line, label_ + ": invalid name " + quoted(*name) +
                                " (1 to 63 characters from A-Z a-z 0-9 _ . -)");
  rule_.name = *name;
  return Ok{};
}

Status RuleParser::read_algorithm(const Fields& fields) {
  const Field* f = find_field(fields, "algorithm");
  if (f != nullptr) {
    Result<std::string> text = scalar_of(msg_, *f, label_);
    if (!text) return text.error();
    if (!parse_algorithm(*text, &rule_.algorithm))
      return msg_.at(f->line, label_ + ": unknown algorithm " + quoted(*text) + " (expected " +
                                  kAlgorithmList + ")");
  }
  return check_fields_for_algorithm(fields);
}

// Each algorithm has its own parameters; a field it ignores is a mistake worth reporting.
// Stray fields are reported before missing ones: "rate is not used by fixed-window" says
// more than "fixed-window needs limit" when someone wrote a bucket rule as a window.
Status RuleParser::check_fields_for_algorithm(const Fields& fields) const {
  AlgoMask me = algo_bit(rule_.algorithm);
  const char* algo = algorithm_name(rule_.algorithm);
  for (const RuleField& spec : rule_fields()) {
    const Field* f = find_field(fields, spec.key);
    if (f == nullptr || (spec.allowed & me)) continue;
    std::string m = label_ + ": " + quoted(spec.key) + " is not used by algorithm " + algo +
                    " (only by " + algorithms_in(spec.allowed) + ")";
    if (spec.hint != nullptr) m += "; " + std::string(spec.hint);
    return msg_.at(f->line, m);
  }
  for (const RuleField& spec : rule_fields()) {
    if ((spec.required & me) && find_field(fields, spec.key) == nullptr)
      return msg_.at(rule_.line, label_ + ": algorithm " + algo + " needs " + quoted(spec.key));
  }
  return Ok{};
}

Status RuleParser::apply_fields(const Fields& fields) {
  for (const RuleField& spec : rule_fields()) {
    const Field* f = find_field(fields, spec.key);
    if (f == nullptr || spec.apply == nullptr) continue;
    if (Status s = (this->*spec.apply)(*f); !s) return s;
  }
  return Ok{};
}

// The lead's numeric range checks (limiter_profile.hpp), reported at the rule's line.
Status RuleParser::check_limits() const {
  Status s = check_rule_limits(rule_);
  if (!s) return msg_.at(rule_.line, label_ + ": " + s.error().message);
  return Ok{};
}

const std::vector<std::string_view> kMatchFields = {"src",      "dst",  "proto", "src-port",
                                                    "dst-port", "vlan", "dscp",  "port"};

Status RuleParser::apply_match(const Field& f) {
  std::string where = label_ + " match";
  if (Status s = require_map(msg_, f, label_); !s) return s;
  Result<Fields> fields = collect_fields(msg_, f.value, kMatchFields, where);
  if (!fields) return fields.error();
  for (const Field& m : *fields)
    if (Status s = apply_match_field(m, where); !s) return s;
  return check_match(*fields, where);
}

Status RuleParser::apply_match_field(const Field& f, const std::string& where) {
  Match& m = rule_.match;
  auto store = [&](auto& slot, auto parse) -> Status {
    using T = typename std::remove_reference_t<decltype(slot)>::value_type;
    Result<T> v = parse_field<T>(msg_, f, where, parse);
    if (!v) return v.error();
    slot = *v;
    return Ok{};
  };
  auto ranged = [](uint64_t hi) {
    return [hi](const std::string& s, auto* out, std::string* why) {
      uint64_t v = 0;
      if (!parse_ranged(s, 0, hi, &v, why)) return false;
      *out = std::remove_pointer_t<decltype(out)>(v);
      return true;
    };
  };
  if (f.key == "src") return store(m.src, parse_cidr);
  if (f.key == "dst") return store(m.dst, parse_cidr);
  if (f.key == "proto") return store(m.proto, parse_proto);
  if (f.key == "src-port") return store(m.src_port, parse_port_range);
  if (f.key == "dst-port") return store(m.dst_port, parse_port_range);
  if (f.key == "vlan") return store(m.vlan, ranged(4095));
  if (f.key == "dscp") return store(m.dscp, parse_dscp);
  return store(m.port, ranged(65535));  // "port": collect_fields allowed nothing else
}

// Combinations that could never match a packet are almost certainly mistakes.
Status RuleParser::check_match(const Fields& fields, const std::string& where) const {
  const Match& m = rule_.match;
  if (m.src && m.dst && m.src->family != m.dst->family)
    return msg_.at(find_field(fields, "dst")->line,
                   where + ": src and dst must be the same IP family (both IPv4 or both IPv6)");
  for (const char* key : {"src-port", "dst-port"}) {
    const Field* f = find_field(fields, key);
    if (f != nullptr && m.proto && !has_ports(*m.proto))
      return msg_.at(f->line, where + ": " + key + " needs proto tcp, udp or sctp (proto " +
                                  std::to_string(*m.proto) + " has no ports)");
  }
  return Ok{};
}

Status RuleParser::apply_key(const Field& f) {
  Result<std::pair<KeyMode, uint8_t>> k = parse_field<std::pair<KeyMode, uint8_t>>(
      msg_, f, label_,
      [](const std::string& s, std::pair<KeyMode, uint8_t>* out, std::string* why) {
        return parse_key(s, &out->first, &out->second, why);
      });
  if (!k) return k.error();
  rule_.key = k->first;
  rule_.key_prefix_len = k->second;
  return Ok{};
}

Status RuleParser::apply_rate(const Field& f) {
  Result<Rate> r = parse_field<Rate>(msg_, f, label_, parse_rate);
  if (!r) return r.error();
  rule_.rate = *r;
  return Ok{};
}

// trtcm: PIR is measured in the same tokens as CIR and is never below it (RFC 2698).
Status RuleParser::apply_peak_rate(const Field& f) {
  Result<Rate> r = parse_field<Rate>(msg_, f, label_, parse_rate);
  if (!r) return r.error();
  if (r->unit != rule_.rate.unit)
    return msg_.at(f.line, label_ +
                               ": peak-rate and rate must both be pps or both be bit/byte "
                               "rates");
  if (!rate_at_least(*r, rule_.rate))
    return msg_.at(f.line, label_ + ": peak-rate " + format_rate(*r) + " is below rate " +
                               format_rate(rule_.rate) + " (PIR must be >= CIR)");
  rule_.peak_rate = *r;
  return Ok{};
}

// A bucket size in the rule's cost unit, at least one packet unless allow_zero (EBS).
Result<uint64_t> RuleParser::bucket_size(const Field& f, CostUnit unit, bool allow_zero) {
  Result<uint64_t> b = parse_field<uint64_t>(
      msg_, f, label_, [unit](const std::string& s, uint64_t* out, std::string* why) {
        return parse_burst(s, unit, out, why);
      });
  if (!b) return b;
  if (!(allow_zero && *b == 0) && *b < min_burst(unit))
    return msg_.at(f.line, label_ + ": " + f.key + " " + std::to_string(*b) +
                               " is below the minimum of " + unit_words(unit));
  return b;
}

Status RuleParser::apply_burst(const Field& f) {
  Result<uint64_t> b = bucket_size(f, rule_.rate.unit, false);
  if (!b) return b.error();
  rule_.burst = *b;
  return Ok{};
}

Status RuleParser::apply_excess_burst(const Field& f) {
  Result<uint64_t> b = bucket_size(f, rule_.rate.unit, true);
  if (!b) return b.error();
  rule_.excess_burst = *b;
  return Ok{};
}

Status RuleParser::apply_peak_burst(const Field& f) {
  Result<uint64_t> b = bucket_size(f, rule_.rate.unit, false);
  if (!b) return b.error();
  rule_.peak_burst = *b;
  return Ok{};
}

Result<uint64_t> RuleParser::positive_duration(const Field& f) {
  Result<uint64_t> d = parse_field<uint64_t>(msg_, f, label_, parse_duration);
  if (d && *d == 0) return msg_.at(f.line, label_ + ": " + f.key + " must be positive");
  return d;
}

Status RuleParser::apply_window(const Field& f) {
  Result<uint64_t> d = positive_duration(f);
  if (!d) return d.error();
  rule_.window_ns = *d;
  return Ok{};
}

// A window limit is packets when it is a bare number and bytes when it carries a size unit
// ("1500B", "64KiB"), so "1500" and "1500B" mean different things on purpose.
Status RuleParser::apply_limit(const Field& f) {
  Result<std::string> text = scalar_of(msg_, f, label_);
  if (!text) return text.error();
  bool bare = text->find_first_not_of("0123456789.") == std::string::npos;
  CostUnit unit = bare ? CostUnit::packets : CostUnit::bytes;
  uint64_t v = 0;
  std::string why = "expected a whole number of packets";
  bool ok = bare ? parse_uint(*text, UINT64_MAX, &v) : parse_burst(*text, unit, &v, &why);
  if (!ok)
    return msg_.at(f.line, label_ + ": limit " + quoted(*text) + ": " + why +
                               " (a limit is packets, such as 100, or bytes with a unit, such "
                               "as 1500B or 64KiB)");
  if (v == 0) return msg_.at(f.line, label_ + ": limit must be positive");
  rule_.limit = v;
  rule_.limit_unit = unit;
  return Ok{};
}

Status RuleParser::apply_max_delay(const Field& f) {
  Result<uint64_t> d = positive_duration(f);
  if (!d) return d.error();
  rule_.max_delay_ns = *d;
  return Ok{};
}

// Overhead is bytes added to each packet's cost, so it only means something for byte costs.
Status RuleParser::apply_overhead(const Field& f) {
  Result<uint64_t> v = parse_field<uint64_t>(
      msg_, f, label_, [](const std::string& s, uint64_t* out, std::string* why) {
        return parse_ranged(s, 0, 1000, out, why);
      });
  if (!v) return v.error();
  if (rule_.cost_unit() != CostUnit::bytes)
    return msg_.at(f.line, label_ +
                               ": overhead only applies to byte costs (a bit/s or byte/s "
                               "rate, or a byte limit)");
  rule_.overhead_bytes = uint32_t(*v);
  return Ok{};
}

Status RuleParser::apply_action(const Field& f) {
  Result<Action> a = parse_field<Action>(msg_, f, label_, parse_action);
  if (!a) return a.error();
  rule_.action = *a;
  return Ok{};
}

Status RuleParser::apply_actions(const Field& f) {
  std::string where = label_ + " actions";
  if (Status s = require_map(msg_, f, label_); !s) return s;
  Result<Fields> colours = collect_fields(msg_, f.value, {"green", "yellow", "red"}, where);
  if (!colours) return colours.error();
  for (const Field& c : *colours) {
    Result<Action> a = parse_field<Action>(msg_, c, where, parse_action);
    if (!a) return a.error();
    Action& slot = c.key == "green"    ? rule_.colour_actions.green
                   : c.key == "yellow" ? rule_.colour_actions.yellow
                                       : rule_.colour_actions.red;
    slot = *a;
  }
  return Ok{};
}

Status RuleParser::apply_overflow(const Field& f) {
  Result<Action> a = parse_field<Action>(msg_, f, label_, parse_action);
  if (!a) return a.error();
  rule_.overflow = *a;
  return Ok{};
}

// Only the name is read here; the Loader resolves it once every rule is known.
Status RuleParser::apply_parent(const Field& f) {
  Result<std::string> name = scalar_of(msg_, f, label_);
  if (!name) return name.error();
  if (!valid_name(*name)) return msg_.at(f.line, label_ + ": invalid parent name " + quoted(*name));
  rule_.parent = *name;
  parent_line_ = f.line;
  return Ok{};
}

Status RuleParser::apply_max_flows(const Field& f) {
  Result<uint64_t> v = parse_field<uint64_t>(
      msg_, f, label_, [](const std::string& s, uint64_t* out, std::string* why) {
        return parse_ranged(s, 1, UINT64_MAX, out, why);
      });
  if (!v) return v.error();
  rule_.max_flows = *v;
  return Ok{};
}

Status RuleParser::apply_idle_timeout(const Field& f) {
  Result<uint64_t> d = positive_duration(f);
  if (!d) return d.error();
  rule_.idle_timeout_ns = *d;
  return Ok{};
}

// ---------------------------------------------------------------------------------------
// Layer 3: the document and checks across rules.

class Loader {
 public:
  explicit Loader(const std::string& file) : msg_(file) {}
  Result<RuleSet> load(const std::string& text);

 private:
  Result<YAML::Node> parse_document(const std::string& text) const;
  Status read_default(const Field& f);
  Status read_rules(const Field& f);
  Status add_rule(const YAML::Node& node, size_t index);
  Status resolve_parents();
  Status check_parent(size_t child) const;
  Status check_cycles() const;

  Messages msg_;
  RuleSet set_;
  std::map<std::string, size_t> index_by_name_;
  std::vector<int> parent_lines_;  // per rule, the line of its parent field
};

Result<RuleSet> Loader::load(const std::string& text) {
  Result<YAML::Node> root = parse_document(text);
  if (!root) return root.error();
  Result<Fields> top = collect_fields(msg_, *root, {"default", "rules"}, "top level");
  if (!top) return top.error();
  if (const Field* f = find_field(*top, "default"))
    if (Status s = read_default(*f); !s) return s.error();
  if (const Field* f = find_field(*top, "rules"))
    if (Status s = read_rules(*f); !s) return s.error();
  if (Status s = resolve_parents(); !s) return s.error();
  return std::move(set_);
}

// One YAML document holding a map. Syntax errors carry yaml-cpp's position.
Result<YAML::Node> Loader::parse_document(const std::string& text) const {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    return msg_.at(e.mark.line + 1, "YAML syntax error: " + e.msg);
  }
  if (docs.empty() || docs[0].IsNull())
    return msg_.at(1,
                   "empty rules file (expected a map with \"rules:\" and optionally "
                   "\"default:\")");
  if (docs.size() > 1)
    return msg_.at(line_of(docs[1]), "more than one YAML document; a rules file holds one");
  if (!docs[0].IsMap())
    return msg_.at(line_of(docs[0]), "expected a map with \"rules:\" and optionally \"default:\"");
  return docs[0];
}

Status Loader::read_default(const Field& f) {
  if (Status s = require_map(msg_, f, "top level"); !s) return s;
  Result<Fields> fields = collect_fields(msg_, f.value, {"action"}, "default");
  if (!fields) return fields.error();
  if (const Field* a = find_field(*fields, "action")) {
    Result<Action> action = parse_field<Action>(msg_, *a, "default", parse_action);
    if (!action) return action.error();
    set_.default_action = *action;
  }
  return Ok{};
}

Status Loader::read_rules(const Field& f) {
  if (!f.value.IsSequence())
    return msg_.at(f.line,
                   "\"rules\" must be a list of rules (each item starting with \"- name:\")");
  size_t index = 0;
  for (const YAML::Node& node : f.value)
    if (Status s = add_rule(node, index++); !s) return s;
  return Ok{};
}

Status Loader::add_rule(const YAML::Node& node, size_t index) {
  RuleParser parser(msg_, node, index);
  Result<Rule> rule = parser.parse();
  if (!rule) return rule.error();
  auto [it, fresh] = index_by_name_.emplace(rule->name, set_.rules.size());
  if (!fresh)
    return msg_.at(rule->line, "rule " + quoted(rule->name) +
                                   ": duplicate name (first used at "
                                   "line " +
                                   std::to_string(set_.rules[it->second].line) + ")");
  set_.rules.push_back(std::move(*rule));
  parent_lines_.push_back(parser.parent_line());
  return Ok{};
}

Status Loader::resolve_parents() {
  for (size_t i = 0; i < set_.rules.size(); ++i) {
    Rule& r = set_.rules[i];
    if (r.parent.empty()) continue;
    auto it = index_by_name_.find(r.parent);
    if (it == index_by_name_.end())
      return msg_.at(parent_lines_[i], "rule " + quoted(r.name) + ": unknown parent " +
                                           quoted(r.parent) + " (no rule has that name)");
    r.parent_index = int(it->second);
    if (Status s = check_parent(i); !s) return s;
  }
  return check_cycles();
}

// Hierarchy shapes the pipeline supports: a meter colours packets rather than admitting them,
// so it cannot sit in a chain; a shaper delays packets, so it may only be a chain's top.
Status Loader::check_parent(size_t child) const {
  const Rule& r = set_.rules[child];
  const Rule& p = set_.rules[size_t(r.parent_index)];
  std::string who = "rule " + quoted(r.name) + ": ";
  int line = parent_lines_[child];
  if (r.is_meter()) return msg_.at(line, who + "meter rules (srtcm, trtcm) cannot have a parent");
  if (r.algorithm == Algorithm::leaky_bucket)
    return msg_.at(line, who +
                             "leaky-bucket rules cannot have a parent (shaping happens only "
                             "at the top of a hierarchy)");
  if (p.is_meter())
    return msg_.at(line, who + "parent " + quoted(p.name) + " is a " + algorithm_name(p.algorithm) +
                             " meter; meters cannot be parents");
  return Ok{};
}

// Reports the first rule (in file order) that lies on a cycle, with the cycle spelled out.
Status Loader::check_cycles() const {
  const std::vector<Rule>& rules = set_.rules;
  for (size_t start = 0; start < rules.size(); ++start) {
    int at = rules[start].parent_index;
    std::string path = rules[start].name;
    for (size_t steps = 0; at >= 0 && steps < rules.size(); ++steps) {
      path += " -> " + rules[size_t(at)].name;
      if (size_t(at) == start)
        return msg_.at(parent_lines_[start],
                       "rule " + quoted(rules[start].name) + ": parent cycle " + path);
      at = rules[size_t(at)].parent_index;
    }
  }
  return Ok{};
}

// ---------------------------------------------------------------------------------------
// Writing rules files.

std::string proto_name(uint8_t p) {
  for (const ProtoName& n : kProtoNames)
    if (n.number == p) return n.name;
  return std::to_string(p);
}

std::string format_ports(const PortRange& r) {
  return r.lo == r.hi ? std::to_string(r.lo) : std::to_string(r.lo) + "-" + std::to_string(r.hi);
}

// Largest unit of `units` (each `base` times the previous) that divides n exactly.
std::pair<uint64_t, const char*> exact_unit(uint64_t n, uint64_t base, const char* const* units,
                                            size_t count) {
  size_t u = 0;
  while (u + 1 < count && n != 0 && n % base == 0) {
    n /= base;
    ++u;
  }
  return {n, units[u]};
}

// Bytes with an explicit unit ("1500B", "64KiB", "1MB"), so a window limit stays a byte
// limit; of the binary and SI spellings, the one with the smaller number.
std::string format_bytes(uint64_t n) {
  static const char* const kBinary[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  static const char* const kSi[] = {"B", "kB", "MB", "GB", "TB"};
  auto bin = exact_unit(n, 1024, kBinary, std::size(kBinary));
  auto si = exact_unit(n, 1000, kSi, std::size(kSi));
  auto best = si.first < bin.first ? si : bin;
  return std::to_string(best.first) + best.second;
}

std::string format_tokens(uint64_t n, CostUnit unit) {
  return unit == CostUnit::packets ? std::to_string(n) : format_bytes(n);
}

void dump_match(std::ostream& o, const Match& m) {
  if (m == Match{}) return;
  o << "    match:\n";
  if (m.src) o << "      src: " << quoted(format_cidr(*m.src)) << "\n";
  if (m.dst) o << "      dst: " << quoted(format_cidr(*m.dst)) << "\n";
  if (m.proto) o << "      proto: " << proto_name(*m.proto) << "\n";
  if (m.src_port) o << "      src-port: " << format_ports(*m.src_port) << "\n";
  if (m.dst_port) o << "      dst-port: " << format_ports(*m.dst_port) << "\n";
  if (m.vlan) o << "      vlan: " << *m.vlan << "\n";
  if (m.dscp) o << "      dscp: " << unsigned(*m.dscp) << "\n";
  if (m.port) o << "      port: " << *m.port << "\n";
}

// The algorithm's own parameters, exactly the fields the loader requires or allows for it.
void dump_limiter(std::ostream& o, const Rule& r) {
  if (r.is_window()) {
    o << "    window: " << format_duration(r.window_ns) << "\n";
    o << "    limit: "
      << (r.limit_unit == CostUnit::packets ? std::to_string(r.limit) : format_bytes(r.limit))
      << "\n";
    return;
  }
  o << "    rate: " << format_rate(r.rate) << "\n";
  o << "    burst: " << format_tokens(r.burst, r.rate.unit) << "\n";
  if (r.algorithm == Algorithm::srtcm)
    o << "    excess-burst: " << format_tokens(r.excess_burst, r.rate.unit) << "\n";
  if (r.algorithm == Algorithm::trtcm) {
    o << "    peak-rate: " << format_rate(r.peak_rate) << "\n";
    o << "    peak-burst: " << format_tokens(r.peak_burst, r.rate.unit) << "\n";
  }
  if (r.algorithm == Algorithm::leaky_bucket)
    o << "    max-delay: " << format_duration(r.max_delay_ns) << "\n";
}

void dump_actions(std::ostream& o, const Rule& r) {
  if (r.is_meter()) {
    o << "    actions:\n";
    o << "      green: " << format_action(r.colour_actions.green) << "\n";
    o << "      yellow: " << format_action(r.colour_actions.yellow) << "\n";
    o << "      red: " << format_action(r.colour_actions.red) << "\n";
  } else {
    o << "    action: " << format_action(r.action) << "\n";
  }
  if (r.overflow) o << "    overflow: " << format_action(*r.overflow) << "\n";
}

void dump_rule(std::ostream& o, const Rule& r) {
  o << "  - name: " << quoted(r.name) << "\n";  // quoted: a name like "null" is a YAML word
  dump_match(o, r.match);
  o << "    key: " << key_name(r.key, r.key_prefix_len) << "\n";
  o << "    algorithm: " << algorithm_name(r.algorithm) << "\n";
  dump_limiter(o, r);
  if (r.overhead_bytes != 0) o << "    overhead: " << r.overhead_bytes << "\n";
  dump_actions(o, r);
  if (!r.parent.empty()) o << "    parent: " << quoted(r.parent) << "\n";
  if (r.max_flows != 0) o << "    max-flows: " << r.max_flows << "\n";
  if (r.idle_timeout_ns != kDefaultIdleTimeoutNs)
    o << "    idle-timeout: " << format_duration(r.idle_timeout_ns) << "\n";
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Public entry points.

Result<RuleSet> load_rules_text(const std::string& text, const std::string& filename) {
  // yaml-cpp reports node misuse by exception; keep every failure inside the Result.
  try {
    return Loader(filename).load(text);
  } catch (const YAML::Exception& e) {
    return make_error(filename + ":" + std::to_string(e.mark.line + 1 < 1 ? 1 : e.mark.line + 1) +
                      ": " + e.msg);
  } catch (const std::exception& e) {
    return make_error(filename + ": " + e.what());
  }
}

Result<RuleSet> load_rules_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  struct stat st {};
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (S_ISDIR(st.st_mode)) {
    err = EISDIR;
  } else {
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0)
        text.append(buf, size_t(n));
      else if (n == 0)
        break;
      else if (errno != EINTR) {
        err = errno;
        break;
      }
    }
  }
  ::close(fd);
  if (err != 0) return make_error(path + ": cannot open: " + std::strerror(err));
  return load_rules_text(text, path);
}

std::string dump_rules_yaml(const RuleSet& rules) {
  std::ostringstream o;
  o << "# sluice rules file (SPEC §2)\n";
  o << "default:\n  action: " << format_action(rules.default_action) << "\n";
  if (rules.rules.empty()) {
    o << "rules: []\n";
    return o.str();
  }
  o << "rules:\n";
  for (const Rule& r : rules.rules) dump_rule(o, r);
  return o.str();
}

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

std::string format_duration(uint64_t ns) {
  struct Unit {
    uint64_t ns;
    const char* name;
  };
  static const Unit kUnits[] = {{3600000000000ull, "h"},
                                {60000000000ull, "m"},
                                {1000000000ull, "s"},
                                {1000000ull, "ms"},
                                {1000ull, "us"}};
  for (const Unit& u : kUnits)
    if (ns != 0 && ns % u.ns == 0) return std::to_string(ns / u.ns) + u.name;
  return std::to_string(ns) + "ns";
}

}  // namespace sluice
