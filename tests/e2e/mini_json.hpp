// A tiny JSON reader for the tests: enough to read REPORT.json (objects, arrays, strings,
// unsigned integers, true/false/null) and to reject anything that is not well-formed JSON.
#pragma once

#include <cctype>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::testing {

struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool b = false;
  double number = 0;
  uint64_t integer = 0;  // exact value when the number is a non-negative integer
  std::string str;
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  bool has(const std::string& key) const { return fields.count(key) != 0; }
  const Json& at(const std::string& key) const {
    auto it = fields.find(key);
    if (kind != Kind::object || it == fields.end())
      throw std::runtime_error("JSON: no field \"" + key + "\"");
    return it->second;
  }
  uint64_t u64(const std::string& key) const {
    const Json& v = at(key);
    if (v.kind != Kind::number) throw std::runtime_error("JSON: \"" + key + "\" is not a number");
    return v.integer;
  }

  static Json parse(const std::string& text) {
    size_t pos = 0;
    Json v = parse_value(text, pos);
    skip_ws(text, pos);
    if (pos != text.size()) fail(pos, "trailing characters");
    return v;
  }

 private:
  [[noreturn]] static void fail(size_t pos, const std::string& what) {
    throw std::runtime_error("JSON at offset " + std::to_string(pos) + ": " + what);
  }
  static void skip_ws(const std::string& s, size_t& p) {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\r' || s[p] == '\t')) ++p;
  }
  static void expect(const std::string& s, size_t& p, char c) {
    skip_ws(s, p);
    if (p >= s.size() || s[p] != c) fail(p, std::string("expected '") + c + "'");
    ++p;
  }
  static Json parse_value(const std::string& s, size_t& p) {
    skip_ws(s, p);
    if (p >= s.size()) fail(p, "unexpected end");
    Json v;
    char c = s[p];
    if (c == '{') {
      v.kind = Kind::object;
      ++p;
      skip_ws(s, p);
      if (p < s.size() && s[p] == '}') return ++p, v;
      for (;;) {
        skip_ws(s, p);
        std::string key = parse_string(s, p);
        expect(s, p, ':');
        if (v.fields.count(key)) fail(p, "duplicate key \"" + key + "\"");
        v.fields[key] = parse_value(s, p);
        skip_ws(s, p);
        if (p < s.size() && s[p] == ',') { ++p; continue; }
        expect(s, p, '}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = Kind::array;
      ++p;
      skip_ws(s, p);
      if (p < s.size() && s[p] == ']') return ++p, v;
      for (;;) {
        v.items.push_back(parse_value(s, p));
        skip_ws(s, p);
        if (p < s.size() && s[p] == ',') { ++p; continue; }
        expect(s, p, ']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = Kind::string;
      v.str = parse_string(s, p);
      return v;
    }
    for (const char* word : {"true", "false", "null"}) {
      if (s.compare(p, std::char_traits<char>::length(word), word) == 0) {
        p += std::char_traits<char>::length(word);
        v.kind = word[0] == 'n' ? Kind::null : Kind::boolean;
        v.b = word[0] == 't';
        return v;
      }
    }
    return parse_number(s, p);
  }
  static Json parse_number(const std::string& s, size_t& p) {
    size_t start = p;
    if (p < s.size() && s[p] == '-') ++p;
    bool integral = true;
    while (p < s.size() && (std::isdigit(uint8_t(s[p])) || s[p] == '.' || s[p] == 'e' ||
                            s[p] == 'E' || s[p] == '+' || s[p] == '-')) {
      if (!std::isdigit(uint8_t(s[p]))) integral = false;
      ++p;
    }
    if (p == start) fail(p, "unexpected character");
    Json v;
    v.kind = Kind::number;
    std::string text = s.substr(start, p - start);
    v.number = std::stod(text);
    if (integral) v.integer = std::stoull(text);
    return v;
  }
  static std::string parse_string(const std::string& s, size_t& p) {
    if (p >= s.size() || s[p] != '"') fail(p, "expected a string");
    ++p;
    std::string out;
    while (p < s.size() && s[p] != '"') {
      char c = s[p++];
      if (uint8_t(c) < 0x20) fail(p, "control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p >= s.size()) fail(p, "bad escape");
      char e = s[p++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (p + 4 > s.size()) fail(p, "bad \\u escape");
          unsigned cp = std::stoul(s.substr(p, 4), nullptr, 16);
          p += 4;
          if (cp >= 0x80) fail(p, "non-ASCII \\u escapes are not needed by these tests");
          out += char(cp);
          break;
        }
        default: fail(p, "bad escape");
      }
    }
    if (p >= s.size()) fail(p, "unterminated string");
    ++p;
    return out;
  }
};

}  // namespace sluice::testing
