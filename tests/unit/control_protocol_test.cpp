// The control protocol v2's codecs (docs/CONTROL.md): framing however the bytes arrive, and
// every malformed request refused with the error it deserves (SPEC §6: a malformed control
// request gets a clear error and changes nothing).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "control_frame.hpp"
#include "control_messages.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

using sluice::wire::ErrorKind;  // the protocol's, not result.hpp's

TEST(ControlFrame, ABodyComesBackWhateverTheChunksAndFramesFollowEachOther) {
  const std::string two = encode_frame("{\"a\":1}") + encode_frame("[2]");
  EXPECT_EQ(two, "7\n{\"a\":1}3\n[2]");
  for (size_t chunk = 1; chunk <= two.size(); ++chunk) {
    FrameReader r;
    std::vector<std::string> got;
    for (size_t at = 0; at < two.size(); at += chunk) {
      r.feed(std::string_view(two).substr(at, chunk));
      while (auto body = r.next()) got.push_back(*body);
    }
    ASSERT_EQ(got.size(), 2u) << "chunk " << chunk;
    EXPECT_EQ(got[0], "{\"a\":1}");
    EXPECT_EQ(got[1], "[2]");
    EXPECT_TRUE(r.error().empty());
    EXPECT_EQ(r.pending_bytes(), 0u);
  }
}

TEST(ControlFrame, MalformedHeadersAreErrorsAndNothingIsReadAfterThem) {
  const struct {
    std::string bytes;
    const char* says;
  } cases[] = {
      {"x\n{}", "starts with its length in decimal"},
      {"-5\n{}", "starts with its length in decimal"},
      {" 5\n", "starts with its length in decimal"},
      {"5 \n", "starts with its length in decimal"},
      {"0x10\n", "starts with its length in decimal"},
      {"\n{}", "empty length header"},
      {"0\n", "a message of 0 bytes"},
      {"16777217\n", "over the limit of 16777216 bytes"},
      {"100000000\n", "more than 8 digits"},  // 100 MB: refused from its header alone
      {"123456789", "more than 8 digits"},    // no newline needed to know
      {std::string("\x00\x01\xff", 3), "got byte 0"},
      {"GET / HTTP/1.1\r\n", "starts with its length"},
  };
  for (const auto& c : cases) {
    FrameReader r;
    r.feed(c.bytes);
    EXPECT_FALSE(r.next());
    EXPECT_NE(r.error().find(c.says), std::string::npos) << c.bytes << ": " << r.error();
    r.feed("2\n{}");
    EXPECT_FALSE(r.next()) << "no frame after an error";
    EXPECT_EQ(r.pending_bytes(), 0u);
  }
}

TEST(ControlFrame, ATruncatedFrameIsNeverAFrame) {
  FrameReader r;
  r.feed("10\n{\"ve");
  EXPECT_FALSE(r.next());
  EXPECT_TRUE(r.error().empty());
  EXPECT_EQ(r.announced().value_or(0), 10u);
  EXPECT_EQ(r.pending_bytes(), 4u);
  FrameReader digits_only;
  digits_only.feed("12");
  EXPECT_FALSE(digits_only.next());
  EXPECT_FALSE(digits_only.announced());
}

TEST(ControlFrame, TheLimitIsTheReadersOwn) {
  FrameReader r(100);
  r.feed("101\n");
  EXPECT_NE(r.error().find("over the limit of 100 bytes"), std::string::npos) << r.error();
  FrameReader ok(100);
  ok.feed("100\n" + std::string(100, ' '));
  EXPECT_TRUE(ok.next());
}

ErrorReply refused(std::string_view body) {
  auto d = decode_request(body);
  EXPECT_TRUE(std::holds_alternative<ErrorReply>(d)) << body;
  if (auto* e = std::get_if<ErrorReply>(&d)) return *e;
  return {};
}

Request accepted(std::string_view body) {
  auto d = decode_request(body);
  if (auto* e = std::get_if<ErrorReply>(&d)) ADD_FAILURE() << body << ": " << e->message;
  if (auto* r = std::get_if<Request>(&d)) return *r;
  return {};
}

