#include "xdp_program.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "../dataplane/core/flow_key.hpp"
#include "../dataplane/core/memory_budget.hpp"
#include "../dataplane/core/rules_loader.hpp"
#include "sluice.skel.h"
#include "xdp_flow_tables.hpp"
#include "xdp_match_maps.hpp"
#include "xdp_rule_swap.hpp"
#include "xdp_rules.hpp"
#include "xdp_rules_check.hpp"

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
  if (opts.default_max_flows == 0 || opts.default_max_flows > kMaxFlowTableEntries)
    return make_error("the XDP default max-flows must be 1 to " +
                      std::to_string(kMaxFlowTableEntries));
  sluice_bpf* skel = sluice_bpf__open();
  if (!skel) return os_error("opening the XDP program", errno);
  skel->rodata->sl_test_clock = opts.test_clock ? 1 : 0;
  if (int err = sluice_bpf__load(skel)) {
    sluice_bpf__destroy(skel);
    return os_error("loading the XDP program (the kernel verifier's log is on stderr)", err);
  }
  std::unique_ptr<XdpProgram> prog(new XdpProgram(skel, opts));
  // The flow hash seeds of the states to come (sluice_abi.h sl_xdp_config).
  sl_xdp_config cfg{};
  cfg.hash_base = opts.hash_seed ? opts.hash_seed : random_hash_seed();
  if (Status s = put(skel->maps.sl_config, uint32_t{0}, cfg, "sl_config"); !s) return s.error();
  return prog;
}

Result<std::unique_ptr<XdpProgram>> XdpProgram::open_pinned(const std::string& dir) {
  sluice_bpf* skel = sluice_bpf__open();
  if (!skel) return os_error("opening the XDP program", errno);
  auto fail = [&](const Error& e) -> Result<std::unique_ptr<XdpProgram>> {
    sluice_bpf__destroy(skel);
    return e;
  };
  bpf_map* map;
  bpf_object__for_each_map(map, skel->obj) {
    if (bpf_map__is_internal(map)) continue;
    const std::string path = dir + "/" + bpf_map__name(map);
    const int fd = bpf_obj_get(path.c_str());
    if (fd < 0) return fail(os_error(path + " (is sluice attached there?)", errno));
    const int err = bpf_map__reuse_fd(map, fd);  // dups fd
    close(fd);
    if (err) return fail(os_error("reusing " + path, err));
  }
  std::unique_ptr<XdpProgram> prog(new XdpProgram(skel, LoadOptions{}));
  prog->maps_only_ = true;
  if (Status s = prog->read_back_rules(); !s) return s.error();
  return prog;
}

Status XdpProgram::read_back_rules() {
  auto cfg = read_config();
  if (!cfg) return cfg.error();
  const uint32_t bank = cfg->active_bank % SL_XDP_BANKS, zero = 0;
  sl_xdp_bank b{};
  if (int err = bpf_map__lookup_elem(skel_->maps.sl_banks, &bank, sizeof(bank), &b, sizeof(b), 0))
    return os_error("reading the XDP bank", err);
  auto text = std::make_unique<sl_rules_text>();
  if (int err = bpf_map__lookup_elem(skel_->maps.sl_rules_text, &zero, sizeof(zero), text.get(),
                                     sizeof(*text), 0))
    return os_error("reading the XDP rules text", err);
  if (text->len > SL_XDP_RULES_TEXT_MAX) return make_error("the XDP rules text is corrupt");
  auto rules = load_rules_text(std::string(text->text, text->len), "(running XDP rules)");
  if (!rules) return rules.error();
  if (rules->rules.size() != b.rule_count)
    return make_error("the XDP rules text does not match the running rule set");
  std::vector<sl_xdp_rule> entries(b.rule_count);
  for (uint32_t i = 0; i < b.rule_count; ++i) {
    const uint32_t key = bank * SL_XDP_MAX_RULES + i;
    if (int err = bpf_map__lookup_elem(skel_->maps.sl_rules, &key, sizeof(key), &entries[i],
                                       sizeof(sl_xdp_rule), 0))
      return os_error("reading the XDP rules", err);
  }
  rules_ = std::move(*rules);
  entries_ = std::move(entries);
  generation_ = cfg->generation;
  return Ok{};
}

XdpProgram::~XdpProgram() {
  (void)detach();
  sluice_bpf__destroy(skel_);
}

