// The YAML reader of the rules loader, on libyaml's event parser (see rules_loader.cpp for why
// libyaml): the events build our own document (YamlDocument), so every limit is checked as the
// document streams past, before anything is built beyond it, and YAML features that would need
// expanding (aliases) never get a meaning.
#include "rules_yaml.hpp"

#include <yaml.h>

#include <cstring>

namespace sluice::rules_internal {

namespace {

const char kHex[] = "0123456789abcdef";

std::string hex_byte(uint8_t b) { return {'\\', 'x', kHex[b >> 4], kHex[b & 15]}; }

std::string printable_ascii(const std::string& msg) {
  std::string out;
  out.reserve(msg.size());
  for (char c : msg) {
    if (uint8_t(c) >= 0x20 && uint8_t(c) < 0x7f) out += c;
    else out += hex_byte(uint8_t(c));
  }
  return out;
}

}  // namespace

Error Messages::at(int line, const std::string& msg) const {
  return invalid_input(file_ + ":" + std::to_string(line < 1 ? 1 : line) + ": " +
                       printable_ascii(msg));
}

Error Messages::whole(const std::string& msg) const {
  return invalid_input(file_ + ": " + printable_ascii(msg));
}

const YamlNode* YamlNode::find(std::string_view key_text) const {
  if (!is_map()) return nullptr;
  for (Iterator it = begin(); it != end();) {
    const YamlNode& k = *it;
    const YamlNode& v = *++it;
    ++it;
    if (k.is_scalar() && k.text == key_text) return &v;
  }
  return nullptr;
}

namespace {

// ---------------------------------------------------------------------------------------
// Text before YAML: the whole input must be YAML's printable UTF-8 (YAML 1.2 §5.1
// c-printable). libyaml checks this too, but reports it without a line; and a parser that
// missed it could stop short of the file's end (libfyaml 0.7.12 silently stops at a NUL byte
// and at some malformed UTF-8), so it is checked here, with the line, first.

// Length of the UTF-8 sequence at s[i] that encodes a c-printable character, 0 if there is
// none there.
size_t printable_at(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return k < s.size() ? uint8_t(s[k]) : uint8_t(0); };
  uint8_t b0 = byte(i);
  if (b0 == '\t' || b0 == '\n' || b0 == '\r' || (b0 >= 0x20 && b0 < 0x7f)) return 1;
  size_t len = b0 >= 0xc2 && b0 <= 0xdf   ? 2
               : b0 >= 0xe0 && b0 <= 0xef ? 3
               : b0 >= 0xf0 && b0 <= 0xf4 ? 4
                                          : 0;
  if (len == 0) return 0;
  uint32_t cp = b0 & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    uint8_t b = byte(i + k);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[len] || cp > 0x10ffff) return 0;  // overlong, or past Unicode
  bool printable = cp == 0x85 || (cp >= 0xa0 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) ||
                   cp >= 0x10000;
  return printable ? len : 0;
}

// True when one of the 8 bytes of `w` is outside printable ASCII (0x20-0x7e): below 0x20, or
// 0x7f and above (bit tricks of "Bit Twiddling Hacks", hasless / hasmore, exact for these).
bool has_non_printable_ascii(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  const uint64_t below = (w - kOnes * 0x20) & ~w & kHigh;
  const uint64_t above = ((w + kOnes * (127 - 0x7e)) | w) & kHigh;
  return (below | above) != 0;
}

Status check_printable(std::string_view text, const Messages& msg) {
  int line = 1;
  for (size_t i = 0; i < text.size();) {
    // Runs of printable ASCII (nearly all of a rules file) eight bytes at a time.
    uint64_t w;
    if (i + 8 <= text.size() && (std::memcpy(&w, text.data() + i, 8), !has_non_printable_ascii(w))) {
      i += 8;
      continue;
    }
    size_t n = printable_at(text, i);
    if (n == 0) {
      uint8_t b = uint8_t(text[i]);
      std::string hex = {'0', 'x', kHex[b >> 4], kHex[b & 15]};
      return msg.at(line, "byte " + hex + " is not printable UTF-8 text (YAML allows tab, " +
                              "line breaks and printable Unicode only)");
    }
    if (text[i] == '\n') ++line;
    i += n;
  }
  return Ok{};
}

// ---------------------------------------------------------------------------------------
// libyaml's parser, and the events it hands out (each owned by its caller until deleted).

