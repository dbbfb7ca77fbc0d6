// The control protocol v2's messages (docs/CONTROL.md), for both ends: a request is
//
//   {"version": 2, "id": N, "op": OP, ...the op's fields}
//
// and its reply {"version": 2, "id": N, "ok": true, "result": {...}} or
// {"version": 2, "id": N, "ok": false, "error": {"kind": KIND, "message": "..."}}.
// Each body travels in a frame of control_frame.hpp. The decoders accept exactly what is
// documented: a field that is unknown, missing or of the wrong type is an error naming it,
// and nothing reaches the dataplane. No exception leaves this file.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "result.hpp"
#include "rules_diff.hpp"
#include "rules_target.hpp"

namespace sluice::wire {

constexpr uint64_t kProtocolVersion = 2;

enum class Op { hello, stats, rules, rule_add, rule_set, rule_del, config_load, config_diff, flows_top };

// "rule.add", ...; and back (nullopt for a name that is no op).
const char* op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);
// Ops that change the running rules.
bool is_write(Op op);
const std::vector<Op>& all_ops();

// What a client gets wrong (usage: the request itself; invalid: the rules it carries, with
// file:line; conflict: the rules moved on since the generation it expected), what the server
// cannot do (unsupported: e.g. a read-only sluiced asked to write) or what failed (runtime).
enum class ErrorKind { usage, invalid, conflict, unsupported, runtime };
const char* error_kind_name(ErrorKind kind);

// The most rules `flows.top` returns.
constexpr uint64_t kMaxTopFlows = 10000;

struct Request {
  uint64_t id = 0;
  Op op = Op::hello;
  // rule.add, config.load, config.diff: rules text, and the file it came from (for messages).
  std::string text;
  std::string filename;
  // rule.set, rule.del: the rule; rule.add: insert before this rule ("" = at the end).
  std::string name;
  std::string before;
  // rule.set: rules-file field -> value as in a rules file; nullopt removes the field.
  std::map<std::string, std::optional<std::string>> fields;
  // Writes: refuse unless the running rules are still at this generation.
  std::optional<uint64_t> expect_generation;
  TopFlowsQuery top;  // flows.top
};

struct ErrorReply {
  uint64_t id = 0;
  ErrorKind kind = ErrorKind::usage;
  std::string message;
};

// A request body, validated; or the error reply it deserves (with its id when it had one).
std::variant<Request, ErrorReply> decode_request(std::string_view body);
std::string encode_request(const Request& request);

std::string encode_error(const ErrorReply& error);
std::string encode_result(uint64_t id, nlohmann::json result);
// encode_result(id, {{"diff", diff_to_json(diff)}, {"generation", generation}}) (and
// {"applied_us", *applied_us} when given), the same text, written straight from the diff: a
// write's reply lists every rule of the set (1,000 rules: 1,000 JSON objects built, copied
// and freed for one reply otherwise).
std::string encode_diff_result(uint64_t id, const RulesDiff& diff, uint64_t generation,
                               std::optional<uint64_t> applied_us = std::nullopt);

struct Reply {
  uint64_t id = 0;
  bool ok = false;
  nlohmann::json result;  // ok
  ErrorReply error;       // !ok
};
// Errors: the body is no v2 reply.
Result<Reply> decode_reply(std::string_view body);

// A RulesDiff in a reply's result, and back.
nlohmann::json diff_to_json(const RulesDiff& diff);
Result<RulesDiff> diff_from_json(const nlohmann::json& j);

// JSON text that never throws: invalid UTF-8 (from a rules text, a name) is replaced.
std::string dump_json(const nlohmann::json& j);

}  // namespace sluice::wire
