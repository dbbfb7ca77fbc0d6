#include "pipeline.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <deque>
#include <type_traits>

#include "flow_key.hpp"
#include "frame.hpp"
#include "frame_rewrite.hpp"
#include "rules_snapshot.hpp"
#include "rules_snapshot_build.hpp"

namespace sluice {
namespace {

// What the first stage of a packet's processing learns: its parse, its rule and, for a
// keyed rule, its flow hash (with the flow's set already being fetched).
struct Classified {
  ParsedFrame pf;
  int rule = -1;
  uint64_t flow_hash = 0;
  // Set by process_burst for packets of a burstable rule: already charged (1: conformed,
  // 0: refused); -1: finish() charges the packet itself.
  int8_t decided = -1;
};

// The hot path over one snapshot: everything a packet needs, nothing that changes.
struct Run {
  const RulesSnapshot& s;

  static std::atomic<uint64_t>* aggregate_state(const CompiledRule& cr, uint64_t now_ns) {
    RuleState& st = *cr.state;
    if (st.aggregate_ready.load(std::memory_order_acquire) == 2) return st.aggregate;
    int expected = 0;
    if (st.aggregate_ready.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      cr.init_state(st.aggregate, now_ns);
      st.aggregate_ready.store(2, std::memory_order_release);
    }
    // Another worker is initialising: a few instructions away from done.
    while (st.aggregate_ready.load(std::memory_order_acquire) != 2) {
    }
    return st.aggregate;
  }

  // The bucket words of a rule for this packet: the aggregate, or the slot of the flow
  // with this hash (created on its first packet). Null when the table has no slot for a
  // new flow.
  static std::atomic<uint64_t>* state_for(const CompiledRule& cr, uint64_t hash, uint64_t now_ns) {
    if (!cr.flows) return aggregate_state(cr, now_ns);
    return cr.flows
        ->find_or_insert(hash, now_ns, [&](std::atomic<uint64_t>* w) { cr.init_state(w, now_ns); })
        .state;
  }

  // The key mode's hash, inlined (a switch costs less than the call through cr.hash_fn).
  [[gnu::always_inline]] static uint64_t flow_hash(const CompiledRule& cr, const ParsedFrame& pf) {
    const uint8_t bits = cr.key_prefix_len;
    const FlowHashKeys& seed = cr.hash_keys;
    switch (cr.key_mode) {
      case KeyMode::five_tuple: return flow_hash_keyed_of<KeyMode::five_tuple>(pf, bits, seed);
      case KeyMode::src_ip: return flow_hash_keyed_of<KeyMode::src_ip>(pf, bits, seed);
      case KeyMode::dst_ip: return flow_hash_keyed_of<KeyMode::dst_ip>(pf, bits, seed);
      case KeyMode::src_dst: return flow_hash_keyed_of<KeyMode::src_dst>(pf, bits, seed);
      case KeyMode::src_prefix: return flow_hash_keyed_of<KeyMode::src_prefix>(pf, bits, seed);
      case KeyMode::dst_prefix: return flow_hash_keyed_of<KeyMode::dst_prefix>(pf, bits, seed);
      case KeyMode::none: break;
    }
    return flow_hash_keyed_of<KeyMode::none>(pf, bits, seed);
  }

  Verdict act(const Action& a, TrafficCounters& c, uint8_t* frame, const ParsedFrame& pf,
              uint64_t now_ns) const {
    uint32_t len = pf.frame_len;
    switch (a.kind) {
      case ActionKind::drop:
        c.add(Outcome::dropped, len);
        return {Verdict::Kind::drop, now_ns};
      case ActionKind::mark_dscp:
        if (pf.status == FrameStatus::ok && mark_dscp(frame, len, pf, a.dscp)) {
          c.add(Outcome::marked, len);
          return {Verdict::Kind::forward, now_ns};
        }
        break;  // not IP: nothing to mark, it passes
      case ActionKind::pass:
        break;
    }
    c.add(Outcome::passed, len);
    return {Verdict::Kind::forward, now_ns};
  }

  Verdict meter(const CompiledRule& cr, std::atomic<uint64_t>* w, TrafficCounters& c,
                uint8_t* frame, const ParsedFrame& pf, uint64_t now_ns) const {
    auto& word = *reinterpret_cast<MeterWord*>(w);
    uint64_t cost = cr.cost(pf.frame_len);
    sl_colour colour = cr.rule->algorithm == Algorithm::srtcm
                           ? srtcm_charge(cr.p.meter, word, now_ns, cost, cr.sharing)
                           : trtcm_charge(cr.p.meter, word, now_ns, cost, cr.sharing);
    const ColourActions& ca = cr.rule->colour_actions;
    c.add(colour == SL_GREEN ? Outcome::green : colour == SL_YELLOW ? Outcome::yellow : Outcome::red,
          pf.frame_len);
    c.add(colour == SL_GREEN ? Outcome::conformed : Outcome::exceeded, pf.frame_len);
    return act(colour == SL_GREEN ? ca.green : colour == SL_YELLOW ? ca.yellow : ca.red, c, frame,
               pf, now_ns);
  }