void XdpProgram::keep_attached() { attached_ifindex_ = 0; }

int XdpProgram::prog_fd() const {
  return maps_only_ ? -1 : bpf_program__fd(skel_->progs.sluice_xdp);
}

Result<sl_xdp_config> XdpProgram::read_config() const {
  sl_xdp_config cfg{};
  const uint32_t zero = 0;
  if (int err = bpf_map__lookup_elem(skel_->maps.sl_config, &zero, sizeof(zero), &cfg,
                                     sizeof(cfg), 0))
    return os_error("reading the XDP config", err);
  return cfg;
}

uint64_t XdpProgram::now_ns() const {
  if (opts_.test_clock) {
    auto cfg = read_config();
    return cfg ? cfg->test_now_ns : 0;
  }
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // bpf_ktime_get_ns()'s clock
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

Status XdpProgram::check_fresh_tables(const std::vector<uint16_t>& slots,
                                      const std::vector<Rule>& rules,
                                      const std::vector<sl_xdp_rule>& entries) const {
  FlowMemory need;
  for (uint16_t slot : slots) {
    size_t i = 0;
    while (i < entries.size() && entries[i].state != slot) ++i;
    if (i == entries.size() || i >= rules.size()) return make_error("no rule for a fresh XDP slot");
    if (Status s = add_xdp_flow_table(need, rules[i], opts_.default_max_flows); !s) return s;
  }
  if (need.bytes == 0) return Ok{};
  const std::optional<uint64_t> available = memory_available_now();
  if (!available) return Ok{};
  return check_flow_memory(need, *available, "");
}

Status XdpProgram::start_slots_over(const std::vector<uint16_t>& slots,
                                    const std::vector<Rule>& rules,
                                    const std::vector<sl_xdp_rule>& entries,
                                    sl_xdp_config& cfg) {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return os_error("counting CPUs", cpus);
  const std::vector<sl_slot_counters> zeros(size_t(cpus), sl_slot_counters{});
  const sl_bucket empty{};
  const int tables = bpf_map__fd(skel_->maps.sl_flow_tables);
  for (uint16_t slot : slots) {
    const uint32_t key = slot;
    // A new state: the next id, as the core numbers its states (its seed follows from it).
    const uint64_t seed = cfg.hash_base + cfg.next_state_id++;
    if (Status s = put(skel_->maps.sl_aggregates, key, empty, "sl_aggregates"); !s) return s;
    if (int err = bpf_map__update_elem(skel_->maps.sl_counters, &key, sizeof(key), zeros.data(),
                                       zeros.size() * sizeof(sl_slot_counters), BPF_ANY))
      return os_error("XDP map sl_counters", err);
    // Its rule: a keyed one gets a new table (the flows of an earlier user of the slot go with
    // the old one), an aggregate none.
    size_t i = 0;
    while (i < entries.size() && entries[i].state != slot) ++i;
    if (i == entries.size() || i >= rules.size()) return make_error("no rule for a fresh XDP slot");
    const Rule& r = rules[i];
    if (Status s = remove_flow_table(tables, key); !s) return s;
    if (r.key == KeyMode::none) continue;
    FlowTableSpec spec;
    spec.max_flows = r.max_flows ? r.max_flows : opts_.default_max_flows;
    spec.idle_timeout_ns = r.idle_timeout_ns;
    spec.hash_seed = seed;
    // The core's choice for the same rule and capacity, so both tables place its flows alike.
    spec.dense = dense_key_of(r, spec.max_flows);
    if (Status s = put_flow_table(tables, bpf_map__fd(skel_->maps.sl_flow_meta), key, spec); !s)
      return make_error("rule \"" + r.name + "\": " + s.error().message);
  }
  return Ok{};
}

Status XdpProgram::convert_flows(const std::vector<const sl_xdp_rule*>& convert_rules) {
  for (const sl_xdp_rule* r : convert_rules) {
    if (r->key_mode == SL_KEY_NONE) continue;
    auto table = open_flow_table(bpf_map__fd(skel_->maps.sl_flow_tables), r->state);
    if (!table) return table.error();
    if (!*table) continue;
    const uint64_t now = now_ns();
    if (Status s = convert_flow_table(table->get(),
                                      [&](const sl_bucket& b) { return convert_bucket(*r, b, now); });
        !s)
      return s;
  }
  return Ok{};
}

// Waits until no run of the program that may have read the old bank is still going: XDP runs
// inside an RCU read-side section, and MEMBARRIER_CMD_GLOBAL is synchronize_rcu().
static void wait_for_readers() {
  if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) usleep(10000);
}