class Parser {
 public:
  Parser() { ok_ = yaml_parser_initialize(&parser_) != 0; }
  ~Parser() {
    if (ok_) yaml_parser_delete(&parser_);  // a failed initialize has cleaned up after itself
  }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  bool ok() const { return ok_; }
  yaml_parser_t* get() { return &parser_; }

 private:
  yaml_parser_t parser_;
  bool ok_ = false;
};

class Event {
 public:
  // False (and no event) on a syntax error or an allocation failure: the parser says which.
  bool next(Parser& p) {
    clear();
    have_ = yaml_parser_parse(p.get(), &event_) != 0;
    return have_;
  }
  ~Event() { clear(); }
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  const yaml_event_t& get() const { return event_; }
  int line() const { return int(event_.start_mark.line) + 1; }

 private:
  void clear() {
    if (have_) yaml_event_delete(&event_);
    have_ = false;
  }
  yaml_event_t event_{};
  bool have_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Events -> document.

class YamlDocumentBuilder {
 public:
  YamlDocumentBuilder(std::string_view text, const Messages& msg, const YamlLimits& limits)
      : text_(text), msg_(msg), limits_(limits) {}
  Result<YamlDocument> build();

 private:
  Status add_event(const Event& e, bool* done);
  Status check_properties(const yaml_char_t* anchor, const yaml_char_t* tag, int line) const;
  Status attach(const YamlNode& node, std::string_view text);
  Error parser_error();
  void finish_text();

