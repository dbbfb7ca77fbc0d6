// What the control socket does with each request, apart from sockets (control_service.hpp,
// rule_edits.hpp): rule add/set/del and config load/diff build the next rule set through the
// rules loader and apply it to a RulesTarget over a real core Pipeline; every refused request
// (bad rules with file:line, a stale generation, a read-only server) changes nothing.
#include <gtest/gtest.h>

#include "control_messages.hpp"
#include "control_service.hpp"
#include "pipeline.hpp"
#include "pipeline_rules_target.hpp"
#include "scripted_rules_target.hpp"
#include "rule_edits.hpp"
#include "rules_loader.hpp"

using namespace sluice;
using nlohmann::json;

namespace {

constexpr const char* kRules = R"(default: {action: pass}
rules:
  - name: tenant
    match: {src: 10.1.0.0/16}
    key: none
    rate: 1Gbit
    burst: 256KiB
    action: drop
  - name: dns
    match: {proto: udp, dst-port: 53}
    key: src-ip
    rate: 1000pps
    burst: 50
    action: drop
)";

RuleSet rules() {
  auto r = load_rules_text(kRules, "rules.yaml");
  EXPECT_TRUE(r) << r.error().message;
  return r ? *r : RuleSet{};
}

std::vector<std::string> names(const RuleSet& s) {
  std::vector<std::string> out;
  for (const Rule& r : s.rules) out.push_back(r.name);
  return out;
}

TEST(RuleEdits, AddTakesOneRuleAListOrARulesFileAndItsParentMayBeARunningRule) {
  auto one = add_rules(rules(), "name: web\nmatch: {proto: tcp, dst-port: 80}\nkey: src-ip\n"
                                "rate: 10Mbit\nburst: 64KiB\naction: drop\nparent: tenant\n",
                       "web.yaml", "");
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(names(*one), (std::vector<std::string>{"tenant", "dns", "web"}));
  EXPECT_EQ(one->rules[2].parent, "tenant");
  EXPECT_EQ(one->rules[2].parent_index, 0);

  auto list = add_rules(rules(), "# two rules\n- {name: a, key: none, rate: 1kpps, burst: 5}\n"
                                 "- {name: b, key: none, rate: 1kpps, burst: 5}\n",
                        "l.yaml", "dns");
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(names(*list), (std::vector<std::string>{"tenant", "a", "b", "dns"}));

  auto file = add_rules(rules(), "rules:\n    - name: c\n      key: none\n      rate: 1kpps\n"
                                 "      burst: 5\n      parent: tenant\n",
                        "f.yaml", "tenant");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(names(*file), (std::vector<std::string>{"c", "tenant", "dns"}));
  EXPECT_EQ(file->rules[0].parent_index, 1) << "parents are resolved again after the move";
}

TEST(RuleEdits, AddErrorsCarryTheClientsFileAndLine) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"name: x\nkey: none\nrate: fast\nburst: 5\n", "x.yaml:3:"},
      {"# c\n\n- {name: x, key: none, rate: 1kpps, burst: 5}\n- {name: dns, key: none, rate: 1kpps, burst: 5}\n",
       "x.yaml:4:"},  // a duplicate of a running rule, on the client's line
      {"rules:\n  - {name: x, key: none, rate: 1kpps, burst: 5, parent: nope}\n", "x.yaml:2:"},
      {"default: {action: drop}\nrules:\n  - {name: x, key: none, rate: 1kpps, burst: 5}\n",
       "x.yaml:1: rule add takes only rules"},
      {"rules: []\n", "x.yaml:1: write the rules as a block list"},
      {"# nothing\n", "x.yaml: no rule to add"},
      {"name: x\n  bad indent: [\n", "x.yaml:"},
  };
  const RuleSet before = rules();
  for (const auto& c : cases) {
    auto r = add_rules(before, c.text, "x.yaml", "");
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << c.text << "\n" << r.error().message;
  }
  auto no_before = add_rules(before, "name: x\nkey: none\nrate: 1kpps\nburst: 5\n", "x.yaml", "zzz");
  ASSERT_FALSE(no_before);
  EXPECT_NE(no_before.error().message.find("--before \"zzz\": no rule"), std::string::npos);
}

