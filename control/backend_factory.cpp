#include "backend_factory.hpp"

#include "socket_backend.hpp"

namespace sluice::ctl {

Answer<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice) {
  if (!choice.xdp_iface.empty())
    return Answer<std::unique_ptr<Backend>>(
        make_error("--xdp " + choice.xdp_iface + ": the XDP backend is not available in this build"),
        Failure::usage);
  return std::unique_ptr<Backend>(std::make_unique<SocketBackend>(choice.socket_path));
}

}  // namespace sluice::ctl