  std::string_view text_;
  const Messages& msg_;
  YamlLimits limits_;
  Parser parser_;
  YamlDocument doc_;
  // Where each node's text is in doc_.chars_ (offset, length): the views are made once the
  // characters stop moving.
  std::vector<std::pair<uint32_t, uint32_t>> text_at_;
  std::vector<uint32_t> open_;  // collections being filled (node indices), innermost last
  size_t nodes_ = 0;
};

// Why libyaml stopped, at its line: "YAML syntax error: did not find expected '-' indicator
// (while parsing a block collection at line 2)".
Error YamlDocumentBuilder::parser_error() {
  const yaml_parser_t& p = *parser_.get();
  if (p.error == YAML_MEMORY_ERROR) return msg_.whole("out of memory while parsing the YAML");
  std::string m = std::string("YAML syntax error: ") + (p.problem ? p.problem : "unknown");
  if (p.context != nullptr)
    m += std::string(" (") + p.context + " at line " + std::to_string(p.context_mark.line + 1) +
         ")";
  return msg_.at(int(p.problem_mark.line) + 1, m);
}

Status YamlDocumentBuilder::check_properties(const yaml_char_t* anchor, const yaml_char_t* tag,
                                             int line) const {
  if (anchor != nullptr)
    return msg_.at(line, "YAML anchors (&name) are not supported in a rules file");
  if (tag != nullptr) return msg_.at(line, "YAML tags (!tag) are not supported in a rules file");
  return Ok{};
}

// Adds `node` (with `text`) as the next item of the innermost open collection (or as the
// root), within the limits.
Status YamlDocumentBuilder::attach(const YamlNode& node, std::string_view text) {
  if (++nodes_ > limits_.max_nodes)
    return msg_.at(node.line, "more than " + std::to_string(limits_.max_nodes) +
                                  " YAML nodes (keys, values and list items) in one file");
  std::vector<YamlNode>& nodes = doc_.nodes_;
  if (!open_.empty()) {
    YamlNode& parent = nodes[open_.back()];
    bool is_key = parent.is_map() && parent.items % 2 == 0;
    if (is_key && parent.map_size() == limits_.max_map_keys)
      return msg_.at(node.line,
                     "a map with more than " + std::to_string(limits_.max_map_keys) + " fields");
    if (parent.is_list() && parent.items == limits_.max_list_items)
      return msg_.at(node.line, "a list of more than " + std::to_string(limits_.max_list_items) +
                                    " items (a rules file holds at most " +
                                    std::to_string(limits_.max_list_items) + " rules)");
    ++parent.items;
  }
  text_at_.emplace_back(uint32_t(doc_.chars_.size()), uint32_t(text.size()));
  doc_.chars_.insert(doc_.chars_.end(), text.begin(), text.end());
  nodes.push_back(node);
  return Ok{};
}

Status YamlDocumentBuilder::add_event(const Event& e, bool* done) {
  const yaml_event_t& ev = e.get();
  const int line = e.line();
  switch (ev.type) {
    case YAML_ALIAS_EVENT:
      return msg_.at(line, "YAML aliases (*name) are not supported in a rules file");
    case YAML_SCALAR_EVENT: {
      const auto& sc = ev.data.scalar;
      if (Status s = check_properties(sc.anchor, sc.tag, line); !s) return s;
      if (sc.length > limits_.max_scalar_bytes)
        return msg_.at(line, "a key or value of " + std::to_string(sc.length) + " bytes (at most " +
                                 std::to_string(limits_.max_scalar_bytes) + ")");
      const std::string_view t(reinterpret_cast<const char*>(sc.value), sc.length);
      bool null = sc.style == YAML_PLAIN_SCALAR_STYLE &&
                  (t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL");
      YamlNode node;
      node.line = line;
      node.kind = null ? YamlNode::Kind::null : YamlNode::Kind::scalar;
      if (Status s = attach(node, t); !s) return s;
      break;
    }
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT: {
      bool map = ev.type == YAML_MAPPING_START_EVENT;
      Status s = map ? check_properties(ev.data.mapping_start.anchor, ev.data.mapping_start.tag,
                                        line)
                     : check_properties(ev.data.sequence_start.anchor,
                                        ev.data.sequence_start.tag, line);
      if (!s) return s;
      if (open_.size() == limits_.max_depth)
        return msg_.at(line, "maps and lists nested more than " +
                                 std::to_string(limits_.max_depth) + " deep");
      YamlNode node;
      node.line = line;
      node.kind = map ? YamlNode::Kind::map : YamlNode::Kind::list;
      if (Status st = attach(node, {}); !st) return st;
      open_.push_back(uint32_t(doc_.nodes_.size() - 1));
      break;
    }
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
      if (!open_.empty()) {
        YamlNode& closed = doc_.nodes_[open_.back()];
        closed.span = uint32_t(doc_.nodes_.size() - open_.back());
        open_.pop_back();
      }
      break;
    case YAML_DOCUMENT_END_EVENT:
    case YAML_STREAM_END_EVENT:
      *done = true;
      break;
    default:  // stream and document starts
      break;
  }
  return Ok{};
}

void YamlDocumentBuilder::finish_text() {
  const char* chars = doc_.chars_.data();
  for (size_t i = 0; i < doc_.nodes_.size(); ++i)
    doc_.nodes_[i].text = std::string_view(chars + text_at_[i].first, text_at_[i].second);
}

Result<YamlDocument> YamlDocumentBuilder::build() {
  if (Status s = check_printable(text_, msg_); !s) return s.error();
  if (!parser_.ok()) return msg_.whole("out of memory while starting the YAML parser");
  yaml_parser_set_input_string(parser_.get(), reinterpret_cast<const unsigned char*>(text_.data()),
                               text_.size());
  yaml_parser_set_encoding(parser_.get(), YAML_UTF8_ENCODING);
  // Room for what a rules file usually holds: ~1 node per 6 bytes, scalars ~half the bytes.
  doc_.nodes_.reserve(text_.size() / 6 + 1);
  text_at_.reserve(text_.size() / 6 + 1);
  doc_.chars_.reserve(text_.size() / 2 + 1);
  // The first document, event by event.
  Event e;
  bool stream_ended = false;
  for (bool done = false; !done;) {
    if (!e.next(parser_)) return parser_error();
    stream_ended = e.get().type == YAML_STREAM_END_EVENT;
    if (Status s = add_event(e, &done); !s) return s.error();
  }
  if (stream_ended) return YamlDocument{};  // no document at all: an empty file
  // Then the end of the stream, or a second document: named at its first node.
  if (!e.next(parser_)) return parser_error();
  if (e.get().type == YAML_DOCUMENT_START_EVENT) {
    if (!e.next(parser_)) return parser_error();
    // An empty first document is the caller's to report; it says more than this would.
    if (!doc_.root().is_null())
      return msg_.at(e.line(), "more than one YAML document; a rules file holds one");
  }
  finish_text();
  return std::move(doc_);
}

Result<YamlDocument> read_yaml_document(std::string_view text, const Messages& msg,
                                        const YamlLimits& limits) {
  return YamlDocumentBuilder(text, msg, limits).build();
}

}  // namespace sluice::rules_internal