TEST(RuleEdits, SetChangesFieldsAndRefusesWhatTheLoaderRefuses) {
  auto set = set_rule_fields(rules(), "dns", {{"rate", "2000pps"}, {"burst", "100"}});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->rules[1].rate.tokens_per_sec(), 2000.0);
  EXPECT_EQ(set->rules[1].burst, 100u);
  const RulesDiff d = diff_rules(rules(), *set);
  EXPECT_EQ(format_rules_diff(d), "~ dns: rate, burst (buckets kept)\n2 rules: 0 added, 1 changed, 0 removed, 1 unchanged\n");

  auto parent = set_rule_fields(rules(), "dns", {{"parent", "tenant"}});
  ASSERT_TRUE(parent) << parent.error().message;
  EXPECT_EQ(parent->rules[1].parent_index, 0);
  auto unset = set_rule_fields(*parent, "dns", {{"parent", std::nullopt}});
  ASSERT_TRUE(unset) << unset.error().message;
  EXPECT_TRUE(unset->rules[1].parent.empty());

  const struct {
    std::map<std::string, std::optional<std::string>> fields;
    const char* says;
  } cases[] = {
      {{{"rate", "fast"}}, "rule set dns: "},
      {{{"rate", "0pps"}}, "rule set dns: "},
      {{{"colour", "red"}}, "rule set dns: "},
      {{{"name", "other"}}, "rename it with rule del and rule add"},
      {{{"rate", "1kpps\nkey: none"}}, "one line of 1 to 4096 printable characters"},
      {{{"Rate!", "1"}}, "not a rules-file field"},
      {{{"parent", "dns"}}, "rule set dns: "},
      {{{"burst", std::nullopt}}, "rule set dns: "},  // burst is required
  };
  for (const auto& c : cases) {
    auto r = set_rule_fields(rules(), "dns", c.fields);
    ASSERT_FALSE(r) << c.says;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
  auto missing = set_rule_fields(rules(), "nope", {{"rate", "1kpps"}});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no rule of that name"), std::string::npos);
}

TEST(RuleEdits, DeleteRefusesAParentStillNamed) {
  auto child = add_rules(rules(), "name: c\nkey: none\nrate: 1kpps\nburst: 5\nparent: tenant\n", "c", "");
  ASSERT_TRUE(child) << child.error().message;
  auto refused = delete_rule(*child, "tenant");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("rule \"c\" names it as its parent"), std::string::npos)
      << refused.error().message;
  auto gone = delete_rule(*child, "dns");
  ASSERT_TRUE(gone) << gone.error().message;
  EXPECT_EQ(names(*gone), (std::vector<std::string>{"tenant", "c"}));
  EXPECT_EQ(gone->rules[1].parent_index, 0);
  EXPECT_FALSE(delete_rule(*child, "nope"));
}

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = test::ScriptedRulesTarget::create(rules());
    ASSERT_TRUE(target_);
    service_ = std::make_unique<ControlService>(target_.get(), RuleSet{});
  }
  json ask(const json& request) {
    auto reply = wire::decode_reply(service_->handle(request.dump()));
    EXPECT_TRUE(reply) << reply.error().message;
    return reply ? json{{"ok", reply->ok},
                        {"result", reply->result},
                        {"kind", wire::error_kind_name(reply->error.kind)},
                        {"message", reply->error.message},
                        {"id", reply->id}}
                 : json{};
  }
  static json req(const char* op, json fields = json::object()) {
    fields["version"] = 2;
    fields["id"] = 11;
    fields["op"] = op;
    return fields;
  }
  std::unique_ptr<test::ScriptedRulesTarget> target_;
  std::unique_ptr<ControlService> service_;
};

