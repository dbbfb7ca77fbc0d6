// Rules file loader (SPEC §2). Three layers, each with one job:
//   1. rules_values: text -> value, with a reason on failure (no YAML, no line numbers);
//   2. rules_fields: one YAML rule map -> Rule, driven by a field table that says which
//      algorithms use and require each field;
//   3. here: the document, duplicate names, parent resolution and cycles.
// Every error leaves as "FILE:LINE: message"; nothing throws past load_rules_text.
// Writing rules files is rules_dump.cpp.
#include "rules_loader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "rules_fields.hpp"

namespace sluice {
namespace {

using namespace rules_internal;

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
  if (!f.value.IsSequence())
    return msg_.at(f.line,
                   "\"rules\" must be a list of rules (each item starting with \"- name:\")");
  size_t index = 0;
  for (const YAML::Node& node : f.value)
    if (Status s = add_rule(node, index++); !s) return s;
  return Ok{};
}

Status Loader::add_rule(const YAML::Node& node, size_t index) {
  Result<ParsedRule> parsed = parse_rule(msg_, node, index);
  if (!parsed) return parsed.error();
  Rule& rule = parsed->rule;
  auto [it, fresh] = index_by_name_.emplace(rule.name, set_.rules.size());
  if (!fresh)
    return msg_.at(rule.line, "rule " + quoted(rule.name) +
                                  ": duplicate name (first used at line " +
                                  std::to_string(set_.rules[it->second].line) + ")");
  set_.rules.push_back(std::move(rule));
  parent_lines_.push_back(parsed->parent_line);
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

// The whole of `path`, or the errno that stopped the read.
int read_file(const std::string& path, std::string* text) {
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
    for (;;) {
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
// Public entry points.

Result<RuleSet> load_rules_text(const std::string& text, const std::string& filename) {
  // yaml-cpp reports node misuse by exception; keep every failure inside the Result.
  try {
    return Loader(filename).load(text);
  } catch (const YAML::Exception& e) {
    return rules_internal::Messages(filename).at(e.mark.line + 1, e.msg);
  } catch (const std::exception& e) {
    return make_error(filename + ": " + e.what());
  }
}

Result<RuleSet> load_rules_file(const std::string& path) {
  std::string text;
  if (int err = read_file(path, &text); err != 0)
    return make_error(path + ": cannot open: " + std::strerror(err));
  return load_rules_text(text, path);
}

}  // namespace sluice
