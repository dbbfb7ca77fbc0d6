// Rules file loader (SPEC §2). Four layers, each with one job:
//   1. rules_values: text -> value, with a reason on failure (no YAML, no line numbers);
//   2. rules_fields: one YAML rule map -> Rule, driven by a field table that says which
//      algorithms use and require each field;
//   3. rules_yaml: text -> one YAML document as an array of nodes, within the limits of
//      rules_loader.hpp;
//   4. here: the document, duplicate names, parent resolution, cycles and chain depth.
// Every error leaves as "FILE:LINE: message"; nothing throws past load_rules_text.
// Writing rules files is rules_dump.cpp.
//
// YAML library: libyaml (Debian libyaml-dev, pkg-config yaml-0.1), replacing yaml-cpp 0.7, whose
// LoadAll never returned on the 2-byte file "," while its memory grew by ~0.5 GB/s. libyaml is
// the reference C parser (PyYAML's), fuzzed on OSS-Fuzz, and its scanner looks ahead at most
// 1024 characters for an implicit key, so its memory stays proportional to the file.
// libfyaml (the brief's first choice; it passes more of the YAML test suite) was tried first
// and dropped: 0.7.12 buffers every token of a flow collection that might be an implicit key,
// so a 16 MiB "[a,a,...]" took 4.5 s and 3.2 GB before the first event, and 16 MiB of "["
// 19 s and 5.5 GB; it also stops silently, with no error, at a NUL byte or at some malformed
// UTF-8, so the rest of a file would not be read. We use libyaml's event parser, not its
// document loader, so that our limits apply while the file streams past and aliases are
// refused as events instead of being resolved.
#include "rules_loader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <new>
#include <utility>
#include <vector>

#include "rules_fields.hpp"
#include "rules_yaml.hpp"

namespace sluice {
namespace {

using namespace rules_internal;

// ---------------------------------------------------------------------------------------
// Layer 3: the document and checks across rules.

class Loader {
 public:
  // link: resolve and check parents (false: load_rules_text_unlinked).
  Loader(std::string file, bool link) : msg_(std::move(file)), link_(link) {}
  Result<RuleSet> load(std::string_view text);
  std::vector<int> take_parent_lines() { return std::move(parent_lines_); }

 private:
  Status parse_document(std::string_view text);
  Status read_default(const Field& f);
  Status read_rules(const Field& f);
  Status add_rule(const YamlNode& node, size_t index);
  Status resolve_parents();

