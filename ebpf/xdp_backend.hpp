// The XDP backend on one interface: the program attached with bpf_xdp_attach (native or skb
// mode), its maps pinned under SL_XDP_PIN_ROOT/IFACE so that a later process (sluicectl, issue
// 12 item 4) can reach them, a RuleSet loaded into them, and the per-CPU counters summed.
// Detaching (or destroying the backend) leaves nothing attached and nothing pinned.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "xdp_program.hpp"

namespace sluice::xdp {

class XdpBackend {
 public:
  // Refuses a missing interface, one that already has an XDP program, and one whose pin
  // directory exists (another sluice attached there); on any error nothing stays behind.
  static Result<std::unique_ptr<XdpBackend>> attach(const std::string& iface, AttachMode mode,
                                                    const RuleSet& rules);
  // The backend another process attached to `iface`, through its pinned maps (sluicectl
  // --xdp): rules, counters and detach work; refused if nothing of sluice is pinned there.
  static Result<std::unique_ptr<XdpBackend>> open(const std::string& iface);
  ~XdpBackend();
  XdpBackend(const XdpBackend&) = delete;
  XdpBackend& operator=(const XdpBackend&) = delete;

  Status set_rules(const RuleSet& rules) { return prog_->set_rules(rules); }
  Status check_rules(const RuleSet& rules) const { return prog_->check_rules(rules); }
  Result<WorkerCounters> counters() const { return prog_->counters(); }
  const RuleSet& rules() const { return prog_->rules(); }
  uint64_t generation() const { return prog_->generation(); }
  // Per rule, its flows not idle past its idle timeout and the flows its table evicted (one
  // read of each flow table: XdpProgram::flow_counts).
  Result<std::vector<XdpProgram::RuleFlows>> flow_counts() const { return prog_->flow_counts(); }
  // The busiest flows over `interval`: the flow table read, then read again (rank_flows).
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& query,
                                          std::chrono::milliseconds interval);
  // Leaves the program attached and its maps pinned when this object goes (sluicectl xdp
  // attach: a later sluicectl reaches it through XdpBackend::open).
  void keep_attached() {
    keep_ = true;
    prog_->keep_attached();
  }
  const std::string& pin_dir() const { return pin_dir_; }
  Status detach();

 private:
  XdpBackend(std::unique_ptr<XdpProgram> prog, std::string pin_dir, std::string iface = "")
      : prog_(std::move(prog)), pin_dir_(std::move(pin_dir)), opened_iface_(std::move(iface)) {}
  Status detach_opened();  // the program another process attached
  std::unique_ptr<XdpProgram> prog_;
  std::string pin_dir_;
  std::string opened_iface_;  // set by open(): the program is not ours to destroy
  bool keep_ = false;
};

}  // namespace sluice::xdp
