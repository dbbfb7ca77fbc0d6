// The XDP backend on one interface: the program attached with bpf_xdp_attach (native or skb
// mode), its maps pinned under SL_XDP_PIN_ROOT/IFACE so that a later process (sluicectl, issue
// 12 item 4) can reach them, a RuleSet loaded into them, and the per-CPU counters summed.
// Detaching (or destroying the backend) leaves nothing attached and nothing pinned.
#pragma once

#include <memory>
#include <string>

#include "xdp_program.hpp"

namespace sluice::xdp {

class XdpBackend {
 public:
  // Refuses a missing interface, one that already has an XDP program, and one whose pin
  // directory exists (another sluice attached there); on any error nothing stays behind.
  static Result<std::unique_ptr<XdpBackend>> attach(const std::string& iface, AttachMode mode,
                                                    const RuleSet& rules);
  ~XdpBackend();
  XdpBackend(const XdpBackend&) = delete;
  XdpBackend& operator=(const XdpBackend&) = delete;

  Status set_rules(const RuleSet& rules) { return prog_->set_rules(rules); }
  Result<WorkerCounters> counters() const { return prog_->counters(); }
  const std::string& pin_dir() const { return pin_dir_; }
  Status detach();

 private:
  XdpBackend(std::unique_ptr<XdpProgram> prog, std::string pin_dir)
      : prog_(std::move(prog)), pin_dir_(std::move(pin_dir)) {}
  std::unique_ptr<XdpProgram> prog_;
  std::string pin_dir_;
};

}  // namespace sluice::xdp