Status XdpProgram::check_rules(const RuleSet& rules) const {
  auto compiled = compile_xdp_rules(rules, opts_.stale_read_tolerance_ns);
  if (!compiled) return compiled.error();
  if (Status s = check_xdp_rules_text(dump_rules_yaml(rules)); !s) return s;
  const RuleSwapPlan plan = plan_rule_swap(rules_.rules, entries_, rules.rules,
                                           std::move(compiled->rules));
  return check_fresh_tables(plan.fresh_slots, rules.rules, plan.rules);
}

Status XdpProgram::set_rules(const RuleSet& rules) {
  auto compiled = compile_xdp_rules(rules, opts_.stale_read_tolerance_ns);
  if (!compiled) return compiled.error();
  auto text = std::make_unique<sl_rules_text>();
  const std::string yaml = dump_rules_yaml(rules);
  if (Status s = check_xdp_rules_text(yaml); !s) return s;
  text->len = uint32_t(yaml.size());
  std::memcpy(text->text, yaml.data(), yaml.size());
  auto cfg = read_config();
  if (!cfg) return cfg.error();
  const uint32_t bank = (cfg->active_bank + 1) % SL_XDP_BANKS;  // the one nobody reads
  RuleSwapPlan plan = plan_rule_swap(rules_.rules, entries_, rules.rules,
                                     std::move(compiled->rules));
  if (Status s = check_fresh_tables(plan.fresh_slots, rules.rules, plan.rules); !s) return s;

  // 1. The new rules' slots start over (nothing running uses them), the new bank is written.
  sl_xdp_config ids = *cfg;
  if (Status s = start_slots_over(plan.fresh_slots, rules.rules, plan.rules, ids); !s) return s;
  const uint32_t base = bank * SL_XDP_MAX_RULES;
  for (uint32_t i = 0; i < plan.rules.size(); ++i)
    if (Status s = put(skel_->maps.sl_rules, base + i, plan.rules[i], "sl_rules"); !s) return s;
  auto mask = fill_match_maps(skel_, rules.rules, bank);
  if (!mask) return mask.error();
  sl_xdp_bank bank_cfg = compiled->bank;
  bank_cfg.field_mask = *mask;
  if (Status s = put(skel_->maps.sl_banks, bank, bank_cfg, "sl_banks"); !s) return s;

  // 2. One write switches every packet to the new set.
  auto now_cfg = read_config();  // test_now_ns may have moved meanwhile? (not concurrently)
  if (!now_cfg) return now_cfg.error();
  sl_xdp_config next_cfg = *now_cfg;
  next_cfg.active_bank = bank;
  next_cfg.generation += 1;
  next_cfg.next_state_id = ids.next_state_id;
  const uint32_t zero = 0;
  if (Status s = put(skel_->maps.sl_config, zero, next_cfg, "sl_config"); !s) return s;
  rules_ = rules;
  entries_ = plan.rules;
  generation_ = next_cfg.generation;
  if (int err = bpf_map__update_elem(skel_->maps.sl_rules_text, &zero, sizeof(zero), text.get(),
                                     sizeof(*text), BPF_ANY))
    return os_error("XDP map sl_rules_text", err);

  // 3. Once no run reads the old bank: kept rules' buckets into their new profiles (a bucket
  // not yet converted is still read under its old ones), removed rules' tables dropped.
  if (plan.convert_slots.empty() && plan.freed_slots.empty()) return Ok{};
  wait_for_readers();
  std::vector<const sl_xdp_rule*> convert;
  for (const sl_xdp_rule& r : entries_)
    for (uint16_t slot : plan.convert_slots)
      if (r.state == slot) convert.push_back(&r);
  for (const sl_xdp_rule* r : convert) {
    if (r->key_mode != SL_KEY_NONE) continue;
    const uint32_t key = r->state;
    sl_bucket b{};
    if (int err = bpf_map__lookup_elem(skel_->maps.sl_aggregates, &key, sizeof(key), &b,
                                       sizeof(b), 0))
      return os_error("reading an XDP aggregate", err);
    b = convert_bucket(*r, b, now_ns());
    if (Status s = put(skel_->maps.sl_aggregates, key, b, "sl_aggregates"); !s) return s;
  }
  for (uint16_t slot : plan.freed_slots)
    if (Status s = remove_flow_table(bpf_map__fd(skel_->maps.sl_flow_tables), slot); !s)
      return s;
  return convert_flows(convert);
}

