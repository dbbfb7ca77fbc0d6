#include "control_protocol.hpp"

#include <algorithm>

namespace sluice::control {

std::string ok_reply(std::string_view body) {
  std::string out = "ok\n";
  out += body;
  return out;
}

std::string error_reply(std::string_view message) {
  std::string out = "error ";
  // One line: a message never carries the reply past its first newline.
  for (char c : message) out += c == '\n' ? ' ' : c;
  out += '\n';
  return out;
}

Result<std::string> read_reply(std::string_view reply) {
  if (reply.substr(0, 3) == "ok\n") return std::string(reply.substr(3));
  if (reply.substr(0, 6) == "error ") {
    std::string_view message = reply.substr(6);
    if (const size_t nl = message.find('\n'); nl != std::string_view::npos)
      message = message.substr(0, nl);
    return make_error(std::string(message));
  }
  if (reply.empty()) return make_error("the server closed the connection without a reply");
  return make_error("not a sluiced control reply (it starts with \"" +
                    std::string(reply.substr(0, std::min<size_t>(reply.size(), 20))) + "\")");
}

}  // namespace sluice::control