  void classify(const uint8_t* frame, uint32_t len, uint32_t wire_len, uint16_t port,
                Classified& c) const {
    parse_frame_into(frame, len, wire_len, c.pf);
    c.flow_hash = 0;
    c.decided = -1;
    c.rule = c.pf.status == FrameStatus::ok ? s.classifier.classify(c.pf, port) : -1;
    if (c.rule < 0) return;
    const CompiledRule& cr = s.compiled[size_t(c.rule)];
    if (!cr.flows) return;
    c.flow_hash = flow_hash(cr, c.pf);
    cr.flows->prefetch(c.flow_hash);
  }

  [[gnu::always_inline]] Verdict finish(uint8_t* frame, const Classified& cl, uint64_t now_ns,
                                        WorkerCounters& counters) const {
    const ParsedFrame& pf = cl.pf;
    const uint32_t len = pf.frame_len;
    int idx = cl.rule;
    if (idx < 0) {
      TrafficCounters& d = counters.default_rule();
      d.add(Outcome::matched, len);
      if (pf.status != FrameStatus::ok) d.add(Outcome::malformed, len);
      return act(s.rules.default_action, d, frame, pf, now_ns);
    }
    const CompiledRule& top = s.compiled[size_t(idx)];
    TrafficCounters& c = counters.rule(top.counter_slot);
    c.add(Outcome::matched, len);
    if (cl.decided >= 0) {
      if (cl.decided == 0) {
        c.add(Outcome::exceeded, len);
        return act(top.rule->action, c, frame, pf, now_ns);
      }
      c.add(Outcome::conformed, len);
      c.add(Outcome::passed, len);
      return {Verdict::Kind::forward, now_ns};
    }

    if (top.lone_policer) {
      std::atomic<uint64_t>* w = state_for(top, cl.flow_hash, now_ns);
      if (w != nullptr && top.police(*w, now_ns, top.cost(len))) {
        c.add(Outcome::conformed, len);
        c.add(Outcome::passed, len);
        return {Verdict::Kind::forward, now_ns};
      }
      c.add(Outcome::exceeded, len);
      const Rule& r = *top.rule;
      return act(w == nullptr ? r.overflow.value_or(r.action) : r.action, c, frame, pf, now_ns);
    }
    return charge_chain(frame, cl, top, c, now_ns);
  }

  // Meters, shapers and rules with parents: the general walk, kept out of line so that
  // finish(), inlined into the burst loop, stays small for the common rules above.
  [[gnu::noinline]] Verdict charge_chain(uint8_t* frame, const Classified& cl,
                                         const CompiledRule& top, TrafficCounters& c,
                                         uint64_t now_ns) const {
    const ParsedFrame& pf = cl.pf;
    const uint32_t len = pf.frame_len;
    // Charge the rule, then each parent; a refusal anywhere gives back what was taken
    // below it, so a refused packet charges nothing (SPEC §3 Hierarchy).
    std::array<std::atomic<uint64_t>*, kMaxChain> charged;  // levels [0, level) set
    for (size_t level = 0; level < top.chain_len; ++level) {
      const CompiledRule& cr = s.compiled[size_t(top.chain[level])];
      std::atomic<uint64_t>* w =
          state_for(cr, level == 0 ? cl.flow_hash : (cr.flows ? flow_hash(cr, pf) : 0), now_ns);
      if (w == nullptr) {
        refund(top, charged, level, len, now_ns);
        c.add(Outcome::exceeded, len);
        return act(cr.rule->overflow.value_or(cr.rule->action), c, frame, pf, now_ns);
      }
      if (cr.rule->is_meter()) return meter(cr, w, c, frame, pf, now_ns);
      uint64_t cost = cr.cost(len);
      if (cr.rule->algorithm == Algorithm::leaky_bucket) {
        uint64_t delay = 0;
        if (!shaper_charge(cr.p.shaper, *w, now_ns, cost, &delay, cr.sharing)) {
          refund(top, charged, level, len, now_ns);
          c.add(Outcome::exceeded, len);
          c.add(Outcome::dropped, len);
          return {Verdict::Kind::drop, now_ns};
        }
        if (delay > 0) {
          c.add(Outcome::exceeded, len);
          c.add(Outcome::delayed, len);
          return {Verdict::Kind::forward, now_ns + delay};
        }
      } else if (!cr.police(*w, now_ns, cost)) {
        refund(top, charged, level, len, now_ns);
        c.add(Outcome::exceeded, len);
        return act(cr.rule->action, c, frame, pf, now_ns);
      }
      charged[level] = w;
    }
    c.add(Outcome::conformed, len);
    c.add(Outcome::passed, len);
    return {Verdict::Kind::forward, now_ns};
  }

