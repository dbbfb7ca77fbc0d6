#include "control_messages.hpp"

#include <algorithm>
#include <set>

namespace sluice::wire {

using nlohmann::json;

namespace {

struct OpInfo {
  Op op;
  const char* name;
  bool write;
  std::vector<const char*> fields;  // besides version, id, op
};

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = {
      {Op::hello, "hello", false, {}},
      {Op::stats, "stats", false, {}},
      {Op::rules, "rules", false, {}},
      {Op::rule_add, "rule.add", true, {"text", "filename", "before", "expect_generation"}},
      {Op::rule_set, "rule.set", true, {"name", "fields", "expect_generation"}},
      {Op::rule_del, "rule.del", true, {"name", "expect_generation"}},
      {Op::config_load, "config.load", true, {"text", "filename", "expect_generation"}},
      {Op::config_diff, "config.diff", false, {"text", "filename"}},
      {Op::flows_top, "flows.top", false, {"count", "rule", "by"}},
  };
  return table;
}

const OpInfo& info(Op op) {
  for (const OpInfo& i : op_table())
    if (i.op == op) return i;
  return op_table().front();
}

// What a request got wrong; thrown nowhere, returned up.
struct Problem {
  ErrorKind kind;
  std::string message;
};

// A string field, shown at most this long in a message.
std::string shown(std::string_view s) {
  constexpr size_t kMax = 64;
  return s.size() <= kMax ? std::string(s) : std::string(s.substr(0, kMax)) + "...";
}

const char* type_name(const json& v) { return v.type_name(); }

std::optional<Problem> want_string(const json& obj, const char* key, bool required,
                                   std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return Problem{ErrorKind::usage, std::string("missing field \"") + key + "\""};
    return std::nullopt;
  }
  if (!it->is_string())
    return Problem{ErrorKind::usage, std::string("field \"") + key + "\" must be a string, not " +
                                         type_name(*it)};
  *out = it->get_ref<const std::string&>();
  return std::nullopt;
}

std::optional<Problem> want_u64(const json& obj, const char* key, std::optional<uint64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (!it->is_number_unsigned())
    return Problem{ErrorKind::usage, std::string("field \"") + key +
                                         "\" must be an unsigned integer, not " +
                                         (it->is_number() ? "a " + std::string(it->is_number_float() ? "fraction" : "negative number") : type_name(*it))};
  *out = it->get<uint64_t>();
  return std::nullopt;
}

std::optional<Problem> read_op_fields(const json& obj, Request* r) {
  switch (r->op) {
    case Op::hello:
    case Op::stats:
    case Op::rules:
      return std::nullopt;
    case Op::rule_add:
    case Op::config_load:
    case Op::config_diff: {
      if (auto p = want_string(obj, "text", true, &r->text)) return p;
      if (auto p = want_string(obj, "filename", false, &r->filename)) return p;
      if (r->filename.empty()) r->filename = "request";
      if (r->op == Op::rule_add)
        if (auto p = want_string(obj, "before", false, &r->before)) return p;
      break;
    }
    case Op::rule_del:
      if (auto p = want_string(obj, "name", true, &r->name)) return p;
      break;
    case Op::rule_set: {
      if (auto p = want_string(obj, "name", true, &r->name)) return p;
      auto it = obj.find("fields");
      if (it == obj.end()) return Problem{ErrorKind::usage, "missing field \"fields\""};
      if (!it->is_object() || it->empty())
        return Problem{ErrorKind::usage,
                       "field \"fields\" must be an object of rules-file fields and their values "
                       "(strings, or null to remove one), with at least one"};
      for (const auto& [key, value] : it->items()) {
        if (value.is_null()) {
          r->fields[key] = std::nullopt;
        } else if (value.is_string()) {
          r->fields[key] = value.get<std::string>();
        } else {
          return Problem{ErrorKind::usage, "fields.\"" + shown(key) +
                                               "\" must be a string as in a rules file, or null, not " +
                                               type_name(value)};
        }
      }
      break;
    }
    case Op::flows_top: {
      std::optional<uint64_t> count;
      if (auto p = want_u64(obj, "count", &count)) return p;
      if (!count) return Problem{ErrorKind::usage, "missing field \"count\""};
      if (*count == 0 || *count > kMaxTopFlows)
        return Problem{ErrorKind::usage, "field \"count\" must be 1 to " + std::to_string(kMaxTopFlows)};
      r->top.count = size_t(*count);
      if (auto p = want_string(obj, "rule", false, &r->top.rule)) return p;
      std::string by = "pps";
      if (auto p = want_string(obj, "by", false, &by)) return p;
      if (by != "pps" && by != "bps")
        return Problem{ErrorKind::usage, "field \"by\" must be \"pps\" or \"bps\", not \"" + shown(by) + "\""};
      r->top.by_bytes = by == "bps";
      break;
    }
  }
  if (is_write(r->op)) return want_u64(obj, "expect_generation", &r->expect_generation);
  return std::nullopt;
}

}  // namespace

