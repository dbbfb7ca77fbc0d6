#include "xdp_program.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sluice.skel.h"
#include "xdp_match_maps.hpp"
#include "xdp_rules.hpp"

namespace sluice::xdp {
namespace {

Error os_error(const std::string& what, int err) {
  return make_error(what + ": " + std::strerror(err < 0 ? -err : err));
}

template <class K, class V>
Status put(bpf_map* map, const K& key, const V& value, const char* what) {
  if (int err = bpf_map__update_elem(map, &key, sizeof(K), &value, sizeof(V), BPF_ANY))
    return os_error(std::string("XDP map ") + what, err);
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<XdpProgram>> XdpProgram::load(const LoadOptions& opts) {
  if (opts.flow_capacity == 0) return make_error("XDP flow table capacity must be at least 1");
  sluice_bpf* skel = sluice_bpf__open();
  if (!skel) return os_error("opening the XDP program", errno);
  skel->rodata->sl_test_clock = opts.test_clock ? 1 : 0;
  if (int err = bpf_map__set_max_entries(skel->maps.sl_flows, opts.flow_capacity)) {
    sluice_bpf__destroy(skel);
    return os_error("sizing the XDP flow table", err);
  }
  if (int err = sluice_bpf__load(skel)) {
    sluice_bpf__destroy(skel);
    return os_error("loading the XDP program (the kernel verifier's log is on stderr)", err);
  }
  return std::unique_ptr<XdpProgram>(new XdpProgram(skel, opts));
}

XdpProgram::~XdpProgram() {
  (void)detach();
  sluice_bpf__destroy(skel_);
}

int XdpProgram::prog_fd() const { return bpf_program__fd(skel_->progs.sluice_xdp); }

Status XdpProgram::set_rules(const RuleSet& rules) {
  auto compiled = compile_xdp_rules(rules, opts_.stale_read_tolerance_ns);
  if (!compiled) return compiled.error();
  // No rule matches while the tables change; the new count goes in last.
  sl_xdp_config cfg{};
  const uint32_t zero = 0;
  if (int err = bpf_map__lookup_elem(skel_->maps.sl_config, &zero, sizeof(zero), &cfg,
                                     sizeof(cfg), 0))
    return os_error("reading the XDP config", err);
  const uint64_t test_now_ns = cfg.test_now_ns;
  cfg.rule_count = 0;
  if (Status s = put(skel_->maps.sl_config, zero, cfg, "sl_config"); !s) return s;
  const sl_bucket empty{};
  for (uint32_t i = 0; i < SL_XDP_MAX_RULES; ++i) {
    if (i < compiled->rules.size()) {
      if (Status s = put(skel_->maps.sl_rules, i, compiled->rules[i], "sl_rules"); !s) return s;
    }
    if (Status s = put(skel_->maps.sl_aggregates, i, empty, "sl_aggregates"); !s) return s;
  }
  // Per-flow state of the old rules would be keyed by rule indexes that now mean other rules.
  sl_flow_key key{}, next{};
  while (bpf_map__get_next_key(skel_->maps.sl_flows, nullptr, &next, sizeof(next)) == 0) {
    key = next;
    if (bpf_map__delete_elem(skel_->maps.sl_flows, &key, sizeof(key), 0)) break;
  }
  if (Status s = fill_match_maps(skel_, rules.rules); !s) return s;
  cfg = compiled->config;
  cfg.test_now_ns = test_now_ns;
  if (Status s = put(skel_->maps.sl_config, zero, cfg, "sl_config"); !s) return s;
  rule_count_ = compiled->rules.size();
  return Ok{};
}

Status XdpProgram::set_test_now(uint64_t now_ns) {
  if (!opts_.test_clock) return make_error("the XDP program was loaded without the test clock");
  const uint32_t zero = 0;
  sl_xdp_config cfg{};
  if (int err = bpf_map__lookup_elem(skel_->maps.sl_config, &zero, sizeof(zero), &cfg,
                                     sizeof(cfg), 0))
    return os_error("reading the XDP config", err);
  cfg.test_now_ns = now_ns;
  return put(skel_->maps.sl_config, zero, cfg, "sl_config");
}

Result<XdpProgram::RunResult> XdpProgram::test_run(const uint8_t* frame, uint32_t len,
                                                   uint32_t repeat) {
  RunResult out;
  out.frame.resize(len + 256);  // room in case a future action grows the frame
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = frame, .data_out = out.frame.data(),
              .data_size_in = len, .data_size_out = uint32_t(out.frame.size()),
              .repeat = int(repeat));
  if (int err = bpf_prog_test_run_opts(prog_fd(), &run)) return os_error("BPF_PROG_TEST_RUN", err);
  out.verdict = run.retval;
  out.duration_ns = run.duration;
  out.frame.resize(run.data_size_out);
  return out;
}

Status XdpProgram::set_ingress_port(int ifindex, uint32_t port_id) {
  return put(skel_->maps.sl_ifport, uint32_t(ifindex), port_id, "sl_ifport");
}

Result<WorkerCounters> XdpProgram::counters() const {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return os_error("counting CPUs", cpus);
  WorkerCounters total(rule_count_);
  std::vector<sl_counter> per_cpu(static_cast<size_t>(cpus));
  for (size_t slot = 0; slot <= rule_count_; ++slot) {
    const uint32_t abi_slot = slot == rule_count_ ? SL_XDP_DEFAULT_SLOT : uint32_t(slot);
    TrafficCounters& t = total.per_rule[slot];
    for (uint32_t o = 0; o < SL_OUTCOME_COUNT; ++o) {
      const uint32_t idx = sl_counter_index(abi_slot, o);
      if (int err = bpf_map__lookup_elem(skel_->maps.sl_counters, &idx, sizeof(idx),
                                         per_cpu.data(), per_cpu.size() * sizeof(sl_counter), 0))
        return os_error("reading the XDP counters", err);
      for (const sl_counter& c : per_cpu) {
        t.packets[o] += c.packets;
        t.bytes[o] += c.bytes;
      }
    }
  }
  return total;
}

Status XdpProgram::attach(int ifindex, AttachMode mode) {
  if (attached_ifindex_ != 0) return make_error("the XDP program is already attached");
  const uint32_t flags = XDP_FLAGS_UPDATE_IF_NOEXIST |
                         (mode == AttachMode::native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE);
  if (int err = bpf_xdp_attach(ifindex, prog_fd(), flags, nullptr)) {
    if (err == -EBUSY || err == -EEXIST)
      return make_error("interface " + std::to_string(ifindex) + " already has an XDP program");
    return os_error("attaching the XDP program to interface " + std::to_string(ifindex), err);
  }
  attached_ifindex_ = ifindex;
  attached_flags_ = flags & ~uint32_t(XDP_FLAGS_UPDATE_IF_NOEXIST);
  return Ok{};
}

Status XdpProgram::detach() {
  if (attached_ifindex_ == 0) return Ok{};
  LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = prog_fd());
  // XDP_FLAGS_REPLACE with old_prog_fd: detaches only if our program is still the one there.
  int err = bpf_xdp_detach(attached_ifindex_, attached_flags_ | XDP_FLAGS_REPLACE, &opts);
  attached_ifindex_ = 0;
  if (err) return os_error("detaching the XDP program", err);
  return Ok{};
}

Status XdpProgram::pin_maps(const std::string& dir) {
  bpf_map* map;
  bpf_object__for_each_map(map, skel_->obj) {
    if (bpf_map__is_internal(map)) continue;  // .rodata: the program's own settings
    const std::string path = dir + "/" + bpf_map__name(map);
    if (int err = bpf_map__pin(map, path.c_str())) {
      unpin_maps(dir);
      return os_error("pinning " + path, err);
    }
  }
  return Ok{};
}

void XdpProgram::unpin_maps(const std::string& dir) {
  bpf_map* map;
  bpf_object__for_each_map(map, skel_->obj) {
    if (bpf_map__is_internal(map)) continue;
    (void)bpf_map__unpin(map, (dir + "/" + bpf_map__name(map)).c_str());
  }
}

}  // namespace sluice::xdp