TEST(ControlMessages, EveryMalformedRequestIsAUsageErrorThatNamesTheProblem) {
  const struct {
    std::string body;
    const char* says;
    uint64_t id;
  } cases[] = {
      {"{", "not a JSON document", 0},
      {"{\"version\":2,\"id\":1,\"op\":\"stats\"", "not a JSON document", 0},
      {"\xff\xfe", "not a JSON document", 0},
      {"[1,2]", "a JSON object, not array", 0},
      {"\"stats\"", "a JSON object, not string", 0},
      {"{\"version\":2,\"op\":\"stats\"}", "missing field \"id\"", 0},
      {"{\"version\":2,\"id\":-1,\"op\":\"stats\"}", "\"id\" must be an unsigned integer", 0},
      {"{\"version\":2,\"id\":1.5,\"op\":\"stats\"}", "\"id\" must be an unsigned integer", 0},
      {"{\"version\":2,\"id\":\"7\",\"op\":\"stats\"}", "\"id\" must be an unsigned integer, not string", 0},
      {"{\"id\":7,\"op\":\"stats\"}", "missing field \"version\"", 7},
      {"{\"version\":1,\"id\":7,\"op\":\"stats\"}", "protocol version 1 is not supported", 7},
      {"{\"version\":3,\"id\":7,\"op\":\"stats\"}", "protocol version 3 is not supported", 7},
      {"{\"version\":\"2\",\"id\":7,\"op\":\"stats\"}", "\"version\" must be an unsigned integer", 7},
      {"{\"version\":2,\"id\":7}", "missing field \"op\"", 7},
      {"{\"version\":2,\"id\":7,\"op\":5}", "\"op\" must be a string, not number", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"reboot\"}", "unknown op \"reboot\" (known: hello, stats", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"stats\",\"json\":true}", "unknown field \"json\" for op stats", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"rule.del\"}", "missing field \"name\"", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"rule.del\",\"name\":3}", "\"name\" must be a string, not number", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"rule.del\",\"name\":\"a\",\"text\":\"x\"}", "unknown field \"text\" for op rule.del", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"config.load\"}", "missing field \"text\"", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"config.load\",\"text\":[]}", "\"text\" must be a string, not array", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"config.load\",\"text\":\"\",\"expect_generation\":-2}", "\"expect_generation\" must be an unsigned integer", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"config.diff\",\"text\":\"\",\"expect_generation\":2}", "unknown field \"expect_generation\" for op config.diff", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"rule.set\",\"name\":\"a\"}", "missing field \"fields\"", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"rule.set\",\"name\":\"a\",\"fields\":{}}", "at least one", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"rule.set\",\"name\":\"a\",\"fields\":[\"rate\"]}", "must be an object", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"rule.set\",\"name\":\"a\",\"fields\":{\"rate\":1000}}", "fields.\"rate\" must be a string", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"flows.top\"}", "missing field \"count\"", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"flows.top\",\"count\":0}", "\"count\" must be 1 to 10000", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"flows.top\",\"count\":10001}", "\"count\" must be 1 to 10000", 7},
      {"{\"version\":2,\"id\":7,\"op\":\"flows.top\",\"count\":3,\"by\":\"size\"}", "\"by\" must be \"pps\" or \"bps\"", 7},
  };
  for (const auto& c : cases) {
    ErrorReply e = refused(c.body);
    EXPECT_EQ(e.kind, ErrorKind::usage) << c.body;
    EXPECT_EQ(e.id, c.id) << c.body;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << ": " << e.message;
  }
}

TEST(ControlMessages, DeepNestingAndHugeNumbersAreErrorsNotCrashes) {
  const std::string deep = "{\"version\":2,\"id\":1,\"op\":\"stats\",\"x\":" +
                           std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(refused(deep).message.find("unknown field \"x\""), std::string::npos);
  EXPECT_EQ(refused(std::string(100000, '[')).message, "not a JSON document");
  EXPECT_NE(refused("{\"version\":2,\"id\":1e400,\"op\":\"stats\"}").message.size(), 0u);
  EXPECT_NE(refused("{\"version\":2,\"id\":99999999999999999999999,\"op\":\"stats\"}")
                .message.find("unsigned integer"),
            std::string::npos);
}

TEST(ControlMessages, EveryRequestRoundTripsThroughItsEncoder) {
  Request add;
  add.id = 9;
  add.op = Op::rule_add;
  add.text = "rules:\n  - name: a\n";
  add.filename = "new.yaml";
  add.before = "b";
  add.expect_generation = 4;
  Request back = accepted(encode_request(add));
  EXPECT_EQ(back.id, 9u);
  EXPECT_EQ(back.op, Op::rule_add);
  EXPECT_EQ(back.text, add.text);
  EXPECT_EQ(back.filename, "new.yaml");
  EXPECT_EQ(back.before, "b");
  EXPECT_EQ(back.expect_generation.value_or(0), 4u);

  Request set;
  set.op = Op::rule_set;
  set.name = "dns";
  set.fields = {{"rate", "2kpps"}, {"parent", std::nullopt}};
  back = accepted(encode_request(set));
  EXPECT_EQ(back.name, "dns");
  EXPECT_EQ(back.fields, set.fields);
  EXPECT_FALSE(back.expect_generation);

  Request top;
  top.op = Op::flows_top;
  top.top.count = 5;
  top.top.rule = "r";
  top.top.by_bytes = true;
  back = accepted(encode_request(top));
  EXPECT_EQ(back.top.count, 5u);
  EXPECT_EQ(back.top.rule, "r");
  EXPECT_TRUE(back.top.by_bytes);

  for (Op op : all_ops()) EXPECT_EQ(op_from_name(op_name(op)), op);
  EXPECT_EQ(accepted("{\"version\":2,\"id\":1,\"op\":\"config.diff\",\"text\":\"x\"}").filename,
            "request");
}