const char* op_name(Op op) { return info(op).name; }

std::optional<Op> op_from_name(std::string_view name) {
  for (const OpInfo& i : op_table())
    if (name == i.name) return i.op;
  return std::nullopt;
}

bool is_write(Op op) { return info(op).write; }

const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops = [] {
    std::vector<Op> v;
    for (const OpInfo& i : op_table()) v.push_back(i.op);
    return v;
  }();
  return ops;
}

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage: return "usage";
    case ErrorKind::invalid: return "invalid";
    case ErrorKind::conflict: return "conflict";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::runtime: return "runtime";
  }
  return "runtime";
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::variant<Request, ErrorReply> decode_request(std::string_view body) {
  const json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return ErrorReply{0, ErrorKind::usage, "not a JSON document"};
  if (!doc.is_object())
    return ErrorReply{0, ErrorKind::usage, std::string("a request is a JSON object, not ") + doc.type_name()};
  Request r;
  std::optional<uint64_t> id, version;
  if (auto p = want_u64(doc, "id", &id)) return ErrorReply{0, p->kind, p->message};
  if (!id) return ErrorReply{0, ErrorKind::usage, "missing field \"id\""};
  r.id = *id;
  auto fail = [&](const Problem& p) { return ErrorReply{r.id, p.kind, p.message}; };
  if (auto p = want_u64(doc, "version", &version)) return fail(*p);
  if (!version) return fail({ErrorKind::usage, "missing field \"version\" (this server speaks 2)"});
  if (*version != kProtocolVersion)
    return fail({ErrorKind::usage, "protocol version " + std::to_string(*version) +
                                       " is not supported (this server speaks 2)"});
  std::string op;
  if (auto p = want_string(doc, "op", true, &op)) return fail(*p);
  const auto known = op_from_name(op);
  if (!known) {
    std::string names;
    for (const OpInfo& i : op_table()) names += (names.empty() ? "" : ", ") + std::string(i.name);
    return fail({ErrorKind::usage, "unknown op \"" + shown(op) + "\" (known: " + names + ")"});
  }
  r.op = *known;
  const OpInfo& oi = info(r.op);
  for (const auto& [key, value] : doc.items()) {
    if (key == "version" || key == "id" || key == "op") continue;
    const bool allowed = std::any_of(oi.fields.begin(), oi.fields.end(),
                                     [&key = key](const char* f) { return key == f; });
    if (!allowed)
      return fail({ErrorKind::usage, "unknown field \"" + shown(key) + "\" for op " + oi.name});
  }
  if (auto p = read_op_fields(doc, &r)) return fail(*p);
  return r;
}

std::string encode_request(const Request& r) {
  json j = {{"version", kProtocolVersion}, {"id", r.id}, {"op", op_name(r.op)}};
  switch (r.op) {
    case Op::rule_add:
    case Op::config_load:
    case Op::config_diff:
      j["text"] = r.text;
      if (!r.filename.empty()) j["filename"] = r.filename;
      if (r.op == Op::rule_add && !r.before.empty()) j["before"] = r.before;
      break;
    case Op::rule_set: {
      j["name"] = r.name;
      json fields = json::object();
      for (const auto& [k, v] : r.fields) fields[k] = v ? json(*v) : json(nullptr);
      j["fields"] = fields;
      break;
    }
    case Op::rule_del:
      j["name"] = r.name;
      break;
    case Op::flows_top:
      j["count"] = uint64_t(r.top.count);
      if (!r.top.rule.empty()) j["rule"] = r.top.rule;
      j["by"] = r.top.by_bytes ? "bps" : "pps";
      break;
    default:
      break;
  }
  if (is_write(r.op) && r.expect_generation) j["expect_generation"] = *r.expect_generation;
  return dump_json(j);
}

