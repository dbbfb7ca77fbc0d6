#include "rule_edits.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <string_view>
#include <unordered_map>
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

// The client's rules (or the one edited rule) as a rules file of their own: `rules:`, then
// the lines taken, re-indented as items of its list. Remembers how its lines map back to the
// client's. The running rules are not in it: they are valid already, and the new ones are
// checked against them on the structs (link_rules), so an edit reads only what changes.
struct Combined {
  std::string text = "rules:\n";
  int next_line = 2;
  int client_first_line = 0;  // the combined line of the client's first line taken
  int client_offset = 0;      // client line = combined line - client_offset

  // The message of loading text under `filename` with its file name taken off: "LINE: what"
  // when the line is the client's (`client_filename` non-empty), else "what".
  std::string explain(const std::string& message, const std::string& filename,
                      const std::string& client_filename) const {
    const std::string prefix = filename + ":";
    if (message.rfind(prefix, 0) != 0) return message;
    size_t at = prefix.size();
    int line = 0;
    while (at < message.size() && std::isdigit(static_cast<unsigned char>(message[at])))
      line = line * 10 + (message[at++] - '0');
    if (line == 0) {  // "FILE: message": the text as a whole
      at = prefix.size();
      while (at < message.size() && message[at] == ' ') ++at;
      return client_filename.empty() ? message.substr(at) : client_filename + ": " + message.substr(at);
    }
    if (message.compare(at, 2, ": ") != 0) return message;
    const std::string what = message.substr(at + 2);
    if (!client_filename.empty() && client_first_line != 0 && line >= client_first_line)
      return at_client_line(client_filename, line, what);
    return what;
  }
  std::string at_client_line(const std::string& client_filename, int line, const std::string& what) const {
    return client_filename + ":" + std::to_string(line - client_offset) + ": " + what;
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
      // Items at indent 2, as a rules file's are.
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

// The running rules with parents resolved again (after rules moved or went), or the first
// error across them; `where(i)` names rule i in a message.
Status relink(RuleSet& set, const std::function<std::string(size_t, const std::string&)>& where) {
  return link_rules(set, [&](size_t i, const std::string& m) { return invalid_input(where(i, m)); });
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
  if (Status s = take_client_rules(text, filename, &c); !s) return s.error();
  std::vector<int> parent_lines;
  auto added = load_rules_text_unlinked(c.text, kCombinedName, &parent_lines);
  if (!added) return invalid_input(c.explain(added.error().message, kCombinedName, filename));
  if (added->rules.empty()) return make_error(filename + ": no rule to add");
  if (current.rules.size() + added->rules.size() > kMaxRules)
    return invalid_input(filename + ": " + std::to_string(added->rules.size()) +
                         " more rules would run " +
                         std::to_string(current.rules.size() + added->rules.size()) +
                         ", more than the " + std::to_string(kMaxRules) + " a rule set holds");
  // Names: unique within the text (the loader), and against the running rules here.
  std::unordered_map<std::string_view, size_t> running;
  running.reserve(current.rules.size());
  for (size_t i = 0; i < current.rules.size(); ++i) running.emplace(current.rules[i].name, i);
  for (const Rule& r : added->rules)
    if (running.count(r.name))
      return invalid_input(c.at_client_line(filename, r.line, "rule " + quoted(r.name) +
                                                                  ": duplicate name (a running rule has it)"));
  // The new rules at the end, or before `before`; parents resolved across the whole set.
  RuleSet next;
  next.default_action = current.default_action;
  next.rules.reserve(current.rules.size() + added->rules.size());
  size_t first_added = current.rules.size();
  for (const Rule& r : current.rules) {
    if (!before.empty() && r.name == before) {
      first_added = next.rules.size();
      for (Rule& a : added->rules) next.rules.push_back(std::move(a));
    }
    next.rules.push_back(r);
  }
  if (before.empty())
    for (Rule& a : added->rules) next.rules.push_back(std::move(a));
  const size_t added_count = parent_lines.size();
  Status linked = relink(next, [&](size_t i, const std::string& m) {
    if (i >= first_added && i < first_added + added_count)
      return c.at_client_line(filename, parent_lines[i - first_added], m);
    return "rule " + quoted(next.rules[i].name) + " (running): " + m;
  });
  if (!linked) return linked.error();
  // The client's rules carry the client's lines, for later messages.
  for (size_t i = first_added; i < first_added + added_count; ++i)
    next.rules[i].line -= c.client_offset;
  return next;
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
  // The edited rule alone through the loader (a rules file of one rule), then in place of
  // the running one, checked across the set on the structs.
  Combined c;
  for (const std::string& l : lines) c.text += l + "\n";
  auto edited = load_rules_text_unlinked(c.text, kCombinedName, nullptr);
  if (!edited) return make_error(who + c.explain(edited.error().message, kCombinedName, ""),
                                 edited.error().kind);
  if (edited->rules.size() != 1) return make_error(who + "the edit did not leave one rule");
  const size_t at = size_t(rule - current.rules.data());
  RuleSet next = current;
  edited->rules[0].line = next.rules[at].line;
  next.rules[at] = std::move(edited->rules[0]);
  Status linked = relink(next, [&](size_t i, const std::string& m) {
    return i == at ? who + m : who + "rule " + quoted(next.rules[i].name) + " (running): " + m;
  });
  if (!linked) return linked.error();
  return next;
}

Result<RuleSet> delete_rule(const RuleSet& current, const std::string& name) {
  if (find_rule(current, name) == nullptr)
    return make_error("rule del " + name + ": no rule of that name runs");
  for (const Rule& r : current.rules)
    if (r.parent == name)
      return make_error("rule del " + name + ": rule " + quoted(r.name) +
                        " names it as its parent; delete that rule or change its parent first");
  RuleSet next;
  next.default_action = current.default_action;
  next.rules.reserve(current.rules.size());
  for (const Rule& r : current.rules)
    if (r.name != name) next.rules.push_back(r);
  Status linked = relink(next, [&](size_t i, const std::string& m) {
    return "rule del " + name + ": rule " + quoted(next.rules[i].name) + " (running): " + m;
  });
  if (!linked) return linked.error();
  return next;
}

}  // namespace sluice
