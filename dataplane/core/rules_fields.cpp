// One rule map -> Rule (SPEC §2), driven by a field table that says which algorithms use and
// require each field; and the YAML helpers every map of a rules file is read with.
#include "rules_fields.hpp"

#include <array>
#include <type_traits>
#include <utility>

#include "limiter_profile.hpp"
#include "rate.hpp"
#include "rules_loader.hpp"

namespace sluice::rules_internal {

// ---------------------------------------------------------------------------------------
// YAML maps -> fields.

const Field* find_field(const Fields& fields, std::string_view key) {
  for (const Field& f : fields)
    if (f.key == key) return &f;
  return nullptr;
}

Result<Fields> collect_fields(const Messages& msg, const YamlNode& map,
                              const std::vector<std::string_view>& allowed,
                              const std::string& where) {
  Fields fields;
  fields.reserve(map.map_size());
  for (YamlNode::Iterator it = map.begin(); it != map.end();) {
    const YamlNode& k = *it;
    const YamlNode& v = *++it;
    ++it;
    if (!k.is_scalar()) return msg.at(k.line, where + ": field names must be plain words");
    if (const Field* first = find_field(fields, k.text))
      return msg.at(k.line, where + ": duplicate field " + quoted(k.text) + " (first at line " +
                                std::to_string(first->line) + ")");
    size_t known = 0;
    while (known < allowed.size() && allowed[known] != k.text) ++known;
    if (known == allowed.size())
      return msg.at(k.line, where + ": unknown field " + quoted(k.text) + " (expected " +
                                join(allowed) + ")");
    fields.push_back(Field{k.text, &v, k.line, known});
  }
  return fields;
}

Result<Fields> collect_map_fields(const Messages& msg, const Field& f, const std::string& outer,
                                  const std::vector<std::string_view>& allowed,
                                  const std::string& where) {
  if (!f.value->is_map())
    return msg.at(f.line, outer + ": " + quoted(f.key) + " must be a map of fields");
  return collect_fields(msg, *f.value, allowed, where);
}

Result<std::string_view> scalar_of(const Messages& msg, const Field& f,
                                   const std::string& where) {
  if (f.value->is_null()) return msg.at(f.line, where + ": " + quoted(f.key) + " has no value");
  if (!f.value->is_scalar())
    return msg.at(f.line, where + ": " + quoted(f.key) + " must be a single value, not a " +
                              (f.value->is_map() ? "map" : "list"));
  return f.value->text;
}

namespace {

// ---------------------------------------------------------------------------------------
// Numbers a rule's fields are checked against.

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

// "token-bucket, gcra, ...", in declaration order.
std::string algorithms_in(AlgoMask mask) {
  std::vector<std::string_view> names;
  for (unsigned a = 0; a <= unsigned(Algorithm::fixed_window); ++a)
    if (mask & algo_bit(Algorithm(a))) names.push_back(algorithm_name(Algorithm(a)));
  return join(names);
}

// ---------------------------------------------------------------------------------------
// The rule parser.

class RuleParser;
using Apply = Status (RuleParser::*)(const Field&);
constexpr size_t kRuleFieldCount = 19;  // rows of rule_fields()

// One row per rule field: which algorithms use it, which require it, how to apply it. Rows
// are applied in table order, so a field's prerequisites (rate before burst) come first.
struct RuleField {
  std::string_view key;
  AlgoMask allowed;
  AlgoMask required;
  Apply apply;       // nullptr: read before the table is applied (name, algorithm)
  const char* hint;  // added when the field is used with an algorithm that has no use for it
};

class RuleParser {
 public:
  RuleParser(const Messages& msg, const YamlNode& node, size_t index)
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
  std::string numbered_label() const { return "rule #" + std::to_string(index_ + 1); }
  std::string label_guess() const;
  Status read_name(const Fields& fields);
  Status read_algorithm(const Fields& fields);
  Status check_fields_for_algorithm(const Fields& fields) const;
  Status apply_fields(const Fields& fields);
  Status check_limits() const;
  Status apply_match_field(const Field& f, const std::string& where);
  Status check_match(const Fields& fields, const std::string& where) const;
  Result<uint64_t> bucket_size(const Field& f, CostUnit unit, bool allow_zero);
  Status require_positive(const Field& f, uint64_t value) const;
  Result<uint64_t> positive_duration(const Field& f);

