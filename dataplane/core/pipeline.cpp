#include "pipeline.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "classifier.hpp"
#include "flow_key.hpp"
#include "flow_table.hpp"
#include "frame.hpp"
#include "frame_rewrite.hpp"
#include "limiter_profile.hpp"
#include "limiters.hpp"

namespace sluice {
namespace {

// Deepest parent chain a packet is charged along (the loader rejects cycles; this bounds
// the per-packet work and the refund list).
constexpr size_t kMaxChain = 8;

// A rule compiled for the hot path: its profile, and where its bucket words live.
struct CompiledRule {
  const Rule* rule = nullptr;
  sl_rate_profile rate{};
  sl_shaper_profile shaper{};
  sl_meter_profile meter{};
  sl_window_profile window{};
  std::unique_ptr<FlowTable> flows;  // keyed rules; null for key: none
  FlowHashFn hash_fn = nullptr;      // the key mode's hash, the mode's switch folded away
  // key: none - one aggregate bucket shared by every worker (16-aligned for meters). It
  // starts full at its first packet's time, which only then is known.
  alignas(64) std::atomic<uint64_t> aggregate[2] = {};
  mutable std::atomic<int> aggregate_ready{0};  // 0 untouched, 1 initialising, 2 ready
  std::array<int, kMaxChain> chain{};  // this rule, then its parents
  size_t chain_len = 0;
  Sharing sharing = Sharing::shared;
  // An aggregate policer (key: none, token-bucket / gcra / window) with no parent and no
  // child: all of a burst's packets for it can be decided with one charge of its word, in
  // the same order and with the same results as one by one, since no other packet of the
  // burst touches that word.
  bool burstable = false;
  // A policer (token-bucket / gcra / window) without a parent: one bucket to charge and
  // nothing to refund, so finish() takes a short path for it.
  bool lone_policer = false;

  uint64_t cost(uint32_t frame_len) const {
    return rule->cost_unit() == CostUnit::packets ? 1 : uint64_t(frame_len) + rule->overhead_bytes;
  }

  void init_state(std::atomic<uint64_t>* w, uint64_t now_ns) const {
    switch (rule->algorithm) {
      case Algorithm::token_bucket:
        w[0].store(sl_tb_init(&rate, now_ns), std::memory_order_relaxed);
        break;
      case Algorithm::gcra:
        w[0].store(sl_gcra_init(&rate, now_ns), std::memory_order_relaxed);
        break;
      case Algorithm::leaky_bucket:
        w[0].store(sl_gcra_init(&shaper.rate, now_ns), std::memory_order_relaxed);
        break;
      case Algorithm::srtcm:
      case Algorithm::trtcm: {
        sl_meter_state st;
        if (rule->algorithm == Algorithm::srtcm) sl_srtcm_init(&meter, now_ns, &st);
        else sl_trtcm_init(&meter, now_ns, &st);
        w[0].store(st.e0, std::memory_order_relaxed);
        w[1].store(st.e1, std::memory_order_relaxed);
        break;
      }
      case Algorithm::fixed_window:
        w[0].store(sl_fixed_window_init(&window, now_ns), std::memory_order_relaxed);
        break;
      case Algorithm::sliding_window:
        w[0].store(sl_sliding_window_init(&window, now_ns), std::memory_order_relaxed);
        break;
    }
  }

  // Policers and windows: true if conforming (and charged).
  [[gnu::always_inline]] bool police(std::atomic<uint64_t>& w, uint64_t now_ns, uint64_t c) const {
    switch (rule->algorithm) {
      case Algorithm::token_bucket: return token_bucket_charge(rate, w, now_ns, c, sharing);
      case Algorithm::gcra: return gcra_charge(rate, w, now_ns, c, sharing);
      case Algorithm::fixed_window: return fixed_window_charge(window, w, now_ns, c, sharing);
      case Algorithm::sliding_window: return sliding_window_charge(window, w, now_ns, c, sharing);
      default: return false;
    }
  }