namespace {

// s as a JSON string, as dump_json writes it: printable ASCII as is, quotes, backslashes and
// control characters escaped; anything else (non-ASCII, which dump_json validates as UTF-8)
// through dump_json itself.
void append_json_string(std::string& out, const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  for (unsigned char c : s)
    if (c >= 0x80) {
      out += dump_json(json(s));
      return;
    }
  out += '"';
  // Runs of characters that need no escape (every one in a usual rule name) are appended
  // whole: a reply lists every rule of the set, and a char at a time was a quarter of a
  // rule.set's CPU with 1,000 rules running.
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s, run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        }
    }
  }
  out.append(s, run, s.size() - run);
  out += '"';
}

}  // namespace

std::string encode_error(const ErrorReply& e) {
  // Written out as dump_json writes the document (keys sorted, no spaces), as
  // encode_diff_result() is: building it as nlohmann objects was a quarter of a
  // control-request fuzz run (ControlMessages.ErrorRepliesAreWhatNlohmannWrites: same text).
  std::string out;
  out.reserve(72 + e.message.size());
  out += "{\"error\":{\"kind\":\"";
  out += error_kind_name(e.kind);
  out += "\",\"message\":";
  append_json_string(out, e.message);
  out += "},\"id\":" + std::to_string(e.id) + ",\"ok\":false,\"version\":" +
         std::to_string(kProtocolVersion) + "}";
  return out;
}

std::string encode_result(uint64_t id, json result) {
  json doc = json::object();
  doc["version"] = kProtocolVersion;
  doc["id"] = id;
  doc["ok"] = true;
  doc["result"] = std::move(result);
  return dump_json(doc);
}

Result<Reply> decode_reply(std::string_view body) {
  const json doc = json::parse(body.begin(), body.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return make_error("the reply is not a JSON object");
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_unsigned())
    return make_error("the reply has no protocol version");
  if (version->get<uint64_t>() != kProtocolVersion)
    return make_error("the reply is of protocol version " + std::to_string(version->get<uint64_t>()) +
                      ", not 2");
  Reply r;
  auto id = doc.find("id");
  auto ok = doc.find("ok");
  if (id == doc.end() || !id->is_number_unsigned() || ok == doc.end() || !ok->is_boolean())
    return make_error("the reply has no id or no ok");
  r.id = id->get<uint64_t>();
  r.ok = ok->get<bool>();
  if (r.ok) {
    auto res = doc.find("result");
    if (res == doc.end() || !res->is_object()) return make_error("the reply has no result");
    r.result = *res;
    return r;
  }
  auto err = doc.find("error");
  if (err == doc.end() || !err->is_object()) return make_error("the error reply has no error");
  auto kind = err->find("kind");
  auto message = err->find("message");
  if (kind == err->end() || !kind->is_string() || message == err->end() || !message->is_string())
    return make_error("the error reply has no kind or message");
  r.error.id = r.id;
  r.error.message = message->get<std::string>();
  r.error.kind = ErrorKind::runtime;  // a kind this client does not know
  for (ErrorKind k : {ErrorKind::usage, ErrorKind::invalid, ErrorKind::conflict,
                      ErrorKind::unsupported, ErrorKind::runtime})
    if (kind->get<std::string>() == error_kind_name(k)) r.error.kind = k;
  return r;
}

namespace {
const char* change_kind_name(RuleChangeKind k) {
  switch (k) {
    case RuleChangeKind::added: return "added";
    case RuleChangeKind::removed: return "removed";
    case RuleChangeKind::changed: return "changed";
    case RuleChangeKind::unchanged: return "unchanged";
  }
  return "unchanged";
}
}  // namespace