Status XdpProgram::set_test_now(uint64_t now_ns) {
  if (!opts_.test_clock) return make_error("the XDP program was loaded without the test clock");
  const uint32_t zero = 0;
  auto cfg = read_config();
  if (!cfg) return cfg.error();
  cfg->test_now_ns = now_ns;
  return put(skel_->maps.sl_config, zero, *cfg, "sl_config");
}

Result<XdpProgram::RunResult> XdpProgram::test_run(const uint8_t* frame, uint32_t len,
                                                   uint32_t repeat) {
  if (maps_only_) return make_error("no XDP program here: the maps were opened from their pins");
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
  const size_t rule_count = entries_.size();
  WorkerCounters total(rule_count);
  std::vector<sl_slot_counters> per_cpu(static_cast<size_t>(cpus));
  for (size_t slot = 0; slot <= rule_count; ++slot) {
    const uint32_t abi_slot = slot == rule_count ? SL_XDP_DEFAULT_SLOT : entries_[slot].state;
    TrafficCounters& t = total.per_rule[slot];
    if (int err = bpf_map__lookup_elem(skel_->maps.sl_counters, &abi_slot, sizeof(abi_slot),
                                       per_cpu.data(), per_cpu.size() * sizeof(sl_slot_counters), 0))
      return os_error("reading the XDP counters", err);
    for (const sl_slot_counters& c : per_cpu)
      for (uint32_t o = 0; o < SL_OUTCOME_COUNT; ++o) {
        t.packets[o] += c.outcome[o].packets;
        t.bytes[o] += c.outcome[o].bytes;
      }
  }
  return total;
}

Result<FlowSample> XdpProgram::sample_flows() const {
  FlowSample sample;
  for (const sl_xdp_rule& r : entries_) {
    if (r.key_mode == SL_KEY_NONE) continue;
    auto table = open_flow_table(bpf_map__fd(skel_->maps.sl_flow_tables), r.state);
    if (!table) return table.error();
    if (!*table) continue;
    auto flows = read_flow_table(table->get());
    if (!flows) return flows.error();
    for (size_t i = 0; i < flows->keys.size(); ++i) {
      const sl_bucket& b = flows->buckets[i];
      sample.flows.push_back(FlowCount{r.state, flows->keys[i], b.packets, b.bytes, b.last_seen_ns});
    }
  }
  sample.now_ns = now_ns();
  return sample;
}

Result<std::vector<XdpProgram::RuleFlows>> XdpProgram::flow_counts() const {
  auto sample = sample_flows();
  if (!sample) return sample.error();
  const std::vector<uint64_t> active = active_flows(entries_, *sample);
  std::vector<RuleFlows> out(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    out[i].active = active[i];
    if (entries_[i].key_mode == SL_KEY_NONE) continue;
    // The table's own count of what it evicted, as the core's FlowTable::evicted().
    auto meta = read_flow_meta(bpf_map__fd(skel_->maps.sl_flow_meta), entries_[i].state);
    if (!meta) return meta.error();
    out[i].evicted = __atomic_load_n(&meta->evicted, __ATOMIC_RELAXED);
  }
  return out;
}

Status XdpProgram::attach(int ifindex, AttachMode mode) {
  if (maps_only_) return make_error("no XDP program here: the maps were opened from their pins");
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
  // Already detached by someone else (sluicectl xdp detach through the pins): nothing to do.
  uint32_t attached_id = 0;
  bpf_prog_info info{};
  uint32_t info_len = sizeof(info);
  if (bpf_xdp_query_id(attached_ifindex_, int(attached_flags_), &attached_id) == 0 &&
      bpf_obj_get_info_by_fd(prog_fd(), &info, &info_len) == 0 && attached_id != info.id) {
    attached_ifindex_ = 0;
    return Ok{};
  }
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
    // unlink, not bpf_map__unpin: a map reused from a pin has no pin path of its own in libbpf
    (void)unlink((dir + "/" + bpf_map__name(map)).c_str());
  }
}

}  // namespace sluice::xdp
