// The control socket's protocol (`sluiced --control SOCK`, `sluicectl --socket SOCK`), written
// down once for both ends. A Unix stream socket; per connection, one request and one reply,
// then the server closes.
//
//   request: a command word (and its arguments, space-separated), then '\n'; at most
//            kMaxRequestBytes in all
//   reply:   "ok\n" and the body, or "error MESSAGE\n"
//
//   stats    body: the counters, encode_counters() (counters_wire.hpp)
//   rules    body: the running rules as a rules file (dump_rules_yaml), which load back
//
// Text both ways, so `printf 'stats\n' | socat - UNIX-CONNECT:SOCK` works for a person too.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "result.hpp"

namespace sluice::control {

constexpr size_t kMaxRequestBytes = 1024;
constexpr std::string_view kStats = "stats";
constexpr std::string_view kRules = "rules";

std::string ok_reply(std::string_view body);
std::string error_reply(std::string_view message);

// The body of an "ok" reply; the server's message (or what is wrong with the reply) as the
// error otherwise.
Result<std::string> read_reply(std::string_view reply);

}  // namespace sluice::control