  // Burst policing (burstable rules): bit i of the result set if packet i conforms.
  uint64_t police_burst(std::atomic<uint64_t>& w, uint64_t now_ns, const uint64_t* costs,
                        uint32_t n) const {
    switch (rule->algorithm) {
      case Algorithm::token_bucket: return token_bucket_charge_burst(rate, w, now_ns, costs, n, sharing);
      case Algorithm::gcra: return gcra_charge_burst(rate, w, now_ns, costs, n, sharing);
      case Algorithm::fixed_window: return fixed_window_charge_burst(window, w, now_ns, costs, n, sharing);
      case Algorithm::sliding_window:
        return sliding_window_charge_burst(window, w, now_ns, costs, n, sharing);
      default: return 0;
    }
  }

  void refund(std::atomic<uint64_t>& w, uint64_t now_ns, uint64_t c) const {
    switch (rule->algorithm) {
      case Algorithm::token_bucket: return token_bucket_refund(rate, w, now_ns, c, sharing);
      case Algorithm::gcra: return gcra_refund(rate, w, now_ns, c, sharing);
      case Algorithm::leaky_bucket: return shaper_refund(shaper, w, c, sharing);
      case Algorithm::fixed_window: return fixed_window_refund(window, w, now_ns, c, sharing);
      case Algorithm::sliding_window: return sliding_window_refund(window, w, now_ns, c, sharing);
      default: return;
    }
  }
};

// The algorithms CompiledRule::police() and police_burst() decide: a yes/no on one word.
bool is_policer(Algorithm a) {
  return a == Algorithm::token_bucket || a == Algorithm::gcra || a == Algorithm::fixed_window ||
         a == Algorithm::sliding_window;
}

Status compile_profile(CompiledRule& cr) {
  const Rule& r = *cr.rule;
  auto take = [](auto result, auto& into) -> Status {
    if (!result) return result.error();
    into = *result;
    return Ok{};
  };
  switch (r.algorithm) {
    case Algorithm::token_bucket:
    case Algorithm::gcra:
      return take(make_rate_profile(r.rate, r.burst), cr.rate);
    case Algorithm::leaky_bucket:
      return take(make_shaper_profile(r.rate, r.burst, r.max_delay_ns), cr.shaper);
    case Algorithm::srtcm:
      return take(make_srtcm_profile(r.rate, r.burst, r.excess_burst), cr.meter);
    case Algorithm::trtcm:
      return take(make_trtcm_profile(r.rate, r.burst, r.peak_rate, r.peak_burst), cr.meter);
    case Algorithm::fixed_window:
    case Algorithm::sliding_window:
      return take(make_window_profile(r.window_ns, r.limit,
                                      r.algorithm == Algorithm::sliding_window),
                  cr.window);
  }
  return make_error("unknown algorithm");
}

}  // namespace

struct Pipeline::Impl {
  RuleSet rules;
  Classifier classifier;
  std::vector<std::unique_ptr<CompiledRule>> compiled;
  uint64_t hash_seed = 0;
  uint64_t max_delay_ns = 0;
  bool any_burstable = false;  // skip the burst grouping pass when no rule can use it
  std::atomic<size_t> expire_rule{0};

  explicit Impl(RuleSet r) : rules(std::move(r)), classifier(rules.rules) {}

  // The bucket words of a rule for this packet: the aggregate, or the slot of the flow
  // with this hash (created on its first packet). Null when the table has no slot for a
  // new flow.
  static std::atomic<uint64_t>* state_for(const CompiledRule& cr, uint64_t hash, uint64_t now_ns) {
    if (!cr.flows) return aggregate_state(cr, now_ns);
    return cr.flows
        ->find_or_insert(hash, now_ns, [&](std::atomic<uint64_t>* w) { cr.init_state(w, now_ns); })
        .state;
  }

  static std::atomic<uint64_t>* aggregate_state(const CompiledRule& cr, uint64_t now_ns) {
    auto* w = const_cast<std::atomic<uint64_t>*>(cr.aggregate);
    if (cr.aggregate_ready.load(std::memory_order_acquire) == 2) return w;
    int expected = 0;
    if (cr.aggregate_ready.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      cr.init_state(w, now_ns);
      cr.aggregate_ready.store(2, std::memory_order_release);
    }
    // Another worker is initialising: a few instructions away from done.
    while (cr.aggregate_ready.load(std::memory_order_acquire) != 2) {
    }
    return w;
  }

