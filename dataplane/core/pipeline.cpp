#include "pipeline.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <deque>
#include <type_traits>

#include "frame_fast_v4.hpp"
#include "pipeline_burst.hpp"
#include "pipeline_run.hpp"
#include "rules_snapshot.hpp"
#include "rules_snapshot_build.hpp"

namespace sluice {
using pipeline_run::Classified;
using pipeline_run::Run;

struct Pipeline::Impl {
  PipelineOptions opts;
  uint64_t hash_base = 0;
  uint64_t shaping_horizon_ns = 0;
  bool single_writer = false;
  GracePeriod* grace = nullptr;
  // The running snapshot: published with a release store, read by workers with an acquire
  // load once per burst loop. `owned` is the same object, for the writer.
  std::atomic<RulesSnapshot*> current{nullptr};
  std::unique_ptr<RulesSnapshot> owned;
  // apply() is serialised, and snapshot() / rules_copy() read the running rules under it.
  mutable std::mutex mu;
  uint64_t next_state_id = 0;
  CounterSlots slots;
  uint32_t default_slot = 0;
  // Without a grace period nobody can say when the one caller has folded a removed rule's
  // counters: its retirements ride on every later snapshot (folding a cleared slot again
  // adds nothing; its slot is never reused).
  std::vector<std::shared_ptr<RetiredRule>> unconfirmed_retired;
  std::deque<std::shared_ptr<RetiredRule>> removed;  // reported by snapshot()
  alignas(64) std::atomic<size_t> expire_cursor{0};

