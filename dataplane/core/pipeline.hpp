// The burst pipeline: parse -> classify -> limit -> act, shared by `sluiced --replay` and the
// live dataplane. A Pipeline holds the running rules as an immutable compiled snapshot
// (rules_snapshot.hpp) and the state of every rule (bucket words, flow tables) apart from
// it, keyed by each rule's state identity, so that apply() can swap in a new rule set while
// workers run and every rule it keeps keeps its buckets, flows and counters. Each worker
// brings its own WorkerCounters. Time is always a parameter.
//
// Workers (threads calling process*, expire_idle) read the current snapshot once per burst
// loop through enter() and hold nothing of it past their next quiescent report to the
// Pipeline's GracePeriod; apply() frees a replaced snapshot only after the grace period.
// Without a GracePeriod the Pipeline has one caller, which never runs concurrently with
// apply() (replay, simple tests).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bucket_math.h"
#include "counters.hpp"
#include "grace_period.hpp"
#include "result.hpp"
#include "rules.hpp"
#include "rules_diff.hpp"

namespace sluice {

struct RulesSnapshot;

struct PipelineOptions {
  uint64_t default_max_flows = 65536;  // flow slots for a keyed rule without max-flows
  // The command-line option that sets default_max_flows, named in a refusal for memory
  // ("--flows" in live mode; none in replay, whose capacity is fixed).
  const char* default_max_flows_option = "";
  uint64_t hash_seed = 0;              // 0: random per start (SPEC §3 Flows)
  // How stale a worker's clock read may be before a bucket takes it for a backward step.
  // Workers sharing buckets need slack for preemption between clock read and charge; a
  // single-threaded replay has no stale readers and sets 0, so a capture whose timestamps
  // step back re-bases after B/r instead of B/r + 1 s.
  uint64_t stale_read_tolerance_ns = SL_STEP_TOLERANCE_NS;
  // Only one thread will ever call process(): bucket words are then published with plain
  // stores instead of compare-and-swap (no locked instruction per decision). A replay and
  // a one-worker dataplane set it; with more workers it must stay false.
  bool single_writer = false;
  // The longest max-delay any rule may have, in the start-up set or added later: the live
  // dataplane sizes its timing wheels for it once. 0: the start-up set's longest max-delay,
  // but at least kDefaultShapingHorizonNs. apply() refuses a rule beyond it.
  uint64_t shaping_horizon_ns = 0;
  // How much memory new flow tables may still take (memory_budget.hpp's
  // memory_available_now() for a live dataplane): asked before any table is allocated, by
  // create() and by every apply() for the tables of the rules that take a new state, which are
  // refused with both figures when they need more. Empty, or nullopt from it: not checked.
  std::function<std::optional<uint64_t>()> memory_available;

  // As `sluiced --replay` runs: one thread and the capture's clock, so no stale readers and
  // plain stores. Tests that compare another backend with replay build their pipeline so.
  static PipelineOptions single_threaded(uint64_t hash_seed) {
    PipelineOptions o;
    o.hash_seed = hash_seed;
    o.stale_read_tolerance_ns = 0;
    o.single_writer = true;
    return o;
  }
};

struct Verdict {
  enum class Kind : uint8_t { forward, drop };
  Kind kind = Kind::forward;
  uint64_t depart_ns = 0;  // == now_ns unless a leaky-bucket rule delayed the packet
};

// Which verdicts process_burst writes. A worker that sends a burst whole when none of its
// packets is dropped or held needs no verdict of such a burst, and the common path then stores
// none (one store pair per packet less).
enum class VerdictFill : uint8_t {
  all,              // every one of the burst's verdicts
  unless_all_now,   // every one when it returns non-zero; none need be written when it
                    // returns 0 (every verdict is then {forward, now_ns})
};

// Whether v sends its packet at now_ns (not dropped, not held for a later departure).
inline bool forwards_now(const Verdict& v, uint64_t now_ns) {
  return v.kind == Verdict::Kind::forward && v.depart_ns <= now_ns;
}

class Pipeline {
 public:
  static constexpr uint64_t kDefaultShapingHorizonNs = 100'000'000;  // 100 ms
  // Removed rules whose final counters snapshot() lists (the most recent ones).
  static constexpr size_t kRemovedRulesKept = 256;

  static Result<std::unique_ptr<Pipeline>> create(RuleSet rules, const PipelineOptions& opts);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The running rules. The reference holds until the next apply(); rules_copy() is safe
  // from any thread at any time.
  const RuleSet& rules() const;
  RuleSet rules_copy() const;
  // Grows by one with every apply() that succeeded.
  uint64_t generation() const;
  // Counters laid out for the running rules.
  WorkerCounters make_counters() const;
  // Longest max-delay of the running rules' shaping rules (0 if none).
  uint64_t max_delay_ns() const;
  // The bound of PipelineOptions::shaping_horizon_ns: a timing wheel this long takes every
  // delay a rule can ever impose.
  uint64_t shaping_horizon_ns() const;

  // Overrides PipelineOptions::single_writer, for callers that learn the number of threads
  // after creating the pipeline. Only while no thread is calling process().
  void set_single_writer(bool single_writer);
  // The readers' grace period (not owned; must outlive every later apply()). Only while no
  // thread is calling process(); nullptr: one caller, never concurrent with apply().
  void set_grace_period(GracePeriod* grace);

