#include "xdp_backend.hpp"

#include <net/if.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../dataplane/abi/sluice_abi.h"

namespace sluice::xdp {
namespace {

constexpr long kBpfFsMagic = 0xcafe4a11;  // BPF_FS_MAGIC (linux/magic.h)

Error os_error(const std::string& what) { return make_error(what + ": " + std::strerror(errno)); }

// /sys/fs/bpf as a bpf filesystem (mounted if it is not), then SL_XDP_PIN_ROOT.
Status ensure_pin_root() {
  struct statfs fs {};
  if (statfs("/sys/fs/bpf", &fs) != 0) return os_error("/sys/fs/bpf");
  if (fs.f_type != kBpfFsMagic && mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0)
    return os_error("mounting the bpf filesystem on /sys/fs/bpf");
  if (mkdir(SL_XDP_PIN_ROOT, 0700) != 0 && errno != EEXIST) return os_error(SL_XDP_PIN_ROOT);
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<XdpBackend>> XdpBackend::attach(const std::string& iface, AttachMode mode,
                                                       const RuleSet& rules) {
  const int ifindex = int(if_nametoindex(iface.c_str()));
  if (ifindex == 0) return make_error("no such interface: " + iface);
  if (Status s = ensure_pin_root(); !s) return s.error();
  const std::string dir = std::string(SL_XDP_PIN_ROOT) + "/" + iface;
  if (mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) return make_error(dir + " exists: sluice is already attached to " + iface);
    return os_error(dir);
  }
  auto fail = [&](const Error& e) -> Result<std::unique_ptr<XdpBackend>> {
    rmdir(dir.c_str());
    return e;
  };
  auto prog = XdpProgram::load(LoadOptions{});
  if (!prog) return fail(prog.error());
  if (Status s = (*prog)->set_rules(rules); !s) return fail(s.error());
  if (Status s = (*prog)->pin_maps(dir); !s) return fail(s.error());
  if (Status s = (*prog)->attach(ifindex, mode); !s) {
    (*prog)->unpin_maps(dir);
    return fail(s.error());
  }
  return std::unique_ptr<XdpBackend>(new XdpBackend(std::move(*prog), dir));
}

XdpBackend::~XdpBackend() { (void)detach(); }

Status XdpBackend::detach() {
  if (pin_dir_.empty()) return Ok{};
  Status s = prog_->detach();
  prog_->unpin_maps(pin_dir_);
  if (rmdir(pin_dir_.c_str()) != 0 && s.ok()) s = os_error(pin_dir_);
  pin_dir_.clear();
  return s;
}

}  // namespace sluice::xdp
