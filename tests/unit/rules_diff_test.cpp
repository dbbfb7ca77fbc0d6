#include "rules_diff.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "rules_loader.hpp"

namespace sluice {
namespace {

RuleSet load(const std::string& text) {
  auto r = load_rules_text(text, "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : RuleSet{};
}

const char* kBase = R"(default: {action: pass}
rules:
  - name: a
    match: {proto: udp}
    key: src-ip
    rate: 100pps
    burst: 10
  - name: b
    key: none
    rate: 1Mbit
    burst: 1500
  - name: c
    key: none
    rate: 5pps
    burst: 5
)";

const RuleChange& find(const RulesDiff& d, const std::string& name) {
  for (const RuleChange& c : d.rules)
    if (c.name == name) return c;
  ADD_FAILURE() << "no change named " << name;
  static RuleChange none;
  return none;
}

TEST(RulesDiff, SameSetIsEmpty) {
  RulesDiff d = diff_rules(load(kBase), load(kBase));
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.count(RuleChangeKind::unchanged), 3u);
  for (const RuleChange& c : d.rules) EXPECT_TRUE(c.keeps_state);
  EXPECT_EQ(format_rules_diff(d), "no change\n");
}

TEST(RulesDiff, RateAndBurstChangeKeepsState) {
  std::string text = kBase;
  text.replace(text.find("rate: 100pps"), 12, "rate: 200pps");
  text.replace(text.find("burst: 10\n"), 10, "burst: 20\n");
  RulesDiff d = diff_rules(load(kBase), load(text));
  const RuleChange& a = find(d, "a");
  EXPECT_EQ(a.kind, RuleChangeKind::changed);
  EXPECT_EQ(a.fields, (std::vector<std::string>{"rate", "burst"}));
  EXPECT_TRUE(a.keeps_state);
  EXPECT_EQ(find(d, "b").kind, RuleChangeKind::unchanged);
  EXPECT_NE(format_rules_diff(d).find("~ a: rate, burst (buckets kept)"), std::string::npos);
}

TEST(RulesDiff, MatchKeyAlgorithmOrUnitChangeStartsFresh) {
  struct Case {
    const char* from;
    const char* to;
    const char* field;
  };
  const Case cases[] = {
      {"match: {proto: udp}", "match: {proto: tcp}", "match"},
      {"key: src-ip", "key: dst-ip", "key"},
      {"rate: 100pps\n    burst: 10\n", "rate: 100pps\n    burst: 10\n    algorithm: gcra\n",
       "algorithm"},
      {"rate: 100pps\n    burst: 10\n", "rate: 1Mbit\n    burst: 1500\n", "rate"},
  };
  for (const Case& c : cases) {
    std::string text = kBase;
    text.replace(text.find(c.from), std::string(c.from).size(), c.to);
    RulesDiff d = diff_rules(load(kBase), load(text));
    const RuleChange& a = find(d, "a");
    EXPECT_EQ(a.kind, RuleChangeKind::changed) << c.to;
    EXPECT_FALSE(a.keeps_state) << c.to;
    EXPECT_NE(std::find(a.fields.begin(), a.fields.end(), c.field), a.fields.end()) << c.to;
  }
}

TEST(RulesDiff, AddRemoveRenameAndOrder) {
  const char* next = R"(default: {action: drop}
rules:
  - name: c
    key: none
    rate: 5pps
    burst: 5
  - name: b2
    key: none
    rate: 1Mbit
    burst: 1500
  - name: a
    match: {proto: udp}
    key: src-ip
    rate: 100pps
    burst: 10
)";
  RulesDiff d = diff_rules(load(kBase), load(next));
  EXPECT_TRUE(d.default_changed);
  ASSERT_EQ(d.rules.size(), 4u);
  EXPECT_EQ(d.rules[0].name, "c");
  EXPECT_EQ(d.rules[1].name, "b2");
  EXPECT_EQ(d.rules[1].kind, RuleChangeKind::added);
  EXPECT_FALSE(d.rules[1].keeps_state);
  EXPECT_EQ(d.rules[3].name, "b");
  EXPECT_EQ(d.rules[3].kind, RuleChangeKind::removed);
  // a and c swapped places among the rules both sets have.
  EXPECT_EQ(find(d, "a").fields, std::vector<std::string>{"position"});
  EXPECT_TRUE(find(d, "a").keeps_state);
  EXPECT_EQ(find(d, "c").fields, std::vector<std::string>{"position"});
  EXPECT_EQ(format_rules_diff(d),
            "~ default: action\n"
            "~ c: position (buckets kept)\n"
            "+ b2 (added)\n"
            "~ a: position (buckets kept)\n"
            "- b (removed)\n"
            "3 rules: 1 added, 2 changed, 1 removed, 0 unchanged\n");
}

TEST(RulesDiff, InsertingARuleDoesNotMoveTheOthers) {
  std::string text = kBase;
  text.replace(text.find("  - name: b"), 0,
               "  - name: new\n    key: none\n    rate: 1pps\n    burst: 1\n");
  RulesDiff d = diff_rules(load(kBase), load(text));
  EXPECT_EQ(d.count(RuleChangeKind::added), 1u);
  EXPECT_EQ(d.count(RuleChangeKind::unchanged), 3u);
}

}  // namespace
}  // namespace sluice
