#include "rule_edits.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "rules_loader.hpp"

namespace sluice {

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    at = nl + 1;
  }
  return lines;
}

size_t indent_of(const std::string& line) {
  size_t n = 0;
  while (n < line.size() && line[n] == ' ') ++n;
  return n;
}

bool is_content(const std::string& line) {
  const size_t i = indent_of(line);
  return i < line.size() && line[i] != '#';
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// A rules text as one rules file: the running rules (each its dump_rule_yaml block), then the
// client's rule lines, re-indented as items of the same list. Remembers which line is whose.
struct Combined {
  std::string text = "rules:\n";
  int next_line = 2;
  struct Block {
    int first_line, last_line;
    std::string rule;  // empty: the client's text
  };
  std::vector<Block> blocks;
  int client_first_line = 0;  // the combined line of the client's first line taken
  int client_offset = 0;      // client line = combined line - client_offset

  void add_rule(const Rule& r, const std::string& yaml) {
    const int lines = int(std::count(yaml.begin(), yaml.end(), '\n'));
    blocks.push_back({next_line, next_line + lines - 1, r.name});
    text += yaml;
    next_line += lines;
  }
  void add_rules(const RuleSet& set, const std::string& edited = "",
                 const std::string& edited_yaml = "") {
    for (const Rule& r : set.rules) add_rule(r, r.name == edited ? edited_yaml : dump_rule_yaml(r));
  }

  // "FILE:LINE: message" from loading text under `filename`: back to the client's line, or
  // to the rule whose block holds it.
  std::string explain(const std::string& message, const std::string& filename,
                      const std::string& client_filename) const {
    const std::string prefix = filename + ":";
    if (message.rfind(prefix, 0) != 0) return message;
    size_t at = prefix.size();
    int line = 0;
    while (at < message.size() && std::isdigit(static_cast<unsigned char>(message[at])))
      line = line * 10 + (message[at++] - '0');
    if (line == 0 || message.compare(at, 2, ": ") != 0) return message;
    const std::string what = message.substr(at + 2);
    if (client_first_line != 0 && line >= client_first_line)
      return client_filename + ":" + std::to_string(line - client_offset) + ": " + what;
    for (const Block& b : blocks)
      if (line >= b.first_line && line <= b.last_line)
        return "rule " + quoted(b.rule) + " (running): " + what;
    return what;
  }
};

constexpr const char* kCombinedName = "\x01rules";  // never a client's file name

// The client's text as list items: the lines after a top-level `rules:` key, a list, or one
// mapping made a list item. Errors with the client's file:line.
Status take_client_rules(const std::string& text, const std::string& filename, Combined* c) {
  const std::vector<std::string> lines = split_lines(text);
  // Top-level keys: `rules:` is the only one a rule add takes beside a single rule's own.
  size_t rules_key = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (!is_content(l) || indent_of(l) != 0 || l.rfind("rules:", 0) != 0) continue;
    if (rules_key != lines.size())
      return make_error(filename + ":" + std::to_string(i + 1) + ": a second rules: key");
    rules_key = i;
    if (is_content(l.substr(6)))
      return make_error(filename + ":" + std::to_string(i + 1) +
                        ": write the rules as a block list under rules: (one \"- name: ...\" per rule)");
  }
  if (rules_key != lines.size()) {
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      if (i == rules_key || !is_content(l) || indent_of(l) != 0 || l[0] == '-') continue;
      return make_error(filename + ":" + std::to_string(i + 1) +
                        ": rule add takes only rules (the default and everything else change "
                        "with config load)");
    }
  }
  size_t first_content = lines.size();
  const size_t from = rules_key == lines.size() ? 0 : rules_key + 1;
  for (size_t i = from; i < lines.size(); ++i)
    if (is_content(lines[i])) {
      first_content = i;
      break;
    }
  if (first_content == lines.size()) return make_error(filename + ": no rule to add");
  const size_t first = from;
  const std::string& head = lines[first_content];
  const size_t item_indent = indent_of(head);
  const bool is_list = head.compare(item_indent, 1, "-") == 0;
  if (!is_list && rules_key != lines.size())
    return make_error(filename + ":" + std::to_string(first_content + 1) +
                      ": expected a list of rules (\"- name: ...\") under rules:");
  c->client_first_line = c->next_line;
  c->client_offset = c->next_line - int(first + 1);
  for (size_t i = first; i < lines.size(); ++i) {
    std::string l = lines[i];
    if (is_list) {
      // Items at indent 2, as the running rules are.
      const size_t strip = std::min(indent_of(l), item_indent);
      l = std::string(2, ' ') + l.substr(strip);
    } else {
      // One mapping at indent 0: its first key opens an item, the rest sit under it.
      l = (i == first_content ? "  - " : "    ") + l;
    }
    c->text += l + "\n";
    c->next_line++;
  }
  return Ok{};
}

