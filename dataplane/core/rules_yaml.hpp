// Internal to the rules loader (rules_loader.hpp is the public interface). Reads the one YAML
// document of a rules file into one array of its maps, lists and scalars, refusing on the way
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

// One node of a document. A document's nodes lie in one array in document order (pre-order),
// so a collection's items follow it: the first right after it, each next one `span` nodes
// after the one before (span: the node and everything under it). Nodes and their text live
// as long as their YamlDocument; one load allocates a few arrays, not one per node.
struct YamlNode {
  // null: an empty value, "~" or "null" written plain (a quoted "" is an empty scalar).
  enum class Kind : uint8_t { null, scalar, map, list };
  Kind kind = Kind::null;
  int line = 0;           // 1-based, where the node starts
  std::string_view text;  // scalars
  // A list's items; a map's keys and values alternating (key 0, value 0, key 1, ...), in the
  // file's order.
  uint32_t items = 0;
  uint32_t span = 1;

  bool is_null() const { return kind == Kind::null; }
  bool is_scalar() const { return kind == Kind::scalar; }
  bool is_map() const { return kind == Kind::map; }
  bool is_list() const { return kind == Kind::list; }
  size_t map_size() const { return items / 2; }

  // The items of a list, or a map's keys and values alternating: for (const YamlNode& n : node).
  class Iterator {
   public:
    explicit Iterator(const YamlNode* at) : at_(at) {}
    const YamlNode& operator*() const { return *at_; }
    Iterator& operator++() {
      at_ += at_->span;
      return *this;
    }
    bool operator==(const Iterator& o) const { return at_ == o.at_; }

   private:
    const YamlNode* at_;
  };
  Iterator begin() const { return Iterator(this + 1); }
  Iterator end() const { return Iterator(this + span); }

  // The value of the first scalar key equal to `key`, or nullptr (maps only).
  const YamlNode* find(std::string_view key) const;
};

// A document: its nodes (the root first) and the text of its scalars.
class YamlDocument {
 public:
  const YamlNode& root() const { return nodes_.empty() ? kNull : nodes_.front(); }

 private:
  friend class YamlDocumentBuilder;
  static constexpr YamlNode kNull{};
  std::vector<YamlNode> nodes_;
  std::vector<char> chars_;  // not a std::string: a move must keep the nodes' views valid
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
Result<YamlDocument> read_yaml_document(std::string_view text, const Messages& msg,
                                    const YamlLimits& limits);

}  // namespace sluice::rules_internal
