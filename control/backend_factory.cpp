#include "backend_factory.hpp"

#include "socket_backend.hpp"
#ifdef SLUICE_HAVE_XDP
#include "xdp_ctl_backend.hpp"
#endif

namespace sluice::ctl {

Result<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice) {
#ifdef SLUICE_HAVE_XDP
  if (!choice.xdp_iface.empty()) return XdpCtlBackend::open(choice.xdp_iface);
#else
  if (!choice.xdp_iface.empty())
    return Result<std::unique_ptr<Backend>>(
        invalid_input("--xdp " + choice.xdp_iface + ": the XDP backend is not available in this build"));
#endif
  return std::unique_ptr<Backend>(std::make_unique<SocketBackend>(choice.socket_path));
}

}  // namespace sluice::ctl