  // Charges the packets of each burstable rule in this burst with one charge of its word
  // (one compare-and-swap for the lot when workers share it, instead of one per packet).
  void charge_burstable(Classified* cl, size_t n, uint64_t now_ns) const {
    uint64_t grouped = 0;  // packets already handled
    for (size_t i = 0; i < n; ++i) {
      if ((grouped >> i & 1) || cl[i].rule < 0) continue;
      const CompiledRule& cr = s.compiled[size_t(cl[i].rule)];
      if (!cr.burstable) continue;
      uint64_t costs[Pipeline::kMaxBurst];
      uint8_t at[Pipeline::kMaxBurst];
      uint32_t k = 0;
      for (size_t j = i; j < n; ++j) {
        if (cl[j].rule != cl[i].rule) continue;
        costs[k] = cr.cost(cl[j].pf.frame_len);
        at[k++] = uint8_t(j);
        grouped |= uint64_t{1} << j;
      }
      if (k == 1) {  // alone in its burst: finish() charges it like any other packet
        continue;
      }
      const uint64_t mask = cr.police_burst(*aggregate_state(cr, now_ns), now_ns, costs, k);
      for (uint32_t q = 0; q < k; ++q) cl[at[q]].decided = int8_t(mask >> q & 1);
    }
  }

  void refund(const CompiledRule& top, const std::array<std::atomic<uint64_t>*, kMaxChain>& charged,
              size_t levels, uint32_t len, uint64_t now_ns) const {
    for (size_t l = 0; l < levels; ++l) {
      const CompiledRule& cr = s.compiled[size_t(top.chain[l])];
      cr.refund(*charged[l], now_ns, cr.cost(len));
    }
  }
};

}  // namespace

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

Result<RulesDiff> Pipeline::apply(RuleSet next, uint64_t now_ns) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  RulesSnapshot& old = *m.owned;
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
  // the state conversions happen now, while nobody charges.
  run_state_conversions(*m.owned, now_ns);
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
    if (s.conversion_state.load(std::memory_order_acquire) != 2) run_state_conversions(s, now_ns);
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

void Pipeline::process_burst(const Frame* frames, size_t n, uint16_t port, uint64_t now_ns,
                             WorkerCounters& counters, Verdict* verdicts) {
  process_burst(enter(counters, now_ns), frames, n, port, now_ns, counters, verdicts);
}

void Pipeline::process_burst(const RulesSnapshot& snap, const Frame* frames, size_t n,
                             uint16_t port, uint64_t now_ns, WorkerCounters& counters,
                             Verdict* verdicts) {
  if (snap.rules_free_default) [[unlikely]] {
    process_burst_default_only(snap, frames, n, now_ns, counters, verdicts);
    return;
  }
  const Run run{snap};
  // Raw storage (Classified is an aggregate, so the bytes implicitly hold its objects):
  // classify() writes every field of the entries it uses, so value-initialising the whole
  // array each burst would only be wasted stores.
  alignas(Classified) unsigned char raw[kMaxBurst * sizeof(Classified)];
  auto* cl = reinterpret_cast<Classified*>(raw);
  static_assert(std::is_aggregate_v<Classified> && std::is_trivially_destructible_v<Classified>);
  for (size_t done = 0; done < n; done += kMaxBurst) {
    const size_t m = std::min(kMaxBurst, n - done);
    for (size_t i = 0; i < m; ++i)
      run.classify(frames[done + i].data, frames[done + i].len, frames[done + i].wire_len, port,
                   cl[i]);
    if (snap.any_burstable) run.charge_burstable(cl, m, now_ns);
    for (size_t i = 0; i < m; ++i)
      verdicts[done + i] = run.finish(frames[done + i].data, cl[i], now_ns, counters);
  }
}

// No rule, and a default action that needs no field (pass or drop): every packet takes the
// default, so the burst needs only each frame's well-formedness (for `malformed`) and its
// length, and the default's counters take one add per outcome per burst. Same counts and
// verdicts as finish() gives each packet.
void Pipeline::process_burst_default_only(const RulesSnapshot& snap, const Frame* frames,
                                          size_t n, uint64_t now_ns, WorkerCounters& counters,
                                          Verdict* verdicts) {
  const bool drop = snap.rules.default_action.kind == ActionKind::drop;
  const Verdict v{drop ? Verdict::Kind::drop : Verdict::Kind::forward, now_ns};
  uint64_t bytes = 0, malformed = 0, malformed_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Frame& f = frames[i];
    const uint32_t len = std::max(f.len, f.wire_len);
    bytes += len;
    if (!frame_is_well_formed(f.data, f.len, f.wire_len)) [[unlikely]] {
      ++malformed;
      malformed_bytes += len;
    }
    verdicts[i] = v;
  }
  TrafficCounters& d = counters.default_rule();
  const size_t taken = size_t(drop ? Outcome::dropped : Outcome::passed);
  for (size_t o : {size_t(Outcome::matched), taken}) {
    d.packets[o] += n;
    d.bytes[o] += bytes;
  }
  d.packets[size_t(Outcome::malformed)] += malformed;
  d.bytes[size_t(Outcome::malformed)] += malformed_bytes;
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