  // Runs `next` (a validated RuleSet: the loader's output) instead of the running rules.
  // Rules that keep their state identity (rules_diff.hpp) keep their buckets, flows and
  // counters; a changed rate, burst or limit is carried into the tokens they hold at now_ns
  // (bucket_convert.hpp). When it returns, every worker online runs `next` from its next
  // burst loop on (after one grace period; two when rules were removed, so that every
  // worker has handed their last counts over); the replaced snapshot and the state of
  // removed rules are freed. An error (a max-delay beyond the
  // shaping horizon, a profile out of range, memory) changes nothing. Serialised.
  Result<RulesDiff> apply(RuleSet next, uint64_t now_ns);

  // The error apply(next) would return, found without applying or allocating anything: the
  // dry run behind `config diff`. (Memory is asked for now; apply() asks again.)
  Status check(const RuleSet& next) const;

  // How the running snapshot spread (diagnostics, the apply-latency test): how many workers
  // (counters) entered it, and how long after the time apply() was given the last of them
  // did, by the workers' own clock readings.
  struct SwapVisibility {
    uint64_t generation = 0;
    uint32_t workers_entered = 0;
    uint64_t last_entered_after_ns = 0;
  };
  SwapVisibility swap_visibility() const;

  // ---- Workers: once per burst loop, after reporting quiescent to the grace period.
  // The running snapshot, with `counters` laid out for it (a worker adopting a new snapshot
  // grows its counters, clears the slots of removed rules after handing their last counts
  // over, and runs the snapshot's state conversions if no other worker has).
  const RulesSnapshot& enter(WorkerCounters& counters, uint64_t now_ns);

  // One frame. May rewrite the frame in place (DSCP marking). Thread-safe: any number of
  // workers may call it concurrently with their own counters.
  Verdict process(uint8_t* frame, uint32_t len, uint16_t port, uint64_t now_ns,
                  WorkerCounters& counters);

  // Frees flow slots idle longer than their rule's idle-timeout, visiting at most
  // `max_slots` slots of one keyed rule's table, round-robin over the keyed rules from where
  // the previous call stopped: the cost of a call does not depend on how many rules exist.
  // Returns the number freed.
  size_t expire_idle(uint64_t now_ns, size_t max_slots);
  size_t expire_idle(const RulesSnapshot& snap, uint64_t now_ns, size_t max_slots);

  // How often each of `callers` threads should call expire_idle(now, max_slots) so that every
  // keyed rule's table is swept whole at least once per kSweepFraction of its idle-timeout
  // (between 1 ms and 10 s): in [kMinExpireIntervalNs, kMaxExpireIntervalNs]. A sweep faster
  // than that only reads memory: a 1M-flow table is 32 MB, so sweeping it every 0.3 s cost a
  // worker ~5% of its packet rate in cache misses.
  static constexpr uint64_t kSweepFraction = 8;
  static constexpr uint64_t kMinExpireIntervalNs = 10'000;
  static constexpr uint64_t kMaxExpireIntervalNs = 1'000'000;
  uint64_t expire_interval_ns(size_t max_slots, size_t callers) const;
  static uint64_t expire_interval_ns(const RulesSnapshot& snap, size_t max_slots, size_t callers);

  // A burst of frames, all from one ingress port at one clock reading: classifies and
  // hashes every frame first and prefetches its flow slot, then charges them in order, so
  // the flow-table memory latency of one packet overlaps the work on the others. Same
  // results as calling process() on each frame in order.
  // `len` bytes at `data` hold the headers (the whole frame, or a prefix of it: the first
  // segment of an mbuf chain); `wire_len` is the frame's length, which byte rates charge and
  // counters count, and which IP length fields are checked against. A wire_len below len
  // (e.g. left 0) counts as len. A DSCP mark rewrites the bytes at `data`.
  struct Frame {
    uint8_t* data;
    uint32_t len;
    uint32_t wire_len = 0;
  };
  // process() of one such frame.
  Verdict process(const Frame& frame, uint16_t port, uint64_t now_ns, WorkerCounters& counters);
  // Returns how many verdicts are not "forward now" (a drop, or a departure after now_ns):
  // 0 for the common burst, which a worker then sends whole without looking at a verdict.
  static constexpr size_t kMaxBurst = 64;
  size_t process_burst(const Frame* frames, size_t n, uint16_t port, uint64_t now_ns,
                       WorkerCounters& counters, Verdict* verdicts,
                       VerdictFill fill = VerdictFill::all);
  // The same against the snapshot enter() returned (counters laid out for it). A live worker
  // runs the same loops over its mbufs in place (pipeline_burst.hpp, dataplane/live).
  size_t process_burst(const RulesSnapshot& snap, const Frame* frames, size_t n, uint16_t port,
                       uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts,
                       VerdictFill fill = VerdictFill::all);

  // Rule counters of the running rules summed over `workers` (each laid out for this or an
  // earlier snapshot), flows, and the final counters of recently removed rules.
  CountersSnapshot snapshot(const std::vector<const WorkerCounters*>& workers) const;

  // The running rules' state identities (RuleState::id, rules_snapshot.hpp), in rule order:
  // what a per-flow observer (flow_sampler.hpp) recorded under a state id belongs to a
  // running rule iff the id is listed here. Any thread.
  struct RuleIdentity {
    std::string name;
    uint64_t state_id = 0;
    bool keyed = false;  // has per-flow buckets (key other than none)
  };
  std::vector<RuleIdentity> rule_identities() const;

  struct Impl;

 private:
  explicit Pipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The generation and max-delay of a snapshot a worker holds.
uint64_t snapshot_generation(const RulesSnapshot& snap);

}  // namespace sluice