json diff_to_json(const RulesDiff& diff) {
  json rules = json::array();
  for (const RuleChange& c : diff.rules)
    if (c.kind != RuleChangeKind::unchanged)
      rules.push_back({{"name", c.name},
                       {"kind", change_kind_name(c.kind)},
                       {"fields", c.fields},
                       {"keeps_state", c.keeps_state}});
  return {{"rules", rules},
          {"default_changed", diff.default_changed},
          {"unchanged", diff.count(RuleChangeKind::unchanged)}};
}


std::string encode_diff_result(uint64_t id, const RulesDiff& diff, uint64_t generation,
                               std::optional<uint64_t> applied_us) {
  // Keys in the order dump_json writes them (sorted: nlohmann's objects are std::maps).
  std::string out;
  out.reserve(120 + diff.rules.size() * 72);
  out += "{\"id\":" + std::to_string(id) + ",\"ok\":true,\"result\":{";
  if (applied_us) out += "\"applied_us\":" + std::to_string(*applied_us) + ",";
  out += "\"diff\":{\"default_changed\":";
  out += diff.default_changed ? "true" : "false";
  out += ",\"rules\":[";
  bool first = true;
  for (const RuleChange& c : diff.rules) {
    if (c.kind == RuleChangeKind::unchanged) continue;
    out += first ? "{\"fields\":[" : ",{\"fields\":[";
    first = false;
    for (size_t i = 0; i < c.fields.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, c.fields[i]);
    }
    out += "],\"keeps_state\":";
    out += c.keeps_state ? "true" : "false";
    out += ",\"kind\":\"";
    out += change_kind_name(c.kind);
    out += "\",\"name\":";
    append_json_string(out, c.name);
    out += '}';
  }
  out += "],\"unchanged\":" + std::to_string(diff.count(RuleChangeKind::unchanged));
  out += "},\"generation\":" + std::to_string(generation) + "},\"version\":" +
         std::to_string(kProtocolVersion) + "}";
  return out;
}

Result<RulesDiff> diff_from_json(const json& j) {
  const Error bad = make_error("the reply's diff is malformed");
  if (!j.is_object()) return bad;
  auto rules = j.find("rules");
  auto def = j.find("default_changed");
  if (rules == j.end() || !rules->is_array() || def == j.end() || !def->is_boolean()) return bad;
  RulesDiff d;
  d.default_changed = def->get<bool>();
  // How many rules do not change: not listed by sluiced (absent from the replies of one that
  // listed every rule).
  size_t unchanged_total = 0;
  auto unchanged = j.find("unchanged");
  if (unchanged != j.end()) {
    if (!unchanged->is_number_unsigned()) return bad;
    unchanged_total = unchanged->get<size_t>();
  }
  for (const json& c : *rules) {
    if (!c.is_object()) return bad;
    auto name = c.find("name"), kind = c.find("kind"), fields = c.find("fields"),
         keeps = c.find("keeps_state");
    if (name == c.end() || !name->is_string() || kind == c.end() || !kind->is_string() ||
        fields == c.end() || !fields->is_array() || keeps == c.end() || !keeps->is_boolean())
      return bad;
    RuleChange rc;
    rc.name = name->get<std::string>();
    bool known = false;
    for (RuleChangeKind k : {RuleChangeKind::added, RuleChangeKind::removed,
                             RuleChangeKind::changed, RuleChangeKind::unchanged})
      if (kind->get<std::string>() == change_kind_name(k)) rc.kind = k, known = true;
    if (!known) return bad;
    for (const json& f : *fields) {
      if (!f.is_string()) return bad;
      rc.fields.push_back(f.get<std::string>());
    }
    rc.keeps_state = keeps->get<bool>();
    d.rules.push_back(std::move(rc));
  }
  // "unchanged" is the total; any unchanged rule listed anyway is not counted twice.
  const size_t listed = d.count(RuleChangeKind::unchanged);
  d.unchanged_unlisted = unchanged_total > listed ? unchanged_total - listed : 0;
  return d;
}

}  // namespace sluice::wire