  Messages msg_;
  bool link_;
  YamlDocument doc_;  // every Field points into it
  RuleSet set_;
  // Keys are the names' text in the document (doc_), which outlives the map.
  std::unordered_map<std::string_view, size_t> index_by_name_;
  std::vector<int> parent_lines_;  // per rule, the line of its parent field
};

Result<RuleSet> Loader::load(std::string_view text) {
  if (Status s = parse_document(text); !s) return s.error();
  Result<Fields> top = collect_fields(msg_, doc_.root(), {"default", "rules"}, "top level");
  if (!top) return top.error();
  if (const Field* f = find_field(*top, "default"))
    if (Status s = read_default(*f); !s) return s.error();
  if (const Field* f = find_field(*top, "rules"))
    if (Status s = read_rules(*f); !s) return s.error();
  if (link_)
    if (Status s = resolve_parents(); !s) return s.error();
  return std::move(set_);
}

// One YAML document holding a map, within the limits of rules_loader.hpp.
Status Loader::parse_document(std::string_view text) {
  if (text.size() > kMaxRulesFileBytes)
    return msg_.whole("rules file of more than " + std::to_string(kMaxRulesFileBytes >> 20) +
                      " MiB (" + std::to_string(kMaxRulesFileBytes) + " bytes)");
  const YamlLimits limits{kMaxNestingDepth, kMaxValueBytes, kMaxMapFields, kMaxRules,
                          kMaxYamlNodes};
  Result<YamlDocument> doc = read_yaml_document(text, msg_, limits);
  if (!doc) return doc.error();
  doc_ = std::move(*doc);
  const YamlNode& root = doc_.root();
  if (root.is_null())
    return msg_.at(1,
                   "empty rules file (expected a map with \"rules:\" and optionally "
                   "\"default:\")");
  if (!root.is_map())
    return msg_.at(root.line, "expected a map with \"rules:\" and optionally \"default:\"");
  return Ok{};
}

Status Loader::read_default(const Field& f) {
  Result<Fields> fields = collect_map_fields(msg_, f, "top level", {"action"}, "default");
  if (!fields) return fields.error();
  if (const Field* a = find_field(*fields, "action")) {
    Result<Action> action = parse_field<Action>(msg_, *a, "default", parse_action);
    if (!action) return action.error();
    set_.default_action = *action;
  }
  return Ok{};
}

Status Loader::read_rules(const Field& f) {
  if (!f.value->is_list())
    return msg_.at(f.line,
                   "\"rules\" must be a list of rules (each item starting with \"- name:\")");
  set_.rules.reserve(f.value->items);
  index_by_name_.reserve(f.value->items);
  parent_lines_.reserve(f.value->items);
  size_t index = 0;
  for (const YamlNode& node : *f.value)
    if (Status s = add_rule(node, index++); !s) return s;
  return Ok{};
}

Status Loader::add_rule(const YamlNode& node, size_t index) {
  Result<ParsedRule> parsed = parse_rule(msg_, node, index);
  if (!parsed) return parsed.error();
  Rule& rule = parsed->rule;
  // The default action's counters and metrics series are labelled "default" (SPEC §5), so a
  // rule of that name would emit a second series with the same labels.
  if (rule.name == kDefaultRuleName)
    return msg_.at(rule.line, "rule " + quoted(rule.name) +
                                  ": the name \"default\" is reserved for the default action");
  // The rule's name as the document holds it: a view that stays valid as set_.rules grows.
  const YamlNode* name = node.find("name");
  auto [it, fresh] = index_by_name_.emplace(name != nullptr ? name->text : std::string_view{},
                                            set_.rules.size());
  if (!fresh)
    return msg_.at(rule.line, "rule " + quoted(rule.name) +
                                  ": duplicate name (first used at line " +
                                  std::to_string(set_.rules[it->second].line) + ")");
  set_.rules.push_back(std::move(rule));
  parent_lines_.push_back(parsed->parent_line);
  return Ok{};
}

Status Loader::resolve_parents() {
  return link_rules(set_, [this](size_t i, const std::string& m) { return msg_.at(parent_lines_[i], m); });
}

// The whole of `path` up to `limit` bytes (one more, to tell a file at the limit from a larger
// one), or the errno that stopped the read.
int read_file(const std::string& path, size_t limit, std::string* text) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st {};
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (S_ISDIR(st.st_mode)) {
    err = EISDIR;
  } else {
    char buf[65536];
    while (text->size() <= limit) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0)
        text->append(buf, size_t(n));
      else if (n == 0)
        break;
      else if (errno != EINTR) {
        err = errno;
        break;
      }
    }
  }
  ::close(fd);
  return err;
}

}  // namespace


// ---------------------------------------------------------------------------------------
// Checks across rules, on the structs: the loader's last step, and what an edit of a running
// set re-checks (rule_edits.cpp). Each walk builds its message only when it fails.

namespace {

// Hierarchy shapes the pipeline supports: a meter colours packets rather than admitting them,
// so it cannot sit in a chain; a shaper delays packets, so it may only be a chain's top.
std::string parent_shape_error(const Rule& r, const Rule& p) {
  const std::string who = "rule " + quoted(r.name) + ": ";
  if (r.is_meter()) return who + "meter rules (srtcm, trtcm) cannot have a parent";
  if (r.algorithm == Algorithm::leaky_bucket)
    return who +
           "leaky-bucket rules cannot have a parent (shaping happens only at the top of a "
           "hierarchy)";
  if (p.is_meter())
    return who + "parent " + quoted(p.name) + " is a " + algorithm_name(p.algorithm) +
           " meter; meters cannot be parents";
  return {};
}

}  // namespace