// encode_error writes its text by hand: it must be what dump_json makes of the same document
// (keys sorted, no spaces, control characters escaped, invalid UTF-8 replaced).
TEST(ControlMessages, ErrorRepliesAreWhatNlohmannWrites) {
  const std::string messages[] = {"", "rules changed", "quote \" backslash \\ slash /",
                                  std::string("nul \0 bell \a esc \x1b del \x7f", 24),
                                  "tab\t nl\n cr\r ff\f bs\b", "h\xc3\xa9llo \xe2\x82\xac",
                                  "bad \xff name", "cut \xc3"};
  for (ErrorKind kind : {ErrorKind::usage, ErrorKind::invalid, ErrorKind::conflict,
                         ErrorKind::unsupported, ErrorKind::runtime})
    for (uint64_t id : {uint64_t{0}, uint64_t{42}, UINT64_MAX})
      for (const std::string& m : messages) {
        nlohmann::json doc = {{"version", kProtocolVersion},
                              {"id", id},
                              {"ok", false},
                              {"error", {{"kind", error_kind_name(kind)}, {"message", m}}}};
        EXPECT_EQ(encode_error({id, kind, m}),
                  doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      }
}

TEST(ControlMessages, RepliesDecodeAndMalformedRepliesAreErrors) {
  auto ok = decode_reply(encode_result(3, {{"x", 1}}));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->ok);
  EXPECT_EQ(ok->id, 3u);
  EXPECT_EQ(ok->result.at("x"), 1);
  auto err = decode_reply(encode_error({4, ErrorKind::conflict, "rules changed"}));
  ASSERT_TRUE(err);
  EXPECT_FALSE(err->ok);
  EXPECT_EQ(err->error.kind, ErrorKind::conflict);
  EXPECT_EQ(err->error.message, "rules changed");
  // Invalid UTF-8 in a message is replaced, never thrown.
  EXPECT_TRUE(decode_reply(encode_error({4, ErrorKind::invalid, "bad \xff name"})));
  for (const char* bad : {"", "{}", "[]", "{\"version\":1,\"id\":1,\"ok\":true,\"result\":{}}",
                          "{\"version\":2,\"id\":1,\"ok\":true}",
                          "{\"version\":2,\"id\":1,\"ok\":false,\"error\":{}}",
                          "{\"version\":2,\"id\":1,\"ok\":\"yes\",\"result\":{}}"})
    EXPECT_FALSE(decode_reply(bad)) << bad;
}

TEST(ControlMessages, ADiffRoundTrips) {
  RulesDiff d;
  d.default_changed = true;
  d.rules = {{"a", RuleChangeKind::added, {}, false},
             {"b", RuleChangeKind::changed, {"rate", "burst"}, true},
             {"c", RuleChangeKind::removed, {}, false}};
  auto back = diff_from_json(diff_to_json(d));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(format_rules_diff(*back), format_rules_diff(d));
  EXPECT_FALSE(diff_from_json(nlohmann::json::parse("{\"rules\":[{\"name\":1}],\"default_changed\":false}")));
}

// One rule changed among thousands: the reply names that rule and counts the rest, so its
// size does not grow with the rule set (it listed every rule, ~72 bytes each, before).
TEST(ControlMessages, AReplyListsOnlyTheRulesThatChange) {
  RulesDiff d;
  for (int i = 0; i < 10000; ++i)
    d.rules.push_back({"r" + std::to_string(i), RuleChangeKind::unchanged, {}, true});
  d.rules[5000] = {"r5000", RuleChangeKind::changed, {"rate"}, true};
  const std::string reply = encode_diff_result(1, d, 2, 40);
  EXPECT_LT(reply.size(), 256u) << reply;
  EXPECT_NE(reply.find("\"unchanged\":9999"), std::string::npos) << reply;
  auto decoded = decode_reply(reply);
  ASSERT_TRUE(decoded) << decoded.error().message;
  auto back = diff_from_json(decoded->result["diff"]);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->rules.size(), 1u);
  EXPECT_EQ(back->rules[0].name, "r5000");
  EXPECT_EQ(format_rules_diff(*back),
            "~ r5000: rate (buckets kept)\n10000 rules: 0 added, 1 changed, 0 removed, 9999 unchanged\n");
  // A diff that also lists unchanged rules (a sluiced that listed every rule, or a future
  // one) counts each once; a count that is not a number is refused.
  auto listed = nlohmann::json::parse(
      R"({"rules":[{"name":"a","kind":"unchanged","fields":[],"keeps_state":true}],)"
      R"("default_changed":false,"unchanged":3})");
  auto both = diff_from_json(listed);
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->count(RuleChangeKind::unchanged), 3u);
  listed["unchanged"] = -1;
  EXPECT_FALSE(diff_from_json(listed));
  listed["unchanged"] = "3";
  EXPECT_FALSE(diff_from_json(listed));
}

