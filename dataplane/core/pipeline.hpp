// The burst pipeline: parse -> classify -> limit -> act, shared by `sluiced --replay` and the
// live dataplane. A Pipeline holds what all workers share (compiled rules, bucket words,
// flow tables); each worker brings its own WorkerCounters. Time is always a parameter.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bucket_math.h"
#include "counters.hpp"
#include "result.hpp"
#include "rules.hpp"

namespace sluice {

struct PipelineOptions {
  uint64_t default_max_flows = 65536;  // flow slots for a keyed rule without max-flows
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
};

struct Verdict {
  enum class Kind : uint8_t { forward, drop };
  Kind kind = Kind::forward;
  uint64_t depart_ns = 0;  // == now_ns unless a leaky-bucket rule delayed the packet
};

class Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> create(RuleSet rules, const PipelineOptions& opts);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  const RuleSet& rules() const;
  WorkerCounters make_counters() const { return WorkerCounters(rules().rules.size()); }
  // Longest max-delay of any shaping rule (0 if none): the horizon a timing wheel needs.
  uint64_t max_delay_ns() const;

  // Overrides PipelineOptions::single_writer, for callers that learn the number of threads
  // after creating the pipeline. Only while no thread is calling process().
  void set_single_writer(bool single_writer);

  // One frame. May rewrite the frame in place (DSCP marking). Thread-safe: any number of
  // workers may call it concurrently with their own counters.
  Verdict process(uint8_t* frame, uint32_t len, uint16_t port, uint64_t now_ns,
                  WorkerCounters& counters);

  // Frees flow slots idle longer than their rule's idle-timeout, visiting at most
  // `max_slots` slots from where the previous call stopped. Returns the number freed.
  size_t expire_idle(uint64_t now_ns, size_t max_slots);

  // How often each of `callers` threads should call expire_idle(now, max_slots) so that every
  // keyed rule's table is swept whole at least once per kSweepFraction of its idle-timeout
  // (between 1 ms and 10 s): in [kMinExpireIntervalNs, kMaxExpireIntervalNs]. A sweep faster
  // than that only reads memory: a 1M-flow table is 32 MB, so sweeping it every 0.3 s cost a
  // worker ~5% of its packet rate in cache misses.
  static constexpr uint64_t kSweepFraction = 8;
  static constexpr uint64_t kMinExpireIntervalNs = 10'000;
  static constexpr uint64_t kMaxExpireIntervalNs = 1'000'000;
  uint64_t expire_interval_ns(size_t max_slots, size_t callers) const;

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
  static constexpr size_t kMaxBurst = 64;
  void process_burst(const Frame* frames, size_t n, uint16_t port, uint64_t now_ns,
                     WorkerCounters& counters, Verdict* verdicts);

  CountersSnapshot snapshot(const std::vector<const WorkerCounters*>& workers) const;

  struct Impl;

 private:
  explicit Pipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
