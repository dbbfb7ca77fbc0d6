// Which backend sluicectl talks to, from its global options: a sluiced control socket, or
// (later) the XDP backend's pinned maps. The one place that knows the implementations.
#pragma once

#include <memory>
#include <string>

#include "backend.hpp"

namespace sluice::ctl {

// Where sluicectl looks for sluiced without --socket.
constexpr const char* kDefaultSocket = "/run/sluice/sluiced.sock";

struct BackendChoice {
  std::string socket_path = kDefaultSocket;
  std::string xdp_iface;  // non-empty: the XDP backend on this interface
};

Result<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice);

}  // namespace sluice::ctl