  const Messages& msg_;
  const YamlNode& node_;
  size_t index_;
  std::string label_;  // "rule \"NAME\"" once the name is known, else "rule #N"
  // The rule's field for each row of rule_fields(), or nullptr.
  std::array<const Field*, kRuleFieldCount> by_row_{};
  Rule rule_;
  int parent_line_ = 0;
};

const std::array<RuleField, kRuleFieldCount>& rule_fields() {
  static const std::array<RuleField, kRuleFieldCount> table = {{
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
  }};
  return table;
}

// In rule_fields() order: collect_fields' allowed_index is the row.
const std::vector<std::string_view>& rule_field_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> n;
    for (const RuleField& f : rule_fields()) n.push_back(f.key);
    return n;
  }();
  return names;
}

Result<Rule> RuleParser::parse() {
  rule_.line = node_.line;
  if (!node_.is_map())
    return msg_.at(rule_.line,
                   numbered_label() + ": expected a map of fields (name, match, rate, ...)");
  label_ = label_guess();
  Result<Fields> fields = collect_fields(msg_, node_, rule_field_names(), label_);
  if (!fields) return fields.error();
  for (const Field& f : *fields) by_row_[f.allowed_index] = &f;
  for (auto step :
       {&RuleParser::read_name, &RuleParser::read_algorithm, &RuleParser::apply_fields}) {
    if (Status s = (this->*step)(*fields); !s) return s.error();
  }
  if (Status s = check_limits(); !s) return s.error();
  return std::move(rule_);
}

// Names the rule in messages about its other fields, even before the name is validated.
std::string RuleParser::label_guess() const {
  const YamlNode* name = node_.find("name");
  if (name != nullptr && name->is_scalar() && valid_name(name->text))
    return "rule " + quoted(name->text);
  return numbered_label();
}

Status RuleParser::read_name(const Fields&) {
  const Field* f = by_row_[0];  // "name"
  if (f == nullptr) return msg_.at(rule_.line, label_ + ": missing \"name\"");
  Result<std::string_view> name = scalar_of(msg_, *f, label_);
  if (!name) return name.error();
  if (!valid_name(*name))
    return msg_.at(f->line, label_ + ": invalid name " + quoted(*name) +
                                " (1 to 63 characters from A-Z a-z 0-9 _ . -)");
  rule_.name = *name;
  return Ok{};
}

Status RuleParser::read_algorithm(const Fields& fields) {
  const Field* f = by_row_[1];  // "algorithm"
  if (f != nullptr) {
    Result<std::string_view> text = scalar_of(msg_, *f, label_);
    if (!text) return text.error();
    if (!parse_algorithm(*text, &rule_.algorithm))
      return msg_.at(f->line, label_ + ": unknown algorithm " + quoted(*text) + " (expected " +
                                  algorithms_in(kAllAlgos) + ")");
  }
  return check_fields_for_algorithm(fields);
}

// Each algorithm has its own parameters; a field it ignores is a mistake worth reporting.
// Stray fields are reported before missing ones: "rate is not used by fixed-window" says
// more than "fixed-window needs limit" when someone wrote a bucket rule as a window.
Status RuleParser::check_fields_for_algorithm(const Fields&) const {
  AlgoMask me = algo_bit(rule_.algorithm);
  const char* algo = algorithm_name(rule_.algorithm);
  const auto& table = rule_fields();
  for (size_t row = 0; row < table.size(); ++row) {
    const RuleField& spec = table[row];
    const Field* f = by_row_[row];
    if (f == nullptr || (spec.allowed & me)) continue;
    std::string m = label_ + ": " + quoted(spec.key) + " is not used by algorithm " + algo +
                    " (only by " + algorithms_in(spec.allowed) + ")";
    if (spec.hint != nullptr) m += "; " + std::string(spec.hint);
    return msg_.at(f->line, m);
  }
  for (size_t row = 0; row < table.size(); ++row) {
    const RuleField& spec = table[row];
    if ((spec.required & me) && by_row_[row] == nullptr)
      return msg_.at(rule_.line, label_ + ": algorithm " + algo + " needs " + quoted(spec.key));
  }
  return Ok{};
}

