// Internal to the rules loader (rules_loader.hpp is the public interface). YAML maps -> fields
// -> values, with every failure as "FILE:LINE: message"; and parse_rule, which turns one rule
// map into a Rule by way of a field table (rules_fields.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "result.hpp"
#include "rules.hpp"
#include "rules_values.hpp"
#include "rules_yaml.hpp"

namespace sluice::rules_internal {

struct Field {
  std::string_view key;   // in the document, which outlives the fields
  const YamlNode* value;  // in the document
  int line;               // of the key: a missing value has no position of its own
  size_t allowed_index;   // of the key in collect_fields' `allowed`
};

using Fields = std::vector<Field>;

const Field* find_field(const Fields& fields, std::string_view key);

// Lists a map's fields, rejecting duplicates and names outside `allowed`. `where` names the
// map in messages ("rule \"dns\"", "rule \"dns\" match").
Result<Fields> collect_fields(const Messages& msg, const YamlNode& map,
                              const std::vector<std::string_view>& allowed,
                              const std::string& where);

// collect_fields for a field whose value must itself be a map; `outer` names the map that
// holds `f`, `where` the map `f` holds.
Result<Fields> collect_map_fields(const Messages& msg, const Field& f, const std::string& outer,
                                  const std::vector<std::string_view>& allowed,
                                  const std::string& where);

// The field's value as text (in the document); a null, map or list value is an error.
Result<std::string_view> scalar_of(const Messages& msg, const Field& f, const std::string& where);

// Reads a scalar field with `parse(text) -> Result<T>`; a failure reads
// `WHERE: KEY "TEXT": WHY`.
template <class T, class Parse>
Result<T> parse_field(const Messages& msg, const Field& f, const std::string& where, Parse parse) {
  Result<std::string_view> text = scalar_of(msg, f, where);
  if (!text) return text.error();
  Result<T> value = [&] {
    if constexpr (std::is_invocable_v<Parse, std::string_view>) return parse(*text);
    else return parse(std::string(*text));
  }();
  if (!value)
    return msg.at(f.line, where + ": " + std::string(f.key) + " " + quoted(*text) + ": " +
                              value.error().message);
  return value;
}

// One rule map -> Rule (everything but parent_index), with the limits of check_rule_limits
// checked. Checks that need other rules (names, parents) are the caller's.
struct ParsedRule {
  Rule rule;
  int parent_line = 0;  // of the "parent" field, when there is one
};
Result<ParsedRule> parse_rule(const Messages& msg, const YamlNode& node, size_t index);

}  // namespace sluice::rules_internal
