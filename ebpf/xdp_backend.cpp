#include "xdp_backend.hpp"

#include <net/if.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

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

// DIR, then SL_XDP_PIN_ROOT if that left it empty (another interface's pins keep it: rmdir
// refuses a directory that is not empty, so no check races with another attach).
Status remove_pin_dir(const std::string& dir) {
  if (rmdir(dir.c_str()) != 0) return os_error(dir);
  (void)rmdir(SL_XDP_PIN_ROOT);
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<XdpBackend>> XdpBackend::attach(const std::string& iface, AttachMode mode,
                                                       const RuleSet& rules) {
  const int ifindex = int(if_nametoindex(iface.c_str()));
  if (ifindex == 0) return make_error("no such interface: " + iface);
  const std::string dir = std::string(SL_XDP_PIN_ROOT) + "/" + iface;
  // Twice: another interface's detach may remove the root between its mkdir and ours.
  int made = -1;
  for (int attempt = 0; attempt < 2 && made != 0; ++attempt) {
    if (Status s = ensure_pin_root(); !s) return s.error();
    made = mkdir(dir.c_str(), 0700);
    if (made != 0 && errno != ENOENT) break;
  }
  if (made != 0) {
    if (errno == EEXIST) return make_error(dir + " exists: sluice is already attached to " + iface);
    return os_error(dir);
  }
  auto fail = [&](const Error& e) -> Result<std::unique_ptr<XdpBackend>> {
    (void)remove_pin_dir(dir);
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

Result<std::unique_ptr<XdpBackend>> XdpBackend::open(const std::string& iface) {
  if (if_nametoindex(iface.c_str()) == 0) return make_error("no such interface: " + iface);
  const std::string dir = std::string(SL_XDP_PIN_ROOT) + "/" + iface;
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return make_error("sluice is not attached to " + iface);
  auto prog = XdpProgram::open_pinned(dir);
  if (!prog) return prog.error();
  return std::unique_ptr<XdpBackend>(new XdpBackend(std::move(*prog), dir, iface));
}

// Only sluice's own program: the one attached now must be named as ours.
Status XdpBackend::detach_opened() {
  const int ifindex = int(if_nametoindex(opened_iface_.c_str()));
  if (ifindex == 0) return make_error("no such interface: " + opened_iface_);
  LIBBPF_OPTS(bpf_xdp_query_opts, q);
  if (int err = bpf_xdp_query(ifindex, 0, &q)) {
    errno = -err;
    return os_error("querying the XDP program of " + opened_iface_);
  }
  const bool skb = q.attach_mode == XDP_ATTACHED_SKB;
  const uint32_t id = skb ? q.skb_prog_id : q.drv_prog_id;
  if (id == 0) return Ok{};  // nothing attached: only the pins are left
  const int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return os_error("opening the XDP program of " + opened_iface_);
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  Status s = Ok{};
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || std::strcmp(info.name, "sluice_xdp") != 0) {
    s = make_error(opened_iface_ + " has an XDP program that is not sluice's");
  } else {
    LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = fd);
    const uint32_t flags = (skb ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE) | XDP_FLAGS_REPLACE;
    if (int err = bpf_xdp_detach(ifindex, flags, &opts)) {
      errno = -err;
      s = os_error("detaching the XDP program of " + opened_iface_);
    }
  }
  close(fd);
  return s;
}

Result<std::vector<FlowRate>> XdpBackend::top_flows(const TopFlowsQuery& query,
                                                    std::chrono::milliseconds interval) {
  // An unknown rule is refused before the wait (rank_flows says so the same way).
  if (Result<std::vector<FlowRate>> r = rank_flows(prog_->rules().rules, prog_->entries(),
                                                   FlowSample{0, {}}, FlowSample{1, {}}, query);
      !r)
    return r;
  auto before = prog_->sample_flows();
  if (!before) return before.error();
  std::this_thread::sleep_for(interval);
  auto after = prog_->sample_flows();
  if (!after) return after.error();
  return rank_flows(prog_->rules().rules, prog_->entries(), *before, *after, query);
}

XdpBackend::~XdpBackend() {
  if (opened_iface_.empty() && !keep_) (void)detach();  // an opened one leaves it running
}

Status XdpBackend::detach() {
  if (pin_dir_.empty()) return Ok{};
  Status s = opened_iface_.empty() ? prog_->detach() : detach_opened();
  if (!s && !opened_iface_.empty()) return s;  // someone else's program: leave its pins too
  prog_->unpin_maps(pin_dir_);
  if (Status r = remove_pin_dir(pin_dir_); !r && s.ok()) s = r;
  pin_dir_.clear();
  return s;
}

}  // namespace sluice::xdp