  Verdict act(const Action& a, TrafficCounters& c, uint8_t* frame, const ParsedFrame& pf,
              uint64_t now_ns) {
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
                uint8_t* frame, const ParsedFrame& pf, uint64_t now_ns) {
    auto& word = *reinterpret_cast<MeterWord*>(w);
    uint64_t cost = cr.cost(pf.frame_len);
    sl_colour colour = cr.rule->algorithm == Algorithm::srtcm
                           ? srtcm_charge(cr.meter, word, now_ns, cost, cr.sharing)
                           : trtcm_charge(cr.meter, word, now_ns, cost, cr.sharing);
    const ColourActions& ca = cr.rule->colour_actions;
    c.add(colour == SL_GREEN ? Outcome::green : colour == SL_YELLOW ? Outcome::yellow : Outcome::red,
          pf.frame_len);
    c.add(colour == SL_GREEN ? Outcome::conformed : Outcome::exceeded, pf.frame_len);
    return act(colour == SL_GREEN ? ca.green : colour == SL_YELLOW ? ca.yellow : ca.red, c, frame,
               pf, now_ns);
  }

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

  uint64_t flow_hash(const CompiledRule& cr, const ParsedFrame& pf, size_t idx) const {
    return cr.hash_fn(pf, cr.rule->key_prefix_len, hash_seed + idx);
  }

  void classify(const uint8_t* frame, uint32_t len, uint32_t wire_len, uint16_t port,
                Classified& c) const {
    parse_frame_into(frame, len, wire_len, c.pf);
    c.flow_hash = 0;
    c.decided = -1;
    c.rule = c.pf.status == FrameStatus::ok ? classifier.classify(c.pf, port) : -1;
    if (c.rule < 0) return;
    const CompiledRule& cr = *compiled[size_t(c.rule)];
    if (!cr.flows) return;
    c.flow_hash = flow_hash(cr, c.pf, size_t(c.rule));
    cr.flows->prefetch(c.flow_hash);
  }

  Verdict process(uint8_t* frame, uint32_t len, uint32_t wire_len, uint16_t port,
                  uint64_t now_ns, WorkerCounters& counters) {
    Classified c;
    classify(frame, len, wire_len, port, c);
    return finish(frame, c, now_ns, counters);
  }

