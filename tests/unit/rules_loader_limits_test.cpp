// Rules loader hardening: what one load may cost (rules_loader.hpp's limits), YAML features a
// rules file does not need, and that the loader refuses every file the pipeline would refuse
// (so `config check` saying ok means sluiced starts). Each rejection is FILE:LINE: message.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline.hpp"
#include "rules_loader.hpp"

namespace sluice {
namespace {

// A valid token-bucket body, for rules about other fields.
#define TB "    rate: 10pps\n    burst: 5\n"

// The error of a file that must not load, checked to start with "rules.yaml:LINE: ".
std::string error_at(const std::string& text, int line) {
  Result<RuleSet> r = load_rules_text(text, "rules.yaml");
  EXPECT_FALSE(r.ok()) << "loaded, expected an error at line " << line;
  if (r.ok()) return "";
  const std::string& m = r.error().message;
  std::string prefix = "rules.yaml:" + std::to_string(line) + ": ";
  EXPECT_EQ(m.substr(0, prefix.size()), prefix) << m.substr(0, 300);
  return m;
}

void expect_loads(const std::string& text) {
  Result<RuleSet> r = load_rules_text(text, "rules.yaml");
  EXPECT_TRUE(r.ok()) << r.error().message.substr(0, 300);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// One rule per line, flow style: rule i is on line i + 2.
std::string flow_rules(size_t n) {
  std::string t = "rules:\n";
  for (size_t i = 0; i < n; ++i)
    t += "  - {name: r" + std::to_string(i) + ", rate: 10pps, burst: 5}\n";
  return t;
}

// --- the file ---

// yaml-cpp 0.7's LoadAll never returned on this 2-byte file, its memory growing by ~0.5 GB/s.
TEST(RulesLoaderLimits, CommaFileIsASyntaxError) {
  std::string m = error_at(",\n", 1);
  EXPECT_TRUE(contains(m, "YAML syntax error")) << m;
}

TEST(RulesLoaderLimits, FileSize) {
  std::string head = "rules: []\n#";
  std::string at_limit = head + std::string(kMaxRulesFileBytes - head.size() - 1, 'x') + "\n";
  ASSERT_EQ(at_limit.size(), kMaxRulesFileBytes);
  expect_loads(at_limit);
  Result<RuleSet> r = load_rules_text(at_limit + "\n", "rules.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "rules.yaml: rules file of more than 16 MiB (16777216 bytes)");
}

TEST(RulesLoaderLimits, FileSizeOnDisk) {
  std::string path = testing::TempDir() + "rules_limits_" + std::to_string(::getpid()) + ".yaml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string line = "# " + std::string(1021, 'x') + "\n";  // 1 KiB
    std::fputs("rules: []\n", f);
    for (size_t i = 0; i < kMaxRulesFileBytes / line.size() + 1; ++i) std::fputs(line.c_str(), f);
    std::fclose(f);
  }
  Result<RuleSet> r = load_rules_file(path);
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path + ": rules file of more than 16 MiB (16777216 bytes)");
}

TEST(RulesLoaderLimits, NestingDepth) {
  // Depth 16 (4 maps and lists of the file's shape, 12 more lists in a value) is read, and
  // refused for what it is; one more level is refused as too deep, at its line.
  std::string prefix = "rules:\n  - name: a\n    match:\n      src: ";
  std::string deep16 = prefix + std::string(12, '[') + std::string(12, ']') + "\n" TB;
  std::string m16 = error_at(deep16, 4);
  EXPECT_TRUE(contains(m16, "\"src\" must be a single value, not a list")) << m16;
  std::string deep17 = prefix + std::string(13, '[') + std::string(13, ']') + "\n" TB;
  std::string m17 = error_at(deep17, 4);
  EXPECT_TRUE(contains(m17, "maps and lists nested more than 16 deep")) << m17;
}

TEST(RulesLoaderLimits, RuleCount) {
  Result<RuleSet> at_limit = load_rules_text(flow_rules(kMaxRules), "rules.yaml");
  ASSERT_TRUE(at_limit.ok()) << at_limit.error().message;
  EXPECT_EQ(at_limit->rules.size(), kMaxRules);
  std::string m = error_at(flow_rules(kMaxRules + 1), int(kMaxRules) + 2);
  EXPECT_TRUE(contains(m, "a list of more than 65536 items (a rules file holds at most 65536 "
                          "rules)"))
      << m;
}

TEST(RulesLoaderLimits, ValueLength) {
  // 256 bytes are read (and this one is refused as a rate); 257 are not.
  std::string at_limit = error_at("rules:\n  - name: a\n    rate: " + std::string(253, '9') +
                                      "pps\n    burst: 5\n",
                                  3);
  EXPECT_TRUE(contains(at_limit, "rate \"999")) << at_limit;
  std::string over = error_at("rules:\n  - name: a\n    rate: " + std::string(254, '9') +
                                  "pps\n    burst: 5\n",
                              3);
  EXPECT_TRUE(contains(over, "a key or value of 257 bytes (at most 256)")) << over;
  std::string key = error_at("rules:\n  - name: a\n" TB "    " + std::string(300, 'k') + ": 1\n",
                             5);
  EXPECT_TRUE(contains(key, "a key or value of 300 bytes")) << key;
}

// A 5 MB rate used to be echoed whole into the error.
TEST(RulesLoaderLimits, ErrorsQuoteAShortEscapedPrefix) {
  std::string big = error_at("rules:\n  - name: a\n    rate: " + std::string(5'000'000, '9') +
                                 "pps\n    burst: 5\n",
                             3);
  EXPECT_LT(big.size(), 200u) << big.substr(0, 300);
  // Under the length limit, a value is quoted up to 64 bytes, and never with raw control
  // bytes (YAML's "\e" escape puts an ESC into a double-quoted value).
  std::string odd = error_at("rules:\n  - name: \"a\\e[31m" + std::string(200, 'x') + "\"\n" TB, 2);
  EXPECT_TRUE(contains(odd, "invalid name \"a\\x1b[31mxxx")) << odd;
  EXPECT_TRUE(contains(odd, "... (206 bytes)")) << odd;
  EXPECT_FALSE(contains(odd, std::string(70, 'x'))) << odd;
  EXPECT_FALSE(contains(odd, "\x1b")) << odd;
}

TEST(RulesLoaderLimits, FieldsPerMap) {
  auto match_with = [](size_t fields) {
    std::string t = "rules:\n  - name: a\n" TB "    match:\n";
    for (size_t i = 0; i < fields; ++i) t += "      f" + std::to_string(i) + ": 1\n";
    return t;
  };
  // 64 fields are read (and the first unknown one refused); the 65th is refused at its line.
  std::string m64 = error_at(match_with(kMaxMapFields), 6);
  EXPECT_TRUE(contains(m64, "unknown field \"f0\"")) << m64;
  std::string m65 = error_at(match_with(kMaxMapFields + 1), 6 + int(kMaxMapFields));
  EXPECT_TRUE(contains(m65, "a map with more than 64 fields")) << m65;
}

TEST(RulesLoaderLimits, NodeCount) {
  // 65536 lists of 32 scalars: 65536 * 33 + 3 nodes, past 2^21 in the last lines.
  std::string t = "rules:\n";
  std::string item = "  - [";
  for (int k = 0; k < 31; ++k) item += "a, ";
  item += "a]\n";
  for (size_t i = 0; i < kMaxRules; ++i) t += item;
  Result<RuleSet> r = load_rules_text(t, "rules.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "more than 2097152 YAML nodes")) << r.error().message;
}

// --- YAML a rules file does not need ---

TEST(RulesLoaderLimits, AnchorsAndAliasesAreRefused) {
  // "Billion laughs": nine levels of aliases, each ten times the one before.
  std::string laughs = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    laughs += std::string(1, c) + ": &" + c + " [";
    for (int k = 0; k < 10; ++k) laughs += std::string(k ? ", *" : "*") + char(c - 1);
    laughs += "]\n";
  }
  std::string m = error_at(laughs, 1);
  EXPECT_TRUE(contains(m, "YAML anchors (&name) are not supported")) << m;
  std::string alias = error_at("rules:\n  - name: a\n" TB "    action: *drop\n", 5);
  EXPECT_TRUE(contains(alias, "YAML aliases (*name) are not supported")) << alias;
}

TEST(RulesLoaderLimits, TagsAreRefused) {
  std::string m = error_at("rules:\n  - name: !!str a\n" TB, 2);
  EXPECT_TRUE(contains(m, "YAML tags (!tag) are not supported")) << m;
}

TEST(RulesLoaderLimits, DuplicateKeysAreRefusedWithBothLines) {
  std::string top = error_at("rules: []\ndefault: {action: pass}\nrules: []\n", 3);
  EXPECT_TRUE(contains(top, "top level: duplicate field \"rules\" (first at line 1)")) << top;
  std::string flow = error_at("rules:\n  - {name: a, rate: 10pps, burst: 5, burst: 6}\n", 2);
  EXPECT_TRUE(contains(flow, "duplicate field \"burst\" (first at line 2)")) << flow;
}

TEST(RulesLoaderLimits, TextMustBePrintableUtf8) {
  // A NUL byte and malformed UTF-8 are refused at their line, not taken for the end of the file.
  std::string with_nul = "rules:\n  - name: a\n" TB "  - name: b";
  with_nul += '\0';
  with_nul += "c\n" TB;
  std::string nul = error_at(with_nul, 5);
  EXPECT_TRUE(contains(nul, "byte 0x00 is not printable UTF-8 text")) << nul;
  std::string bad = error_at("rules: []\n# \xff\xfe\n", 2);
  EXPECT_TRUE(contains(bad, "byte 0xff")) << bad;
  std::string overlong = error_at("rules: []\n#\n# \xc0\xaf\n", 3);
  EXPECT_TRUE(contains(overlong, "byte 0xc0")) << overlong;
  expect_loads("\xef\xbb\xbfrules: []  # caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n");
}

// The check reads printable ASCII eight bytes at a time: a bad byte at any offset within (or
// past) a word, and every byte value just outside printable ASCII, is still found at its line.
TEST(RulesLoaderLimits, NonPrintableByteAtAnyOffsetIsFoundAtItsLine) {
  for (char bad : {'\x01', '\x1f', '\x7f', '\x80', '\xff'}) {
    for (size_t at = 0; at < 24; ++at) {
      std::string comment(24, 'x');
      comment[at] = bad;
      const std::string text = "rules: []\n#\n# " + comment + "\n# more\n";
      std::string m = error_at(text, 3);
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", unsigned(uint8_t(bad)));
      EXPECT_TRUE(contains(m, std::string("byte ") + hex)) << m << " (offset " << at << ")";
    }
  }
  // Tabs and line breaks stay allowed wherever they fall.
  expect_loads("rules: []\n#\txxxxxxx\r\n#xxxxxx\txx\n# xxxxxxxxxxxxxxxx\t\n");
}

// --- what the pipeline would refuse ---

TEST(RulesLoaderLimits, DefaultIsAReservedName) {
  std::string m = error_at("rules:\n  - name: a\n" TB "  - name: default\n" TB, 5);
  EXPECT_TRUE(contains(m, "rule \"default\": the name \"default\" is reserved for the default "
                          "action"))
      << m;
}

// A chain of `depth` rules, c1's parent c2 and so on; c1 (the deepest) comes first, and its
// parent field is on line 5.
std::string chain(size_t depth) {
  std::string t = "rules:\n";
  for (size_t i = 1; i <= depth; ++i) {
    t += "  - name: c" + std::to_string(i) + "\n" TB;
    if (i < depth) t += "    parent: c" + std::to_string(i + 1) + "\n";
  }
  return t;
}

TEST(RulesLoaderLimits, ParentChainDepth) {
  Result<RuleSet> ok = load_rules_text(chain(kMaxParentChain), "rules.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(Pipeline::create(*ok, PipelineOptions{}).ok());
  std::string m = error_at(chain(kMaxParentChain + 1), 5);
  EXPECT_TRUE(contains(m, "rule \"c1\": parent chain c1 -> c2 -> c3 -> c4 -> c5 -> c6 -> c7 -> "
                          "c8 -> ... is more than 8 rules deep"))
      << m;
}

TEST(RulesLoaderLimits, PipelineRefusesTheChainTheLoaderRefuses) {
  // The loader's kMaxParentChain is pipeline.cpp's chain bound: a RuleSet one deeper, built
  // without the loader, is refused by Pipeline::create.
  Result<RuleSet> ok = load_rules_text(chain(kMaxParentChain), "rules.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  RuleSet deeper = *ok;
  Rule extra = deeper.rules.front();
  extra.name = "c0";
  extra.parent = "c1";
  for (Rule& r : deeper.rules)
    if (r.parent_index >= 0) ++r.parent_index;
  extra.parent_index = 1;  // c1, once c0 is in front of it
  deeper.rules.insert(deeper.rules.begin(), extra);
  EXPECT_FALSE(Pipeline::create(deeper, PipelineOptions{}).ok());
}

TEST(RulesLoaderLimits, MaxFlowsBound) {
  Result<RuleSet> ok = load_rules_text("rules:\n  - name: a\n" TB "    key: src-ip\n"
                                       "    max-flows: 268435456\n",
                                       "rules.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->rules[0].max_flows, kMaxFlowsPerRule);
  for (const char* v : {"268435457", "2000000000000", "18446744073709551615"}) {
    std::string m =
        error_at("rules:\n  - name: a\n" TB "    key: src-ip\n    max-flows: " + std::string(v) +
                     "\n",
                 6);
    EXPECT_TRUE(contains(m, "rule \"a\": max-flows " + std::string(v) +
                                " is above the limit of 268435456 (2^28) flows per rule"))
        << m;
  }
}

// Rates and bursts the bucket arithmetic cannot represent are refused at the rule's line,
// for every algorithm (limiter_profile.hpp's ranges), as Pipeline::create would refuse them.
TEST(RulesLoaderLimits, UnrepresentableProfiles) {
  const char* const bodies[] = {
      "    rate: 0.001pps\n    burst: 1000000000\n",                          // lasts too long
      "    rate: 1999999999pps\n    burst: 1000\n",                           // too fast
      "    algorithm: gcra\n    rate: 999999999999bit\n    burst: 1500\n",     // too fast
      "    algorithm: leaky-bucket\n    rate: 1bit\n    burst: 1GiB\n    max-delay: 1ms\n",
      "    algorithm: srtcm\n    rate: 0.001pps\n    burst: 5\n    excess-burst: 10000000000\n",
      "    algorithm: trtcm\n    rate: 10pps\n    burst: 5\n    peak-rate: 1999999999pps\n"
      "    peak-burst: 5\n",
      "    algorithm: fixed-window\n    window: 40h\n    limit: 5\n",
  };
  for (const char* body : bodies) {
    std::string text = "rules:\n  - name: ok\n" TB "  - name: bad\n" + std::string(body);
    std::string m = error_at(text, 5);
    EXPECT_TRUE(contains(m, "rule \"bad\": ")) << body << m;
  }
}

// Files at and just past each profile bound: the loader and Pipeline::create agree on every
// one (a file the loader accepts compiles; none it refuses for a profile would).
TEST(RulesLoaderLimits, LoaderAndPipelineAgree) {
  const char* const bodies[] = {
      "    rate: 800Mpps\n    burst: 1\n",     "    rate: 1999999999pps\n    burst: 1\n",
      "    rate: 400Gbit\n    burst: 64\n",    "    rate: 999999999999bit\n    burst: 64\n",
      "    rate: 0.001pps\n    burst: 1\n",    "    rate: 1bit\n    burst: 64\n",
      "    rate: 1pps\n    burst: 140000\n",   "    rate: 1pps\n    burst: 1400000000\n",
      "    algorithm: fixed-window\n    window: 1us\n    limit: 1\n",
      "    algorithm: sliding-window\n    window: 39h\n    limit: 18446744073709551615\n",
      "    algorithm: leaky-bucket\n    rate: 1Mbit\n    burst: 1500\n    max-delay: 60s\n",
  };
  size_t accepted = 0;
  for (const char* body : bodies) {
    std::string text =
        "rules:\n  - name: r\n    key: src-ip\n    max-flows: 8\n" + std::string(body);
    Result<RuleSet> loaded = load_rules_text(text, "rules.yaml");
    if (!loaded.ok()) continue;  // refused with its line: nothing for the pipeline to see
    ++accepted;
    auto p = Pipeline::create(*loaded, PipelineOptions{});
    EXPECT_TRUE(p.ok()) << body << (p.ok() ? "" : p.error().message);
  }
  // Both sides of the bounds are there: rates past 800 Mpps / 400 Gbit/s with no exact time unit
  // (many significant digits) and a 1.4e9 s burst are not.
  EXPECT_EQ(accepted, std::size(bodies) - 3);
}

// --- examples ---

std::vector<std::filesystem::path> rules_examples() {
  const char* dir = std::getenv("SLUICE_EXAMPLES_DIR");
  std::vector<std::filesystem::path> files;
  if (dir == nullptr) return files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  return files;
}

TEST(RulesLoaderLimits, EveryExampleLoadsAndCompiles) {
  std::vector<std::filesystem::path> files = rules_examples();
  ASSERT_GE(files.size(), 2u) << "SLUICE_EXAMPLES_DIR unset or without examples";
  for (const auto& f : files) {
    Result<RuleSet> r = load_rules_file(f.string());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->rules.empty()) << f;
    auto p = Pipeline::create(*r, PipelineOptions{});
    EXPECT_TRUE(p.ok()) << f << ": " << (p.ok() ? "" : p.error().message);
  }
}

#undef TB

}  // namespace
}  // namespace sluice