// The set `text` loads to, with the running default action; errors explained.
Result<RuleSet> load_combined(const Combined& c, const Action& default_action,
                              const std::string& client_filename) {
  auto loaded = load_rules_text(c.text, kCombinedName);
  if (!loaded) return make_error(c.explain(loaded.error().message, kCombinedName, client_filename));
  loaded->default_action = default_action;
  return loaded;
}

// A set whose rules moved: parent indices resolved again by the loader.
Result<RuleSet> reload(const RuleSet& set) {
  Combined c;
  c.add_rules(set);
  return load_combined(c, set.default_action, "");
}

bool field_name_ok(const std::string& f) {
  if (f.empty() || f.size() > 32) return false;
  for (char ch : f)
    if (!(std::islower(static_cast<unsigned char>(ch)) || ch == '-')) return false;
  return true;
}

bool value_ok(const std::string& v) {
  if (v.empty() || v.size() > 4096) return false;
  for (char ch : v)
    if (static_cast<unsigned char>(ch) < 0x20) return false;
  return true;
}

const Rule* find_rule(const RuleSet& set, const std::string& name) {
  for (const Rule& r : set.rules)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

Result<RuleSet> add_rules(const RuleSet& current, const std::string& text,
                          const std::string& filename, const std::string& before) {
  if (!before.empty() && find_rule(current, before) == nullptr)
    return make_error("rule add --before " + quoted(before) + ": no rule of that name runs");
  Combined c;
  c.add_rules(current);
  if (Status s = take_client_rules(text, filename, &c); !s) return s.error();
  auto next = load_combined(c, current.default_action, filename);
  if (!next) return next.error();
  if (next->rules.size() <= current.rules.size()) return make_error(filename + ": no rule to add");
  if (before.empty()) return next;
  // Move the new rules (the tail) before `before`.
  std::vector<Rule> added(next->rules.begin() + long(current.rules.size()), next->rules.end());
  next->rules.resize(current.rules.size());
  auto at = std::find_if(next->rules.begin(), next->rules.end(),
                         [&](const Rule& r) { return r.name == before; });
  next->rules.insert(at, added.begin(), added.end());
  return reload(*next);
}

Result<RuleSet> set_rule_fields(const RuleSet& current, const std::string& name,
                                const std::map<std::string, std::optional<std::string>>& fields) {
  const std::string who = "rule set " + name + ": ";
  const Rule* rule = find_rule(current, name);
  if (rule == nullptr) return make_error(who + "no rule of that name runs");
  if (fields.empty()) return make_error(who + "no field to change");
  std::vector<std::string> lines = split_lines(dump_rule_yaml(*rule));
  for (const auto& [field, value] : fields) {
    if (!field_name_ok(field)) return make_error(who + "not a rules-file field: " + quoted(field.substr(0, 40)));
    if (field == "name")
      return make_error(who + "a rule's name is what it is known by: rename it with rule del and rule add");
    if (value && !value_ok(*value))
      return make_error(who + field + ": a value is one line of 1 to 4096 printable characters");
    // The field's line at indent 4 and whatever is nested under it.
    std::vector<std::string> kept;
    bool in_field = false;
    for (const std::string& l : lines) {
      const size_t ind = indent_of(l);
      if (ind == 4 && l.compare(4, field.size() + 1, field + ":") == 0) {
        in_field = true;
        continue;
      }
      if (in_field && ind > 4 && is_content(l)) continue;
      in_field = false;
      kept.push_back(l);
    }
    if (value) kept.push_back("    " + field + ": " + *value);
    lines = std::move(kept);
  }
  std::string yaml;
  for (const std::string& l : lines) yaml += l + "\n";
  Combined c;
  c.add_rules(current, name, yaml);
  auto next = load_rules_text(c.text, kCombinedName);
  if (!next) {
    std::string why = c.explain(next.error().message, kCombinedName, "");
    const std::string running = "rule " + quoted(name) + " (running): ";
    if (why.rfind(running, 0) == 0) why = why.substr(running.size());
    return make_error(who + why);
  }
  next->default_action = current.default_action;
  return next;
}

Result<RuleSet> delete_rule(const RuleSet& current, const std::string& name) {
  if (find_rule(current, name) == nullptr)
    return make_error("rule del " + name + ": no rule of that name runs");
  for (const Rule& r : current.rules)
    if (r.parent == name)
      return make_error("rule del " + name + ": rule " + quoted(r.name) +
                        " names it as its parent; delete that rule or change its parent first");
  RuleSet next = current;
  next.rules.erase(std::remove_if(next.rules.begin(), next.rules.end(),
                                  [&](const Rule& r) { return r.name == name; }),
                   next.rules.end());
  if (next.rules.empty()) return next;
  return reload(next);
}

}  // namespace sluice