Status RuleParser::apply_fields(const Fields&) {
  const auto& table = rule_fields();
  for (size_t row = 0; row < table.size(); ++row) {
    const RuleField& spec = table[row];
    const Field* f = by_row_[row];
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
  Result<Fields> fields = collect_map_fields(msg_, f, label_, kMatchFields, where);
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
  if (f.key == "src") return store(m.src, parse_cidr);
  if (f.key == "dst") return store(m.dst, parse_cidr);
  if (f.key == "proto") return store(m.proto, parse_proto);
  if (f.key == "src-port") return store(m.src_port, parse_port_range);
  if (f.key == "dst-port") return store(m.dst_port, parse_port_range);
  if (f.key == "vlan") return store(m.vlan, in_range<uint16_t>(0, 4095));
  if (f.key == "dscp") return store(m.dscp, parse_dscp);
  return store(m.port, in_range<uint16_t>(0, 65535));  // "port": the only other field allowed
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
  Result<std::pair<KeyMode, uint8_t>> k =
      parse_field<std::pair<KeyMode, uint8_t>>(msg_, f, label_, parse_key);
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
      msg_, f, label_, [unit](const std::string& s) { return parse_burst(s, unit); });
  if (!b) return b;
  if (!(allow_zero && *b == 0) && *b < min_burst(unit))
    return msg_.at(f.line, label_ + ": " + std::string(f.key) + " " + std::to_string(*b) +
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

// Durations and window limits: zero is refused with the same message for each.
Status RuleParser::require_positive(const Field& f, uint64_t value) const {
  if (value == 0) return msg_.at(f.line, label_ + ": " + std::string(f.key) + " must be positive");
  return Ok{};
}

Result<uint64_t> RuleParser::positive_duration(const Field& f) {
  Result<uint64_t> d = parse_field<uint64_t>(msg_, f, label_, parse_duration);
  if (!d) return d;
  if (Status s = require_positive(f, *d); !s) return s.error();
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
  Result<std::string_view> text = scalar_of(msg_, f, label_);
  if (!text) return text.error();
  bool bare = text->find_first_not_of("0123456789.") == std::string_view::npos;
  CostUnit unit = bare ? CostUnit::packets : CostUnit::bytes;
  uint64_t packets = 0;
  Result<uint64_t> v = invalid_input("expected a whole number of packets");
  if (!bare)
    v = parse_burst(std::string(*text), unit);
  else if (parse_uint(*text, UINT64_MAX, &packets))
    v = packets;
  if (!v)
    return msg_.at(f.line, label_ + ": limit " + quoted(*text) + ": " + v.error().message +
                               " (a limit is packets, such as 100, or bytes with a unit, such "
                               "as 1500B or 64KiB)");
  if (Status s = require_positive(f, *v); !s) return s;
  rule_.limit = *v;
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
  Result<uint64_t> v = parse_field<uint64_t>(msg_, f, label_, in_range<uint64_t>(0, 1000));
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
  Result<Fields> colours = collect_map_fields(msg_, f, label_, {"green", "yellow", "red"}, where);
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
  Result<std::string_view> name = scalar_of(msg_, f, label_);
  if (!name) return name.error();
  if (!valid_name(*name)) return msg_.at(f.line, label_ + ": invalid parent name " + quoted(*name));
  rule_.parent = *name;
  parent_line_ = f.line;
  return Ok{};
}

// Bounded so that one rule's table cannot ask for more than the allocator can be asked for
// (a flow costs 32 or 48 bytes: memory_budget.hpp); whether the machine has that much memory
// is for the process that allocates it to check.
Status RuleParser::apply_max_flows(const Field& f) {
  Result<uint64_t> v = parse_field<uint64_t>(msg_, f, label_, in_range<uint64_t>(1, UINT64_MAX));
  if (!v) return v.error();
  if (*v > kMaxFlowsPerRule)
    return msg_.at(f.line, label_ + ": max-flows " + std::to_string(*v) +
                               " is above the limit of " + std::to_string(kMaxFlowsPerRule) +
                               " (2^28) flows per rule");
  rule_.max_flows = *v;
  return Ok{};
}

Status RuleParser::apply_idle_timeout(const Field& f) {
  Result<uint64_t> d = positive_duration(f);
  if (!d) return d.error();
  rule_.idle_timeout_ns = *d;
  return Ok{};
}

}  // namespace

Result<ParsedRule> parse_rule(const Messages& msg, const YamlNode& node, size_t index) {
  RuleParser parser(msg, node, index);
  Result<Rule> rule = parser.parse();
  if (!rule) return rule.error();
  return ParsedRule{std::move(*rule), parser.parent_line()};
}

}  // namespace sluice::rules_internal