  [[gnu::always_inline]] Verdict finish(uint8_t* frame, const Classified& cl, uint64_t now_ns,
                                        WorkerCounters& counters) {
    const ParsedFrame& pf = cl.pf;
    const uint32_t len = pf.frame_len;
    int idx = cl.rule;
    if (idx < 0) {
      TrafficCounters& d = counters.default_rule();
      d.add(Outcome::matched, len);
      if (pf.status != FrameStatus::ok) d.add(Outcome::malformed, len);
      return act(rules.default_action, d, frame, pf, now_ns);
    }
    const CompiledRule& top = *compiled[size_t(idx)];
    TrafficCounters& c = counters.rule(size_t(idx));
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
                                         uint64_t now_ns) {
    const ParsedFrame& pf = cl.pf;
    const uint32_t len = pf.frame_len;
    // Charge the rule, then each parent; a refusal anywhere gives back what was taken
    // below it, so a refused packet charges nothing (SPEC §3 Hierarchy).
    std::array<std::atomic<uint64_t>*, kMaxChain> charged;  // levels [0, level) set
    for (size_t level = 0; level < top.chain_len; ++level) {
      const size_t at = size_t(top.chain[level]);
      const CompiledRule& cr = *compiled[at];
      std::atomic<uint64_t>* w =
          state_for(cr, level == 0 ? cl.flow_hash : (cr.flows ? flow_hash(cr, pf, at) : 0), now_ns);
      if (w == nullptr) {
        refund(top, charged, level, len, now_ns);
        c.add(Outcome::exceeded, len);
        return act(cr.rule->overflow.value_or(cr.rule->action), c, frame, pf, now_ns);
      }
      if (cr.rule->is_meter()) return meter(cr, w, c, frame, pf, now_ns);
      uint64_t cost = cr.cost(len);
      if (cr.rule->algorithm == Algorithm::leaky_bucket) {
        uint64_t delay = 0;
        if (!shaper_charge(cr.shaper, *w, now_ns, cost, &delay, cr.sharing)) {
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
  void charge_burstable(Classified* cl, size_t n, uint64_t now_ns) {
    uint64_t grouped = 0;  // packets already handled
    for (size_t i = 0; i < n; ++i) {
      if ((grouped >> i & 1) || cl[i].rule < 0) continue;
      const CompiledRule& cr = *compiled[size_t(cl[i].rule)];
      if (!cr.burstable) continue;
      uint64_t costs[kMaxBurst];
      uint8_t at[kMaxBurst];
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
              size_t levels, uint32_t len, uint64_t now_ns) {
    for (size_t l = 0; l < levels; ++l) {
      const CompiledRule& cr = *compiled[size_t(top.chain[l])];
      cr.refund(*charged[l], now_ns, cr.cost(len));
    }
  }
};

Result<std::unique_ptr<Pipeline>> Pipeline::create(RuleSet rules, const PipelineOptions& opts) {
  auto impl = std::make_unique<Impl>(std::move(rules));
  impl->hash_seed = opts.hash_seed ? opts.hash_seed : random_hash_seed();
  const auto& rs = impl->rules.rules;
  for (size_t i = 0; i < rs.size(); ++i) {
    auto cr = std::make_unique<CompiledRule>();
    cr->rule = &rs[i];
    cr->sharing = opts.single_writer ? Sharing::single_writer : Sharing::shared;
    cr->hash_fn = flow_hash_fn(rs[i].key);
    if (Status s = compile_profile(*cr); !s)
      return make_error("rule \"" + rs[i].name + "\": " + s.error().message);
    if (opts.stale_read_tolerance_ns > kMaxDelayNs)
      return make_error("stale-read tolerance must be at most 60 s");
    for (sl_rate_profile* p : {&cr->rate, &cr->shaper.rate, &cr->meter.committed, &cr->meter.peak})
      set_stale_read_tolerance(*p, opts.stale_read_tolerance_ns);
    if (rs[i].key != KeyMode::none) {
      uint64_t cap = rs[i].max_flows ? rs[i].max_flows : opts.default_max_flows;
      // Meters keep two bucket words per flow, every other algorithm one.
      cr->flows = std::make_unique<FlowTable>(cap, rs[i].idle_timeout_ns, uint64_t{1'000'000},
                                              rs[i].is_meter() ? 2u : 1u);
      cr->flows->set_single_writer(opts.single_writer);
    }
    for (int at = int(i); at >= 0; at = rs[size_t(at)].parent_index) {
      if (cr->chain_len == kMaxChain)
        return make_error("rule \"" + rs[i].name + "\": parent chain deeper than " +
                          std::to_string(kMaxChain));
      cr->chain[cr->chain_len++] = at;
    }
    if (rs[i].algorithm == Algorithm::leaky_bucket)
      impl->max_delay_ns = std::max(impl->max_delay_ns, rs[i].max_delay_ns);
    impl->compiled.push_back(std::move(cr));
  }
  for (size_t i = 0; i < rs.size(); ++i) {
    CompiledRule& cr = *impl->compiled[i];
    const bool is_parent = std::any_of(rs.begin(), rs.end(),
                                       [&](const Rule& r) { return r.parent_index == int(i); });
    cr.lone_policer = cr.chain_len == 1 && is_policer(rs[i].algorithm);
    cr.burstable = cr.lone_policer && !cr.flows && !is_parent;
    impl->any_burstable = impl->any_burstable || cr.burstable;
  }
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pipeline::~Pipeline() = default;

const RuleSet& Pipeline::rules() const { return impl_->rules; }

void Pipeline::set_single_writer(bool single_writer) {
  for (auto& cr : impl_->compiled) {
    cr->sharing = single_writer ? Sharing::single_writer : Sharing::shared;
    if (cr->flows) cr->flows->set_single_writer(single_writer);
  }
}
uint64_t Pipeline::max_delay_ns() const { return impl_->max_delay_ns; }

Verdict Pipeline::process(uint8_t* frame, uint32_t len, uint16_t port, uint64_t now_ns,
                          WorkerCounters& counters) {
  return impl_->process(frame, len, len, port, now_ns, counters);
}

Verdict Pipeline::process(const Frame& frame, uint16_t port, uint64_t now_ns,
                          WorkerCounters& counters) {
  return impl_->process(frame.data, frame.len, frame.wire_len, port, now_ns, counters);
}

void Pipeline::process_burst(const Frame* frames, size_t n, uint16_t port, uint64_t now_ns,
                             WorkerCounters& counters, Verdict* verdicts) {
  // Raw storage (Classified is an aggregate, so the bytes implicitly hold its objects):
  // classify() writes every field of the entries it uses, so value-initialising the whole
  // array each burst would only be wasted stores.
  alignas(Impl::Classified) unsigned char raw[kMaxBurst * sizeof(Impl::Classified)];
  auto* cl = reinterpret_cast<Impl::Classified*>(raw);
  static_assert(std::is_aggregate_v<Impl::Classified> &&
                std::is_trivially_destructible_v<Impl::Classified>);
  for (size_t done = 0; done < n; done += kMaxBurst) {
    const size_t m = std::min(kMaxBurst, n - done);
    for (size_t i = 0; i < m; ++i)
      impl_->classify(frames[done + i].data, frames[done + i].len, frames[done + i].wire_len,
                      port, cl[i]);
    if (impl_->any_burstable) impl_->charge_burstable(cl, m, now_ns);
    for (size_t i = 0; i < m; ++i)
      verdicts[done + i] = impl_->finish(frames[done + i].data, cl[i], now_ns, counters);
  }
}

size_t Pipeline::expire_idle(uint64_t now_ns, size_t max_slots) {
  auto& rs = impl_->compiled;
  if (rs.empty()) return 0;
  // Round-robin over the keyed rules, one rule's share per call.
  for (size_t tries = 0; tries < rs.size(); ++tries) {
    size_t i = impl_->expire_rule.fetch_add(1, std::memory_order_relaxed) % rs.size();
    if (rs[i]->flows) return rs[i]->flows->expire(now_ns, max_slots);
  }
  return 0;
}

uint64_t Pipeline::expire_interval_ns(size_t max_slots, size_t callers) const {
  // Calls per second the most demanding table needs; round-robin gives each keyed rule one
  // call in `keyed`, and the callers share the work.
  double keyed = 0, worst = 0;
  for (const auto& cr : impl_->compiled) {
    if (!cr->flows) continue;
    keyed += 1;
    const double period_ns =
        std::clamp<double>(double(cr->rule->idle_timeout_ns) / kSweepFraction, 1e6, 1e10);
    const double slots_per_call = double(std::max<size_t>(1, max_slots));
    const double calls = std::ceil(double(cr->flows->slot_count()) / slots_per_call);
    worst = std::max(worst, calls / period_ns);
  }
  if (keyed == 0) return kMaxExpireIntervalNs;
  const double interval = double(std::max<size_t>(1, callers)) / (worst * keyed);
  return uint64_t(std::clamp<double>(interval, kMinExpireIntervalNs, kMaxExpireIntervalNs));
}

CountersSnapshot Pipeline::snapshot(const std::vector<const WorkerCounters*>& workers) const {
  CountersSnapshot snap;
  const auto& rs = impl_->rules.rules;
  for (size_t i = 0; i < rs.size(); ++i) {
    RuleSnapshot r;
    r.name = rs[i].name;
    for (const WorkerCounters* w : workers) r.traffic += w->per_rule[i];
    const auto& flows = impl_->compiled[i]->flows;
    r.active_flows = flows ? flows->active() : 1;  // key: none is one shared bucket
    r.flows_evicted = flows ? flows->evicted() : 0;
    snap.rules.push_back(std::move(r));
  }
  snap.default_rule.name = "default";
  for (const WorkerCounters* w : workers) snap.default_rule.traffic += w->per_rule.back();
  return snap;
}

}  // namespace sluice
