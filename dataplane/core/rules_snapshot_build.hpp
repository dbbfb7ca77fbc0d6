// Building a RulesSnapshot from a rule set and the snapshot it replaces (which states it
// keeps, which it creates, which retire), and what a worker does when it adopts one.
// Internal to the Pipeline (pipeline.cpp); apart so that each file has one job.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline.hpp"
#include "result.hpp"
#include "rules_snapshot.hpp"

namespace sluice {

// Counter slot ids: stable per rule state; a freed id is reused only once no worker counts
// into it any more (Pipeline::apply() with a grace period).
class CounterSlots {
 public:
  uint32_t take() {
    if (!free_.empty()) {
      const uint32_t s = free_.back();
      free_.pop_back();
      return s;
    }
    return high_water_++;
  }
  void give_back(uint32_t slot) { free_.push_back(slot); }
  uint32_t high_water() const { return high_water_; }

 private:
  uint32_t high_water_ = 0;
  std::vector<uint32_t> free_;
};

struct SnapshotContext {
  const PipelineOptions* opts = nullptr;
  bool single_writer = false;
  uint64_t hash_base = 0;
  uint64_t shaping_horizon_ns = 0;  // 0: no bound (the start-up set defines it)
  uint64_t* next_state_id = nullptr;
  CounterSlots* slots = nullptr;
  uint32_t default_slot = 0;
};

// The snapshot for `rules`, reusing the state of every rule of `prev` (may be null) that
// keeps its state identity. On success, *retired lists the states of `prev` it does not
// keep (their final counters to collect). On error nothing changed (slots given back).
Result<std::unique_ptr<RulesSnapshot>> build_snapshot(
    RuleSet rules, const RulesSnapshot* prev, SnapshotContext& ctx,
    std::vector<std::shared_ptr<RetiredRule>>* retired);

// What build_snapshot(rules, &prev, ctx, ...) would refuse, found without building anything:
// the same compile checks (profiles, parent chains, the shaping horizon) and the same memory
// check of the flow tables it would allocate. For a dry run (`config diff`).
Status check_snapshot(const RuleSet& rules, const RulesSnapshot& prev, const SnapshotContext& ctx);

// Carries the state words of the snapshot's kept rules whose profile changed into their new
// profiles at now_ns, once (the first caller does it, any other waits until it is done).
// How a caller waits for another one's conversion: a worker spins (the converter is the other
// worker, on its own CPU, or the control thread, which preempts it); the control thread
// sleeps from the start (it may share the CPU of the very worker that converts).
// none: a caller that must only see it done if nobody else took it (apply(), after its grace
// period: a worker that took it finishes it, and the next apply() waits for that).
enum class ConversionWait { spin, sleep, none };
void run_state_conversions(const RulesSnapshot& snap, uint64_t now_ns, ConversionWait wait);

// Lays `counters` out for `snap`: grows them, folds and clears the slots of retiring rules,
// clears fresh slots.
void adopt_counters(const RulesSnapshot& snap, WorkerCounters& counters);

}  // namespace sluice