Status link_rules(RuleSet& set, const std::function<Error(size_t, const std::string&)>& error) {
  std::vector<Rule>& rules = set.rules;
  bool any_parent = false;
  for (const Rule& r : rules) any_parent = any_parent || !r.parent.empty();
  if (!any_parent) {
    for (Rule& r : rules) r.parent_index = -1;
    return Ok{};
  }
  std::unordered_map<std::string_view, size_t> index_by_name;
  index_by_name.reserve(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) index_by_name.emplace(rules[i].name, i);
  for (size_t i = 0; i < rules.size(); ++i) {
    Rule& r = rules[i];
    r.parent_index = -1;
    if (r.parent.empty()) continue;
    auto it = index_by_name.find(r.parent);
    if (it == index_by_name.end())
      return error(i, "rule " + quoted(r.name) + ": unknown parent " + quoted(r.parent) +
                          " (no rule has that name)");
    r.parent_index = int(it->second);
    if (std::string why = parent_shape_error(r, rules[it->second]); !why.empty())
      return error(i, why);
  }
  // Cycles: the first rule (in file order) that lies on one, with the cycle spelled out.
  for (size_t start = 0; start < rules.size(); ++start) {
    int at = rules[start].parent_index;
    size_t steps = 0;
    for (; at >= 0 && size_t(at) != start && steps < rules.size(); ++steps)
      at = rules[size_t(at)].parent_index;
    if (at < 0 || size_t(at) != start) continue;
    std::string path = rules[start].name;
    at = rules[start].parent_index;
    for (;; at = rules[size_t(at)].parent_index) {
      path += " -> " + rules[size_t(at)].name;
      if (size_t(at) == start) break;
    }
    return error(start, "rule " + quoted(rules[start].name) + ": parent cycle " + path);
  }
  // Chains: the first rule (in file order) charged along more than kMaxParentChain rules.
  // After the cycle check, so every chain ends.
  for (size_t start = 0; start < rules.size(); ++start) {
    size_t depth = 1;
    for (int at = rules[start].parent_index; at >= 0 && depth <= kMaxParentChain;
         at = rules[size_t(at)].parent_index)
      ++depth;
    if (depth <= kMaxParentChain) continue;
    std::string path = rules[start].name;
    size_t shown = 1;
    for (int at = rules[start].parent_index; at >= 0 && ++shown <= kMaxParentChain;
         at = rules[size_t(at)].parent_index)
      path += " -> " + rules[size_t(at)].name;
    return error(start, "rule " + quoted(rules[start].name) + ": parent chain " + path +
                            " -> ... is more than " + std::to_string(kMaxParentChain) +
                            " rules deep (the most a packet is charged along)");
  }
  return Ok{};
}

// ---------------------------------------------------------------------------------------
// Public entry points.

Result<RuleSet> load_rules_text(std::string_view text, std::string_view name) {
  // libfyaml is C; what can throw is our own allocation (or one inside the standard library).
  std::string file(name);
  try {
    return Loader(file, true).load(text);
  } catch (const std::bad_alloc&) {
    return make_error(file + ": out of memory while loading the rules");
  } catch (const std::exception& e) {
    return invalid_input(file + ": " + e.what());
  }
}

Result<RuleSet> load_rules_text_unlinked(std::string_view text, std::string_view name,
                                         std::vector<int>* parent_lines) {
  std::string file(name);
  try {
    Loader loader(file, false);
    Result<RuleSet> set = loader.load(text);
    if (set && parent_lines) *parent_lines = loader.take_parent_lines();
    return set;
  } catch (const std::bad_alloc&) {
    return make_error(file + ": out of memory while loading the rules");
  } catch (const std::exception& e) {
    return invalid_input(file + ": " + e.what());
  }
}

Result<RuleSet> load_rules_file(const std::string& path) {
  std::string text;
  try {
    if (int err = read_file(path, kMaxRulesFileBytes, &text); err != 0)
      return invalid_input(path + ": cannot open: " + std::strerror(err));
  } catch (const std::bad_alloc&) {
    return make_error(path + ": out of memory while reading the rules");
  }
  return load_rules_text(text, path);
}

}  // namespace sluice
