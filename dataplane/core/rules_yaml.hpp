// Internal to the rules loader (rules_loader.hpp is the public interface). Reads the one YAML
// document of a rules file into a small tree of maps, lists and scalars, refusing on the way
// anything a rules file has no use for that could make one load cost without bound: anchors
// and aliases, tags, nesting, long scalars, wide maps and lists, and node counts past the
// limits of rules_loader.hpp. Every failure is "FILE:LINE: message".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "result.hpp"

namespace sluice::rules_internal {

// Formats "FILE:LINE: message" for one file; a line below 1 (no position known) reads 1. A
// message is printable ASCII: any other byte in it (from a value quoted in it) becomes \xNN.
class Messages {
 public:
  explicit Messages(std::string file) : file_(std::move(file)) {}
  Error at(int line, const std::string& msg) const;
  // For what has no line: the file as a whole (its size, the parser failing to start).
  Error whole(const std::string& msg) const;

 private:
  std::string file_;
};

struct YamlNode {
  // null: an empty value, "~" or "null" written plain (a quoted "" is an empty scalar).
  enum class Kind : uint8_t { null, scalar, map, list };
  Kind kind = Kind::null;
  int line = 0;      // 1-based, where the node starts
  std::string text;  // scalars
  // A list's items; a map's keys and values alternating (key 0, value 0, key 1, ...), in the
  // file's order.
  std::vector<YamlNode> items;

  bool is_null() const { return kind == Kind::null; }
  bool is_scalar() const { return kind == Kind::scalar; }
  bool is_map() const { return kind == Kind::map; }
  bool is_list() const { return kind == Kind::list; }
  size_t map_size() const { return items.size() / 2; }
  const YamlNode& key(size_t i) const { return items[2 * i]; }
  const YamlNode& value(size_t i) const { return items[2 * i + 1]; }
  // The value of the first scalar key equal to `key`, or nullptr (maps only).
  const YamlNode* find(std::string_view key) const;
};

struct YamlLimits {
  size_t max_depth;          // maps and lists open at once
  size_t max_scalar_bytes;   // of any key or value
  size_t max_map_keys;       // per map
  size_t max_list_items;     // per list
  size_t max_nodes;          // in the document
};

// The document of `text`, whose root is null for an empty file. A second document, a syntax
// error or a limit is an error at its line.
Result<YamlNode> read_yaml_document(std::string_view text, const Messages& msg,
                                    const YamlLimits& limits);

}  // namespace sluice::rules_internal