// A write's reply is written straight from the diff (encode_diff_result); it must be the very
// text the generic path writes, whatever the names hold (quotes, control bytes, UTF-8, bytes
// that are no UTF-8) and however many rules and fields there are.
TEST(ControlMessages, ADiffReplyIsTheTextTheGenericEncoderWrites) {
  for (bool default_changed : {false, true}) {
    RulesDiff d;
    d.default_changed = default_changed;
    EXPECT_EQ(encode_diff_result(7, d, 0), encode_result(7, {{"diff", diff_to_json(d)}, {"generation", 0}}));
    d.rules = {{"a", RuleChangeKind::added, {}, false},
               {"b\"q\\s/\x01\x1f\x7f\t\n", RuleChangeKind::changed, {"rate", "burst", "position"}, true},
               {"caf\xc3\xa9", RuleChangeKind::unchanged, {}, true},
               {"bad\xff\xfe", RuleChangeKind::removed, {}, false},
               {"", RuleChangeKind::changed, {"match"}, false}};
    for (int i = 0; i < 1000; ++i)
      d.rules.push_back({"r" + std::to_string(i), RuleChangeKind::changed, {"rate"}, true});
    const std::string fast = encode_diff_result(18446744073709551615ull, d, 12345);
    EXPECT_EQ(fast, encode_result(18446744073709551615ull,
                                  {{"diff", diff_to_json(d)}, {"generation", 12345}}));
    auto reply = decode_reply(fast);
    ASSERT_TRUE(reply) << reply.error().message;
    auto back = diff_from_json(reply->result["diff"]);
    ASSERT_TRUE(back) << back.error().message;
    // Every rule but the unchanged one is listed; that one is counted.
    EXPECT_EQ(back->rules.size(), d.rules.size() - 1);
    EXPECT_EQ(back->count(RuleChangeKind::unchanged), 1u);
    // With the time the change took to reach every worker (a reply of sluiced's loop).
    for (uint64_t us : {uint64_t{0}, uint64_t{137}, uint64_t{18446744073709551615ull}})
      EXPECT_EQ(encode_diff_result(9, d, 3, us),
                encode_result(9, {{"applied_us", us}, {"diff", diff_to_json(d)}, {"generation", 3}}));
  }
}

// Not a fuzzer (issue 13 adds libFuzzer targets), but every decoder sees random and mutated
// input here on each run: no crash, no exception, and an error or a request each time.
TEST(ControlMessages, RandomAndMutatedInputNeverCrashesADecoder) {
  std::mt19937_64 rng(42);
  const std::string good = encode_request([] {
    Request r;
    r.op = Op::rule_set;
    r.name = "dns";
    r.fields = {{"rate", "2kpps"}};
    r.expect_generation = 3;
    return r;
  }());
  // The characters JSON is made of, inserted at random (not the terminating NUL).
  static constexpr char kJsonChars[] = "{}[]\",:0-e\\u";
  size_t requests = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string body = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % body.size();
      switch (rng() % 3) {
        case 0: body[at] = char(rng()); break;
        case 1: body.erase(at, 1 + rng() % 8); break;
        default: body.insert(at, 1, kJsonChars[rng() % (sizeof kJsonChars - 1)]); break;
      }
      if (body.empty()) body = "x";
    }
    auto d = decode_request(body);
    if (std::holds_alternative<Request>(d)) ++requests;
    else EXPECT_FALSE(std::get<ErrorReply>(d).message.empty());
    (void)decode_reply(body);
    FrameReader r;
    r.feed(std::to_string(body.size()) + "\n" + body);
    auto frame = r.next();
    ASSERT_TRUE(frame);
    EXPECT_EQ(*frame, body);
    FrameReader junk;
    junk.feed(body);
    (void)junk.next();
  }
  EXPECT_LT(requests, 20000u);  // mutations do reach the validation
}

}  // namespace
