// The XDP program in user space: loaded through its bpftool skeleton (open -> .rodata ->
// load -> attach -> destroy), its maps filled from a RuleSet and its per-CPU counters summed.
// Every map is reached through the skeleton, never by a name string.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../dataplane/abi/sluice_abi.h"
#include "../dataplane/core/counters.hpp"
#include "../dataplane/core/result.hpp"
#include "../dataplane/core/rules.hpp"
#include "xdp_flows_top.hpp"

struct sluice_bpf;  // the skeleton (sluice.skel.h)

namespace sluice::xdp {

struct LoadOptions {
  // Take now_ns from sl_config.test_now_ns instead of the kernel clock (sluice_abi.h), so
  // BPF_PROG_TEST_RUN can replay a trace with chosen timestamps.
  bool test_clock = false;
  // Flows a keyed rule without max-flows may hold (its table's size; sluice_abi.h "Flow tables").
  uint64_t default_max_flows = SL_XDP_DEFAULT_FLOWS;
  uint64_t stale_read_tolerance_ns = SL_STEP_TOLERANCE_NS;
  // The flow hash seed base (0: random per load): a state's seed is this plus its id, as in
  // the core (PipelineOptions::hash_seed), so a test replaying a trace through both with the
  // same seed gets the same flow placement, evictions and refusals.
  uint64_t hash_seed = 0;
};

enum class AttachMode { native, skb };

class XdpProgram {
 public:
  // Opens and loads the program (the kernel verifier runs here).
  static Result<std::unique_ptr<XdpProgram>> load(const LoadOptions& opts);

  // The maps another process pinned under DIR (pin_maps), without loading a program: rules
  // (set_rules, rules) and counters work on them as on the loader's own; test runs and
  // attach do not. The running rule set is read back from sl_rules_text.
  static Result<std::unique_ptr<XdpProgram>> open_pinned(const std::string& dir);
  ~XdpProgram();  // detaches what attach() attached, then destroys the skeleton
  XdpProgram(const XdpProgram&) = delete;
  XdpProgram& operator=(const XdpProgram&) = delete;

  int prog_fd() const;

  // Compiles a rule set into the bank of the maps the program is not reading and switches to
  // it with one map write (sluice_abi.h "Rule changes"): a packet sees the old set or the new
  // one. A rule whose state identity is unchanged (rules_diff.hpp) keeps its buckets, flows
  // and counters; a new rate, burst or limit carries its tokens, capped at the new burst; new
  // rules start full. Refuses what compile_xdp_rules() refuses and then changes nothing.
  Status set_rules(const RuleSet& rules);
  // What set_rules(rules) would refuse before it writes anything (a rule the program cannot
  // run, a set too large for its maps), found without writing: the dry run of `config diff`.
  Status check_rules(const RuleSet& rules) const;

  // The rule set running now (empty before the first set_rules).
  const RuleSet& rules() const { return rules_; }
  // Rule sets applied since the program was loaded (read back by open_pinned).
  uint64_t generation() const { return generation_; }

  // The test clock's now_ns for the next packets (only with LoadOptions::test_clock).
  Status set_test_now(uint64_t now_ns);

  // One frame through BPF_PROG_TEST_RUN: the XDP verdict and the frame as the program left it.
  // With repeat > 1 the kernel runs the program that many times on the frame (each run sees
  // the original bytes) and reports the last run and the mean time per run.
  struct RunResult {
    uint32_t verdict = 0;  // XDP_PASS, XDP_DROP, ...
    std::vector<uint8_t> frame;
    uint32_t duration_ns = 0;  // mean per run
  };
  Result<RunResult> test_run(const uint8_t* frame, uint32_t len, uint32_t repeat = 1);

  // Gives interface `ifindex` the ingress port id that rules' `port` field matches (an
  // interface not given one is port 0).
  Status set_ingress_port(int ifindex, uint32_t port_id);

  // The counters summed over CPUs: index i < rule count is rule i, the last entry the default.
  Result<WorkerCounters> counters() const;

  // Every flow of the running rules' tables with its packet and byte counts, and the
  // program's clock (rank_flows turns two samples into rates). Read in batches: the program
  // runs on meanwhile.
  Result<FlowSample> sample_flows() const;

  // Per running rule: its active flows (in its table, not idle past its idle timeout) and the
  // flows its table evicted so far (SPEC §5; the table's count, sl_flow_meta.evicted).
  struct RuleFlows {
    uint64_t active = 0;
    uint64_t evicted = 0;
  };
  Result<std::vector<RuleFlows>> flow_counts() const;
  // The running rules' entries (state slots), as in the active bank.
  const std::vector<sl_xdp_rule>& entries() const { return entries_; }

  // bpf_xdp_attach in native (driver) or generic (skb) mode; refused if the interface
  // already has an XDP program.
  Status attach(int ifindex, AttachMode mode);
  Status detach();
  // Forgets the attachment: the destructor leaves the program attached (the kernel keeps it
  // while the interface holds it).
  void keep_attached();

  // Pins every map of the program as DIR/<map name> (DIR must exist); unpin_maps() removes
  // them again.
  Status pin_maps(const std::string& dir);
  void unpin_maps(const std::string& dir);

 private:
  XdpProgram(sluice_bpf* skel, const LoadOptions& opts) : skel_(skel), opts_(opts) {}
  Status read_back_rules();  // rules_ and entries_ from the maps (open_pinned)
  bool maps_only_ = false;   // open_pinned: no program of ours
  sluice_bpf* skel_;
  LoadOptions opts_;
  Result<sl_xdp_config> read_config() const;
  uint64_t now_ns() const;  // the program's clock: the test clock, or CLOCK_MONOTONIC
  // The slots' aggregates and counters zeroed, and each keyed rule given a new empty table
  // (rules[i] is entries[i]'s rule), seeded with the next state ids of cfg (advanced).
  // The flow tables set_rules would create for the rules that take a fresh slot (`entries`:
  // the new bank's, in the order of `rules`), refused before any is made: a rule asking for
  // more flows than a table holds, or tables needing more memory than this process can have
  // (memory_budget.hpp; a BPF array is kernel memory, all of it taken at creation).
  Status check_fresh_tables(const std::vector<uint16_t>& slots, const std::vector<Rule>& rules,
                            const std::vector<sl_xdp_rule>& entries) const;
  Status start_slots_over(const std::vector<uint16_t>& slots, const std::vector<Rule>& rules,
                          const std::vector<sl_xdp_rule>& entries, sl_xdp_config& cfg);
  // Converts the flows of the rules' tables to their new profiles (convert_bucket).
  Status convert_flows(const std::vector<const sl_xdp_rule*>& convert_rules);

  RuleSet rules_;                    // running now
  std::vector<sl_xdp_rule> entries_;  // its entries, as in the active bank
  uint64_t generation_ = 0;
  int attached_ifindex_ = 0;
  uint32_t attached_flags_ = 0;
};

}  // namespace sluice::xdp