  SnapshotContext context() {
    SnapshotContext c;
    c.opts = &opts;
    c.single_writer = single_writer;
    c.hash_base = hash_base;
    c.shaping_horizon_ns = shaping_horizon_ns;
    c.next_state_id = &next_state_id;
    c.slots = &slots;
    c.default_slot = default_slot;
    return c;
  }
};

Result<std::unique_ptr<Pipeline>> Pipeline::create(RuleSet rules, const PipelineOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->single_writer = opts.single_writer;
  impl->hash_base = opts.hash_seed ? opts.hash_seed : random_hash_seed();
  const size_t n = rules.rules.size();
  SnapshotContext ctx = impl->context();
  ctx.shaping_horizon_ns = opts.shaping_horizon_ns;
  // The start-up rules take slots 0..n-1 in order, the default slot n (WorkerCounters(n)).
  ctx.default_slot = uint32_t(n);
  std::vector<std::shared_ptr<RetiredRule>> none;
  auto snap = build_snapshot(std::move(rules), nullptr, ctx, &none);
  if (!snap) return snap.error();
  impl->default_slot = impl->slots.take();
  (*snap)->counter_slots = impl->slots.high_water();
  impl->shaping_horizon_ns = opts.shaping_horizon_ns != 0
                                 ? opts.shaping_horizon_ns
                                 : std::max((*snap)->max_delay_ns, kDefaultShapingHorizonNs);
  impl->owned = std::move(snap).value();
  impl->current.store(impl->owned.get(), std::memory_order_release);
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pipeline::~Pipeline() = default;

uint64_t snapshot_generation(const RulesSnapshot& snap) { return snap.generation; }

const RuleSet& Pipeline::rules() const { return impl_->owned->rules; }

RuleSet Pipeline::rules_copy() const {
  std::lock_guard lock(impl_->mu);
  return impl_->owned->rules;
}

uint64_t Pipeline::generation() const {
  return impl_->current.load(std::memory_order_acquire)->generation;
}

WorkerCounters Pipeline::make_counters() const {
  std::lock_guard lock(impl_->mu);
  const RulesSnapshot& s = *impl_->owned;
  WorkerCounters c;
  c.per_rule.assign(s.counter_slots, TrafficCounters{});
  c.default_slot = s.default_slot;
  c.generation = s.generation;
  return c;
}

uint64_t Pipeline::max_delay_ns() const { return impl_->owned->max_delay_ns; }
uint64_t Pipeline::shaping_horizon_ns() const { return impl_->shaping_horizon_ns; }

void Pipeline::set_single_writer(bool single_writer) {
  impl_->single_writer = single_writer;
  RulesSnapshot& s = *impl_->owned;
  for (CompiledRule& cr : s.compiled) cr.sharing = single_writer ? Sharing::single_writer : Sharing::shared;
  for (auto& st : s.states)
    if (st->flows) st->flows->set_single_writer(single_writer);
}

void Pipeline::set_grace_period(GracePeriod* grace) { impl_->grace = grace; }

Status Pipeline::check(const RuleSet& next) const {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  return check_snapshot(next, *m.owned, m.context());
}

Result<RulesDiff> Pipeline::apply(RuleSet next, uint64_t now_ns) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  RulesSnapshot& old = *m.owned;
  // The last change's conversion may still be running on a worker (apply() does not wait for
  // it, below): it ends before any word moves on to yet another profile. By now it is almost
  // always long done.
  if (old.conversion_state.load(std::memory_order_acquire) != 2)
    run_state_conversions(old, now_ns, ConversionWait::sleep);
  RulesDiff diff = diff_rules(old.rules, next);
  SnapshotContext ctx = m.context();
  std::vector<std::shared_ptr<RetiredRule>> retired;
  auto built = build_snapshot(std::move(next), &old, ctx, &retired);
  if (!built) return built.error();
  std::unique_ptr<RulesSnapshot> snap = std::move(built).value();
  snap->generation = old.generation + 1;
  snap->applied_ns = now_ns;
  for (const auto& r : retired) m.unconfirmed_retired.push_back(r);
  snap->retiring = m.unconfirmed_retired;

  // Publish: a worker's next enter() runs the new snapshot.
  m.current.store(snap.get(), std::memory_order_release);
  std::unique_ptr<RulesSnapshot> replaced = std::move(m.owned);
  m.owned = std::move(snap);
  if (m.grace) {
    // One grace period: no worker still runs `replaced`, and every worker loads the new
    // snapshot at its next loop, so every packet from now on meets `next`. A second one
    // when rules were removed: every worker online has then entered the new snapshot, so
    // it folded the removed rules' last counts and cleared their slots (now reusable).
    m.grace->wait();
    if (!m.unconfirmed_retired.empty()) m.grace->wait();
  }
  // No worker adopted it (none online, or no grace period: the one caller adopts later):
  // the state conversions happen now, while nobody charges. A worker that took them finishes
  // them without us: every worker is past the old rules, and none charges under the new ones
  // before the conversion ends (enter() waits for it), so the change is in force already.
  // Waiting for it here cost a sleep (~50 us of CPU on this VM) per rule.set.
  run_state_conversions(*m.owned, now_ns, ConversionWait::none);
  replaced.reset();  // frees the states of removed rules with it
  if (m.grace) {
    // Every worker folded and cleared the removed rules' slots: they may serve new rules.
    for (const auto& r : m.unconfirmed_retired) m.slots.give_back(r->counter_slot);
    m.unconfirmed_retired.clear();
  } else if (m.unconfirmed_retired.size() > kRemovedRulesKept) {
    m.unconfirmed_retired.erase(m.unconfirmed_retired.begin(),
                                m.unconfirmed_retired.end() - kRemovedRulesKept);
  }
  for (auto& r : retired) m.removed.push_back(std::move(r));
  while (m.removed.size() > kRemovedRulesKept) m.removed.pop_front();
  return diff;
}

const RulesSnapshot& Pipeline::enter(WorkerCounters& counters, uint64_t now_ns) {
  const RulesSnapshot& s = *impl_->current.load(std::memory_order_acquire);
  if (counters.generation != s.generation || counters.per_rule.size() < s.counter_slots) [[unlikely]] {
    if (s.conversion_state.load(std::memory_order_acquire) != 2)
      run_state_conversions(s, now_ns, ConversionWait::spin);
    adopt_counters(s, counters);
    s.entered.fetch_add(1, std::memory_order_relaxed);
    uint64_t seen = s.last_entered_ns.load(std::memory_order_relaxed);
    while (seen < now_ns &&
           !s.last_entered_ns.compare_exchange_weak(seen, now_ns, std::memory_order_relaxed)) {
    }
  }
  return s;
}

Pipeline::SwapVisibility Pipeline::swap_visibility() const {
  std::lock_guard lock(impl_->mu);
  const RulesSnapshot& s = *impl_->owned;
  SwapVisibility v;
  v.generation = s.generation;
  v.workers_entered = s.entered.load(std::memory_order_relaxed);
  const uint64_t last = s.last_entered_ns.load(std::memory_order_relaxed);
  v.last_entered_after_ns = last > s.applied_ns ? last - s.applied_ns : 0;
  return v;
}

Verdict Pipeline::process(uint8_t* frame, uint32_t len, uint16_t port, uint64_t now_ns,
                          WorkerCounters& counters) {
  return process(Frame{frame, len, len}, port, now_ns, counters);
}

Verdict Pipeline::process(const Frame& frame, uint16_t port, uint64_t now_ns,
                          WorkerCounters& counters) {
  Run run{enter(counters, now_ns)};
  Classified c;
  run.classify(frame.data, frame.len, frame.wire_len, port, c);
  return run.finish(frame.data, c, now_ns, counters);
}

size_t Pipeline::process_burst(const Frame* frames, size_t n, uint16_t port, uint64_t now_ns,
                               WorkerCounters& counters, Verdict* verdicts, VerdictFill fill) {
  return process_burst(enter(counters, now_ns), frames, n, port, now_ns, counters, verdicts, fill);
}

size_t Pipeline::process_burst(const RulesSnapshot& snap, const Frame* frames, size_t n,
                               uint16_t port, uint64_t now_ns, WorkerCounters& counters,
                               Verdict* verdicts, VerdictFill fill) {
  // A chunk's verdicts left unwritten would be wrong if a later chunk returned non-zero.
  if (n > kMaxBurst) fill = VerdictFill::all;
  size_t not_now = 0;
  for (size_t done = 0; done < n; done += kMaxBurst) {
    const size_t m = std::min(kMaxBurst, n - done);
    not_now += pipeline_run::run_burst(snap, FrameArray{frames + done}, m, port, now_ns, counters,
                                       verdicts + done, fill);
  }
  return not_now;
}

size_t Pipeline::expire_idle(uint64_t now_ns, size_t max_slots) {
  return expire_idle(*impl_->current.load(std::memory_order_acquire), now_ns, max_slots);
}

size_t Pipeline::expire_idle(const RulesSnapshot& snap, uint64_t now_ns, size_t max_slots) {
  // Round-robin over the keyed rules only, one rule's share per call: O(max_slots) however
  // many rules exist (a walk over every rule to find a keyed one cost 89% of a replay with
  // 1,000 `key: none` rules).
  if (snap.keyed.empty()) return 0;
  const size_t i = impl_->expire_cursor.fetch_add(1, std::memory_order_relaxed) % snap.keyed.size();
  return snap.keyed[i]->expire(now_ns, max_slots);
}

uint64_t Pipeline::expire_interval_ns(size_t max_slots, size_t callers) const {
  return expire_interval_ns(*impl_->current.load(std::memory_order_acquire), max_slots, callers);
}

uint64_t Pipeline::expire_interval_ns(const RulesSnapshot& snap, size_t max_slots, size_t callers) {
  // Calls per second the most demanding table needs; round-robin gives each keyed rule one
  // call in `keyed`, and the callers share the work. O(keyed rules): once per snapshot.
  double worst = 0;
  const double slots_per_call = double(std::max<size_t>(1, max_slots));
  for (const RulesSnapshot::Sweep& s : snap.sweeps)
    worst = std::max(worst, std::ceil(double(s.slots) / slots_per_call) / s.period_ns);
  if (snap.sweeps.empty()) return kMaxExpireIntervalNs;
  const double keyed = double(snap.sweeps.size());
  const double interval = double(std::max<size_t>(1, callers)) / (worst * keyed);
  return uint64_t(std::clamp<double>(interval, kMinExpireIntervalNs, kMaxExpireIntervalNs));
}

CountersSnapshot Pipeline::snapshot(const std::vector<const WorkerCounters*>& workers) const {
  std::lock_guard lock(impl_->mu);
  const RulesSnapshot& s = *impl_->owned;
  CountersSnapshot snap;
  auto sum_slot = [&](uint32_t slot, TrafficCounters& into) {
    for (const WorkerCounters* w : workers)
      if (slot < w->per_rule.size()) into += w->per_rule[slot];
  };
  const auto& rs = s.rules.rules;
  for (size_t i = 0; i < rs.size(); ++i) {
    RuleSnapshot r;
    r.name = rs[i].name;
    sum_slot(s.compiled[i].counter_slot, r.traffic);
    const FlowTable* flows = s.compiled[i].flows;
    r.active_flows = flows ? flows->active() : 1;  // key: none is one shared bucket
    r.flows_evicted = flows ? flows->evicted() : 0;
    snap.rules.push_back(std::move(r));
  }
  snap.default_rule.name = "default";
  sum_slot(s.default_slot, snap.default_rule.traffic);
  for (const auto& retired : impl_->removed) {
    RuleSnapshot r;
    r.name = retired->name;
    r.traffic = retired->read();
    r.active_flows = 0;
    r.flows_evicted = retired->flows_evicted;
    snap.removed.push_back(std::move(r));
  }
  return snap;
}

std::vector<Pipeline::RuleIdentity> Pipeline::rule_identities() const {
  std::lock_guard lock(impl_->mu);
  const RulesSnapshot& s = *impl_->owned;
  std::vector<RuleIdentity> out;
  for (const CompiledRule& cr : s.compiled) out.push_back({cr.rule->name, cr.state->id, cr.flows != nullptr});
  return out;
}

}  // namespace sluice