TEST_F(Service, WritesApplyTheNextSetAndReplyWithTheDiffAndGeneration) {
  json r = ask(req("rule.set", {{"name", "dns"}, {"fields", {{"rate", "5kpps"}}}}));
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["id"], 11);
  EXPECT_EQ(r["result"]["generation"], 2);
  EXPECT_EQ(target_->rules().rules[1].rate.tokens_per_sec(), 5000.0);
  auto diff = wire::diff_from_json(r["result"]["diff"]);
  ASSERT_TRUE(diff);
  EXPECT_EQ(format_rules_diff(*diff).substr(0, 30), "~ dns: rate (buckets kept)\n2 r");

  r = ask(req("rule.add", {{"text", "name: x\nkey: none\nrate: 1kpps\nburst: 5\n"}, {"filename", "x.yaml"}}));
  ASSERT_TRUE(r["ok"]) << r;
  r = ask(req("rule.del", {{"name", "x"}, {"expect_generation", 3}}));
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(target_->generation(), 4u);
  r = ask(req("config.load", {{"text", "rules:\n  - {name: only, key: src-ip, rate: 1kpps, burst: 5}\n"}}));
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(names(target_->rules()), std::vector<std::string>{"only"});
  EXPECT_EQ(target_->applies(), 5);
}

TEST_F(Service, RefusedWritesChangeNothing) {
  const std::string before = dump_rules_yaml(target_->rules());
  const struct {
    json request;
    const char* kind;
    const char* says;
  } cases[] = {
      {req("rule.set", {{"name", "dns"}, {"fields", {{"rate", "5kpps"}}}, {"expect_generation", 7}}),
       "conflict", "rules changed since generation 7 (now 1)"},
      {req("config.load", {{"text", "rules:\n  - {name: a, rate: x}\n"}, {"filename", "new.yaml"}}),
       "invalid", "new.yaml:2"},
      {req("config.load", {{"text", ","}, {"filename", "comma.yaml"}}), "invalid", "comma.yaml"},
      {req("rule.add", {{"text", "name: dns\nkey: none\nrate: 1kpps\nburst: 5\n"}, {"filename", "d.yaml"}}),
       "invalid", "d.yaml:1"},
      {req("rule.del", {{"name", "ghost"}}), "invalid", "no rule of that name"},
      {req("rule.set", {{"name", "dns"}, {"fields", {{"algorithm", "srtcm"}}}}), "invalid", "rule set dns"},
      {req("rule.del", {{"name", "dns"}, {"bogus", 1}}), "usage", "unknown field \"bogus\""},
  };
  for (const auto& c : cases) {
    json r = ask(c.request);
    EXPECT_FALSE(r["ok"]) << c.request;
    EXPECT_EQ(r["kind"], c.kind) << r;
    EXPECT_NE(r["message"].get<std::string>().find(c.says), std::string::npos) << r;
  }
  EXPECT_EQ(dump_rules_yaml(target_->rules()), before);
  EXPECT_EQ(target_->generation(), 1u);
  EXPECT_EQ(target_->applies(), 1);  // the set it was created with
}

TEST_F(Service, ConfigDiffSaysWhatALoadWouldDoWithoutDoingIt) {
  json r = ask(req("config.diff", {{"text", std::string(kRules) + "  - {name: extra, key: none, rate: 1kpps, burst: 5}\n"}}));
  ASSERT_TRUE(r["ok"]) << r;
  auto diff = wire::diff_from_json(r["result"]["diff"]);
  ASSERT_TRUE(diff);
  EXPECT_EQ(format_rules_diff(*diff), "+ extra (added)\n3 rules: 1 added, 0 changed, 0 removed, 2 unchanged\n");
  EXPECT_EQ(target_->generation(), 1u);
}

// config.diff against a real pipeline that cannot run what it is asked about (a max-delay
// beyond its shaping horizon, flow tables beyond the memory it may take): the same refusal,
// kind and words as the config.load it stands in for, and neither changes anything.
TEST(ServiceOverAPipeline, ConfigDiffRefusesWhatConfigLoadWouldRefuse) {
  PipelineOptions opts = PipelineOptions::single_threaded(1);
  opts.shaping_horizon_ns = 2'000'000'000;
  uint64_t available = uint64_t{16} << 20;
  opts.memory_available = [&available] { return std::optional<uint64_t>(available); };
  auto pipeline = Pipeline::create(rules(), opts);
  ASSERT_TRUE(pipeline) << pipeline.error().message;
  PipelineRulesTarget target(**pipeline, [] { return uint64_t{1'000'000}; });
  ControlService service(&target, RuleSet{});
  auto ask = [&](const char* op, const std::string& text) {
    json q{{"version", 2}, {"id", 5}, {"op", op}, {"text", text}, {"filename", "next.yaml"}};
    auto reply = wire::decode_reply(service.handle(q.dump()));
    EXPECT_TRUE(reply) << reply.error().message;
    return *reply;
  };
  const std::string shaper = std::string(kRules) +
                             "  - {name: shape, key: none, rate: 1kpps, burst: 10, "
                             "algorithm: leaky-bucket, max-delay: 3s}\n";
  // 1M flows of one word: ~32 MiB of table, twice what this pipeline may take.
  const std::string big = std::string(kRules) +
                          "  - {name: big, match: {proto: tcp}, key: src-ip, rate: 1kpps, "
                          "burst: 10, max-flows: 1000000}\n";
  for (const auto& [text, says] : {std::pair{shaper, std::string("beyond the shaping horizon of 2s")},
                                   std::pair{big, std::string("flow tables need")}}) {
    const auto diff = ask("config.diff", text);
    const auto load = ask("config.load", text);
    ASSERT_FALSE(diff.ok) << says;
    ASSERT_FALSE(load.ok) << says;
    EXPECT_EQ(diff.error.kind, load.error.kind) << says;
    EXPECT_EQ(diff.error.kind, wire::ErrorKind::runtime) << says;
    EXPECT_EQ(diff.error.message, load.error.message);
    EXPECT_NE(diff.error.message.find(says), std::string::npos) << diff.error.message;
  }
  EXPECT_EQ((*pipeline)->generation(), 0u) << "nothing was applied";
  // With the memory there, the same file's diff lists the rule, and its load applies.
  available = uint64_t{1} << 30;
  const auto diff = ask("config.diff", big);
  ASSERT_TRUE(diff.ok) << diff.error.message;
  EXPECT_NE(diff.result.dump().find("big"), std::string::npos) << diff.result;
  EXPECT_TRUE(ask("config.load", big).ok);
  EXPECT_EQ((*pipeline)->generation(), 1u);
}

TEST_F(Service, ReadsHelloAndFlows) {
  json hello = ask(req("hello"));
  ASSERT_TRUE(hello["ok"]);
  EXPECT_TRUE(hello["result"]["writable"]);
  EXPECT_EQ(hello["result"]["protocol"], 2);
  json stats = ask(req("stats"));
  EXPECT_FALSE(stats["ok"]);
  EXPECT_NE(stats["message"].get<std::string>().find("not set up yet"), std::string::npos);
  target_->add_flow({"dns", "192.0.2.1", 10, 8000});
  target_->add_flow({"dns", "192.0.2.2", 30, 1000});
  json top = ask(req("flows.top", {{"count", 1}, {"by", "bps"}}));
  ASSERT_TRUE(top["ok"]) << top;
  ASSERT_EQ(top["result"]["flows"].size(), 1u);
  EXPECT_EQ(top["result"]["flows"][0]["key"], "192.0.2.1");
}

// As sluiced serves its socket while its dataplane starts: writes and flows are refused as
// "try again", the rules it was started with are answered.
TEST(ReadOnlyService, RefusesWritesWhileStartingAndAnswersItsRules) {
  ControlService service(nullptr, rules());
  auto reply = wire::decode_reply(service.handle(
      R"({"version":2,"id":1,"op":"rule.del","name":"dns"})"));
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->ok);
  EXPECT_EQ(reply->error.kind, wire::ErrorKind::runtime);
  EXPECT_EQ(reply->error.message,
            "rule.del: sluiced is still starting (its dataplane is not up yet): try again in a "
            "moment");
  auto top = wire::decode_reply(service.handle(R"({"version":2,"id":3,"op":"flows.top","count":3})"));
  ASSERT_TRUE(top);
  EXPECT_FALSE(top->ok);
  EXPECT_NE(top->error.message.find("flows.top: sluiced is still starting"), std::string::npos)
      << top->error.message;
  auto r = wire::decode_reply(service.handle(R"({"version":2,"id":2,"op":"rules"})"));
  ASSERT_TRUE(r && r->ok);
  auto back = load_rules_text(r->result.at("rules").get<std::string>(), "x");
  ASSERT_TRUE(back);
  EXPECT_EQ(names(*back), (std::vector<std::string>{"tenant", "dns"}));
}

}  // namespace
