#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>
#include <thread>

#include "bucket_convert.hpp"
#include "dense_key.hpp"
#include "sleep_backoff.hpp"
#include "limiter_profile.hpp"
#include "memory_budget.hpp"
#include "rules_diff.hpp"
#include "rules_snapshot_build.hpp"

namespace sluice {

void RetiredRule::fold(const TrafficCounters& t) {
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    if (t.packets[i]) packets[i].fetch_add(t.packets[i], std::memory_order_relaxed);
    if (t.bytes[i]) bytes[i].fetch_add(t.bytes[i], std::memory_order_relaxed);
  }
}

TrafficCounters RetiredRule::read() const {
  TrafficCounters t;
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    t.packets[i] = packets[i].load(std::memory_order_relaxed);
    t.bytes[i] = bytes[i].load(std::memory_order_relaxed);
  }
  return t;
}

void CompiledRule::init_state(std::atomic<uint64_t>* w, uint64_t now_ns) const {
  switch (rule->algorithm) {
    case Algorithm::token_bucket:
      w[0].store(sl_tb_init(&p.rate, now_ns), std::memory_order_relaxed);
      break;
    case Algorithm::gcra:
      w[0].store(sl_gcra_init(&p.rate, now_ns), std::memory_order_relaxed);
      break;
    case Algorithm::leaky_bucket:
      w[0].store(sl_gcra_init(&p.shaper.rate, now_ns), std::memory_order_relaxed);
      break;
    case Algorithm::srtcm:
    case Algorithm::trtcm: {
      sl_meter_state st;
      if (rule->algorithm == Algorithm::srtcm) sl_srtcm_init(&p.meter, now_ns, &st);
      else sl_trtcm_init(&p.meter, now_ns, &st);
      w[0].store(st.e0, std::memory_order_relaxed);
      w[1].store(st.e1, std::memory_order_relaxed);
      break;
    }
    case Algorithm::fixed_window:
      w[0].store(sl_fixed_window_init(&p.window, now_ns), std::memory_order_relaxed);
      break;
    case Algorithm::sliding_window:
      w[0].store(sl_sliding_window_init(&p.window, now_ns), std::memory_order_relaxed);
      break;
  }
}

uint64_t CompiledRule::police_burst(std::atomic<uint64_t>& w, uint64_t now_ns,
                                    const uint64_t* costs, uint32_t n) const {
  switch (rule->algorithm) {
    case Algorithm::token_bucket: return token_bucket_charge_burst(p.rate, w, now_ns, costs, n, sharing);
    case Algorithm::gcra: return gcra_charge_burst(p.rate, w, now_ns, costs, n, sharing);
    case Algorithm::fixed_window: return fixed_window_charge_burst(p.window, w, now_ns, costs, n, sharing);
    case Algorithm::sliding_window:
      return sliding_window_charge_burst(p.window, w, now_ns, costs, n, sharing);
    default: return 0;
  }
}

void CompiledRule::refund(std::atomic<uint64_t>& w, uint64_t now_ns, uint64_t c) const {
  switch (rule->algorithm) {
    case Algorithm::token_bucket: return token_bucket_refund(p.rate, w, now_ns, c, sharing);
    case Algorithm::gcra: return gcra_refund(p.rate, w, now_ns, c, sharing);
    case Algorithm::leaky_bucket: return shaper_refund(p.shaper, w, c, sharing);
    case Algorithm::fixed_window: return fixed_window_refund(p.window, w, now_ns, c, sharing);
    case Algorithm::sliding_window: return sliding_window_refund(p.window, w, now_ns, c, sharing);
    default: return;
  }
}

namespace {

// The algorithms CompiledRule::police() and police_burst() decide: a yes/no on one word.
bool is_policer(Algorithm a) {
  return a == Algorithm::token_bucket || a == Algorithm::gcra || a == Algorithm::fixed_window ||
         a == Algorithm::sliding_window;
}


template <class T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Whether the profile a rule is charged with differs (then its words need converting).
bool profile_changed(Algorithm a, const RuleProfiles& x, const RuleProfiles& y) {
  switch (a) {
    case Algorithm::token_bucket:
    case Algorithm::gcra: return !same_bytes(x.rate, y.rate);
    case Algorithm::leaky_bucket: return !same_bytes(x.shaper, y.shaper);
    case Algorithm::srtcm:
    case Algorithm::trtcm: return !same_bytes(x.meter, y.meter);
    case Algorithm::fixed_window:
    case Algorithm::sliding_window: return !same_bytes(x.window, y.window);
  }
  return true;
}

// The fields compile_profile reads: equal ones compile to the same profile.
bool same_profile_fields(const Rule& a, const Rule& b) {
  return a.algorithm == b.algorithm && a.rate == b.rate && a.burst == b.burst &&
         a.excess_burst == b.excess_burst && a.peak_rate == b.peak_rate &&
         a.peak_burst == b.peak_burst && a.window_ns == b.window_ns && a.limit == b.limit &&
         a.limit_unit == b.limit_unit && a.max_delay_ns == b.max_delay_ns;
}

std::string duration_text(uint64_t ns) {
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  if (ns % 1000 == 0) return std::to_string(ns / 1000) + "us";
  return std::to_string(ns) + "ns";
}

Result<std::shared_ptr<RuleState>> new_state(const Rule& r, SnapshotContext& ctx) {
  auto st = std::make_shared<RuleState>();
  st->id = (*ctx.next_state_id)++;
  // Per state, not per position: a rule keeps its seed (and so its flows' places) whatever
  // moves around it. The start-up rules get base + position, as before states existed.
  st->hash_seed = ctx.hash_base + st->id;
  if (r.key != KeyMode::none) {
    const uint64_t cap = r.max_flows ? r.max_flows : ctx.opts->default_max_flows;
    // Meters keep two bucket words per flow, every other algorithm one.
    // A key the match pins to a range within capacity: a dense table (dense_key.hpp).
    auto flows = FlowTable::create(cap, r.idle_timeout_ns, uint64_t{1'000'000},
                                   r.is_meter() ? 2u : 1u, FlowTable::kSlack,
                                   dense_key_of(r, cap).slots);
    if (!flows) return flows.error();
    st->flows = std::make_unique<FlowTable>(std::move(flows).value());
    st->flows->set_single_writer(ctx.single_writer);
  }
  return st;
}

}  // namespace

Status compile_profile(const Rule& r, RuleProfiles& p) {
  auto take = [](auto result, auto& into) -> Status {
    if (!result) return result.error();
    into = *result;
    return Ok{};
  };
  switch (r.algorithm) {
    case Algorithm::token_bucket:
    case Algorithm::gcra:
      return take(make_rate_profile(r.rate, r.burst), p.rate);
    case Algorithm::leaky_bucket:
      return take(make_shaper_profile(r.rate, r.burst, r.max_delay_ns), p.shaper);
    case Algorithm::srtcm:
      return take(make_srtcm_profile(r.rate, r.burst, r.excess_burst), p.meter);
    case Algorithm::trtcm:
      return take(make_trtcm_profile(r.rate, r.burst, r.peak_rate, r.peak_burst), p.meter);
    case Algorithm::fixed_window:
    case Algorithm::sliding_window:
      return take(make_window_profile(r.window_ns, r.limit,
                                      r.algorithm == Algorithm::sliding_window),
                  p.window);
  }
  return make_error("unknown algorithm");
}

namespace {

// Compiles rule i of `rs` into `cr` (its profiles, parent chain, sharing and key) and raises
// *max_delay_ns to a shaping rule's max-delay. Refuses what the dataplane cannot run: a profile
// the bucket arithmetic cannot hold, a parent chain deeper than kMaxChain, a max-delay beyond
// the shaping horizon. Nothing but `cr` and *max_delay_ns changes.
Status compile_rule(const std::vector<Rule>& rs, size_t i, const RulesSnapshot* prev, int prev_at,
                    const SnapshotContext& ctx, CompiledRule& cr, uint64_t* max_delay_ns) {
  const PipelineOptions& opts = *ctx.opts;
  cr.rule = &rs[i];
  cr.sharing = ctx.single_writer ? Sharing::single_writer : Sharing::shared;
  cr.hash_fn = flow_hash_fn(rs[i].key);
  cr.key_mode = rs[i].key;
  cr.key_prefix_len = rs[i].key_prefix_len;
  cr.cost_in_packets = rs[i].cost_unit() == CostUnit::packets;
  cr.overhead_bytes = rs[i].overhead_bytes;
  if (prev_at >= 0 && same_profile_fields(prev->rules.rules[size_t(prev_at)], rs[i])) {
    // Compiled before from the same fields, with the same options.
    cr.p = prev->compiled[size_t(prev_at)].p;
  } else {
    if (Status s = compile_profile(rs[i], cr.p); !s)
      return invalid_input("rule \"" + rs[i].name + "\": " + s.error().message);
    for (sl_rate_profile* p : {&cr.p.rate, &cr.p.shaper.rate, &cr.p.meter.committed, &cr.p.meter.peak})
      set_stale_read_tolerance(*p, opts.stale_read_tolerance_ns);
  }
  for (int at = int(i); at >= 0; at = rs[size_t(at)].parent_index) {
    if (cr.chain_len == kMaxChain)
      return invalid_input("rule \"" + rs[i].name + "\": parent chain deeper than " +
                           std::to_string(kMaxChain));
    cr.chain[cr.chain_len++] = at;
  }
  if (rs[i].algorithm == Algorithm::leaky_bucket) {
    if (ctx.shaping_horizon_ns != 0 && rs[i].max_delay_ns > ctx.shaping_horizon_ns)
      return invalid_input("rule \"" + rs[i].name + "\": max-delay " +
                           duration_text(rs[i].max_delay_ns) + " is beyond the shaping horizon of " +
                           duration_text(ctx.shaping_horizon_ns) +
                           " this dataplane was started with (its timing wheels hold no longer "
                           "delays; sluiced's --max-delay raises it)");
    *max_delay_ns = std::max(*max_delay_ns, rs[i].max_delay_ns);
  }
  return Ok{};
}

// Whether rule i keeps the state of the rule at prev_at of `prev` (-1: none there).
bool keeps_state(const std::vector<Rule>& rs, size_t i, const RulesSnapshot* prev, int prev_at) {
  return prev_at >= 0 && same_state_identity(prev->rules.rules[size_t(prev_at)], rs[i]);
}

// Refuses, before any is allocated, the flow tables of the rules that take a new state when
// they need more memory than ctx's memory_available says there is (kept states need none).
Status check_new_table_memory(const std::vector<Rule>& rs, const RulesSnapshot* prev,
                              const std::vector<int>& prev_at, const SnapshotContext& ctx) {
  const PipelineOptions& opts = *ctx.opts;
  if (!opts.memory_available) return Ok{};
  FlowMemory need;
  for (size_t i = 0; i < rs.size(); ++i)
    if (!keeps_state(rs, i, prev, prev_at[i])) add_flow_table(need, rs[i], opts.default_max_flows);
  if (need.bytes == 0) return Ok{};
  const std::optional<uint64_t> available = opts.memory_available();
  if (!available) return Ok{};
  return check_flow_memory(need, *available, opts.default_max_flows_option);
}

Status check_tolerance(const PipelineOptions& opts) {
  if (opts.stale_read_tolerance_ns > kMaxDelayNs)
    return invalid_input("stale-read tolerance must be at most 60 s");
  return Ok{};
}

}  // namespace

Status check_snapshot(const RuleSet& rules, const RulesSnapshot& prev, const SnapshotContext& ctx) {
  if (Status s = check_tolerance(*ctx.opts); !s) return s;
  const std::vector<int> prev_at = positions_by_name(prev.rules, rules);
  uint64_t max_delay_ns = 0;
  for (size_t i = 0; i < rules.rules.size(); ++i) {
    CompiledRule scratch;
    if (Status s = compile_rule(rules.rules, i, &prev, prev_at[i], ctx, scratch, &max_delay_ns); !s)
      return s;
  }
  return check_new_table_memory(rules.rules, &prev, prev_at, ctx);
}

Result<std::unique_ptr<RulesSnapshot>> build_snapshot(
    RuleSet rules, const RulesSnapshot* prev, SnapshotContext& ctx,
    std::vector<std::shared_ptr<RetiredRule>>* retired) {
  if (Status s = check_tolerance(*ctx.opts); !s) return s.error();
  const bool same_matches =
      prev != nullptr && prev->rules.rules.size() == rules.rules.size() &&
      std::equal(rules.rules.begin(), rules.rules.end(), prev->rules.rules.begin(),
                 [](const Rule& a, const Rule& b) { return a.match == b.match; });
  auto snap = same_matches ? std::make_unique<RulesSnapshot>(std::move(rules), prev->classifier)
                           : std::make_unique<RulesSnapshot>(std::move(rules));
  const auto& rs = snap->rules.rules;
  snap->compiled.resize(rs.size());
  snap->states.reserve(rs.size());
  // Each rule's place in `prev`, by name (-1: new).
  const std::vector<int> prev_at =
      prev ? positions_by_name(prev->rules, snap->rules) : std::vector<int>(rs.size(), -1);
  // Compile everything first: an error here must leave no state behind.
  for (size_t i = 0; i < rs.size(); ++i)
    if (Status s = compile_rule(rs, i, prev, prev_at[i], ctx, snap->compiled[i], &snap->max_delay_ns); !s)
      return s.error();
  if (Status s = check_new_table_memory(rs, prev, prev_at, ctx); !s) return s.error();

  // States: kept by name and identity, or new. New ones take counter slots, given back if
  // anything below fails.
  std::vector<bool> prev_kept(prev ? prev->compiled.size() : 0, false);
  std::vector<uint32_t> taken;
  const uint64_t first_id = *ctx.next_state_id;
  // On a refusal: the new states' counter slots and ids go back.
  auto undo_new_states = [&] {
    for (uint32_t s : taken) ctx.slots->give_back(s);
    *ctx.next_state_id = first_id;
  };
  for (size_t i = 0; i < rs.size(); ++i) {
    CompiledRule& cr = snap->compiled[i];
    std::shared_ptr<RuleState> st;
    if (keeps_state(rs, i, prev, prev_at[i])) {
      const size_t j = size_t(prev_at[i]);
      st = prev->states[j];
      prev_kept[j] = true;
      if (profile_changed(rs[i].algorithm, prev->compiled[j].p, cr.p))
        snap->conversions.push_back({i, prev->compiled[j].p});
    }
    if (!st) {
      auto made = new_state(rs[i], ctx);
      if (!made) {
        undo_new_states();
        return make_error("rule \"" + rs[i].name + "\": cannot create its flow table: " +
                              made.error().message, made.error().kind);
      }
      st = std::move(made).value();
      st->counter_slot = ctx.slots->take();
      taken.push_back(st->counter_slot);
      snap->fresh_slots.push_back(st->counter_slot);
    }
    cr.state = st.get();
    cr.flows = st->flows.get();
    // The table's own range: a kept state's rule has the same match and key
    // (same_state_identity), and its table the capacity it was made with.
    if (cr.flows && cr.flows->dense_slots() != 0) {
      cr.dense = dense_key_of(rs[i], cr.flows->capacity());
      if (cr.dense.slots != cr.flows->dense_slots()) {
        undo_new_states();
        return make_error("rule \"" + rs[i].name + "\": its flow table is dense for " +
                          std::to_string(cr.flows->dense_slots()) + " keys, the rule has " +
                          std::to_string(cr.dense.slots));
      }
    }
    cr.hash_seed = st->hash_seed;
    cr.hash_keys = flow_hash_keys(st->hash_seed);
    cr.counter_slot = st->counter_slot;
    snap->states.push_back(std::move(st));
  }
  if (!snap->conversions.empty()) snap->conversion_state.store(0, std::memory_order_relaxed);

  for (size_t j = 0; j < prev_kept.size(); ++j) {
    if (prev_kept[j]) continue;
    const RuleState& st = *prev->states[j];
    auto r = std::make_shared<RetiredRule>();
    r->name = prev->rules.rules[j].name;
    r->counter_slot = st.counter_slot;
    r->flows_evicted = st.flows ? st.flows->evicted() : 0;
    retired->push_back(std::move(r));
  }

  snap->default_slot = ctx.default_slot;
  snap->counter_slots = ctx.slots->high_water();
  std::vector<bool> is_parent(rs.size(), false);  // one pass, not one per rule (n^2 at 10k rules)
  for (const Rule& r : rs)
    if (r.parent_index >= 0 && size_t(r.parent_index) < rs.size()) is_parent[size_t(r.parent_index)] = true;
  for (size_t i = 0; i < rs.size(); ++i) {
    CompiledRule& cr = snap->compiled[i];
    cr.lone_policer = cr.chain_len == 1 && is_policer(rs[i].algorithm);
    cr.burstable = cr.lone_policer && !cr.flows && !is_parent[i];
    snap->any_burstable = snap->any_burstable || cr.burstable;
    cr.fast_srtcm = cr.chain_len == 1 && cr.flows && rs[i].algorithm == Algorithm::srtcm;
    cr.green_passes = rs[i].colour_actions.green.kind == ActionKind::pass;
    cr.fast_common_ipv4 =
        cr.fast_srtcm ||
        (cr.lone_policer && cr.flows && rs[i].algorithm == Algorithm::token_bucket);
    snap->fast_common_ipv4 = snap->fast_common_ipv4 || cr.fast_common_ipv4;
    snap->any_dense_fast = snap->any_dense_fast || (cr.fast_common_ipv4 && cr.dense.slots != 0);
    if (cr.flows) {
      snap->keyed.push_back(cr.flows);
      snap->sweeps.push_back(
          {cr.flows->slot_count(),
           std::clamp<double>(double(rs[i].idle_timeout_ns) / Pipeline::kSweepFraction, 1e6, 1e10)});
    }
  }
  const ActionKind default_kind = snap->rules.default_action.kind;
  snap->fast_common_ipv4 = snap->fast_common_ipv4 && !snap->any_burstable;
  if (snap->fast_common_ipv4) {
    std::optional<KeyMode> uniform;
    bool alike = true;
    for (const CompiledRule& cr : snap->compiled) {
      if (!cr.fast_common_ipv4) continue;
      if (cr.fast_srtcm || (uniform && *uniform != cr.key_mode)) alike = false;
      uniform = cr.key_mode;
    }
    if (alike && uniform) snap->uniform_token_bucket_key = *uniform;
  }
  snap->rules_free_default =
      rs.empty() && (default_kind == ActionKind::pass || default_kind == ActionKind::drop);
  return snap;
}

namespace {

void convert_words(const CompiledRule& cr, const RuleProfiles& from, std::atomic<uint64_t>* w,
                   uint64_t now_ns) {
  const RuleProfiles& to = cr.p;
  auto one = [&](auto&& convert) {
    detail::update_word(w[0], cr.sharing, [&](uint64_t cur, uint64_t* next) {
      *next = convert(cur);
      return true;
    });
  };
  auto two = [&](auto&& convert) {
    detail::update_meter(*reinterpret_cast<MeterWord*>(w), cr.sharing,
                         [&](const sl_meter_state& st, sl_meter_state* next) {
                           *next = convert(st);
                           return true;
                         });
  };
  switch (cr.rule->algorithm) {
    case Algorithm::token_bucket:
      return one([&](uint64_t x) { return convert_token_bucket_word(from.rate, to.rate, x, now_ns); });
    case Algorithm::gcra:
      return one([&](uint64_t x) { return convert_gcra_word(from.rate, to.rate, x, now_ns); });
    case Algorithm::leaky_bucket:
      return one([&](uint64_t x) { return convert_shaper_word(from.shaper, to.shaper, x, now_ns); });
    case Algorithm::fixed_window:
      return one([&](uint64_t x) { return convert_fixed_window_word(from.window, to.window, x); });
    case Algorithm::sliding_window:
      return one([&](uint64_t x) { return convert_sliding_window_word(from.window, to.window, x); });
    case Algorithm::srtcm:
      return two([&](const sl_meter_state& s) { return convert_srtcm_state(from.meter, to.meter, s, now_ns); });
    case Algorithm::trtcm:
      return two([&](const sl_meter_state& s) { return convert_trtcm_state(from.meter, to.meter, s, now_ns); });
  }
}

void convert_rule(const CompiledRule& cr, const RuleProfiles& from, uint64_t now_ns) {
  if (cr.flows) {
    const FlowTable& t = *cr.flows;
    // Slots empty or being created are skipped (a creator initialises its flow under
    // whichever profile it runs).
    t.for_each_flow_slot([&](size_t i) {
      // The table hands out its state words read-only for introspection; they are the
      // same atomics the workers charge, in memory the table owns mutably.
      convert_words(cr, from, const_cast<std::atomic<uint64_t>*>(t.state_at(i)), now_ns);
    });
    return;
  }
  RuleState& st = *cr.state;
  int ready = st.aggregate_ready.load(std::memory_order_acquire);
  while (ready == 1) ready = st.aggregate_ready.load(std::memory_order_acquire);
  if (ready == 2) convert_words(cr, from, st.aggregate, now_ns);  // 0: starts in the new profile
}

}  // namespace

void run_state_conversions(const RulesSnapshot& snap, uint64_t now_ns, ConversionWait wait) {
  int expected = 0;
  if (snap.conversion_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    for (const StateConversion& c : snap.conversions) convert_rule(snap.compiled[c.rule], c.from, now_ns);
    snap.conversion_state.store(2, std::memory_order_release);
    return;
  }
  if (wait == ConversionWait::none) return;
  // Another thread converts: a sweep of the sets its tables used at most; charging before it
  // ends would read words of the old profile with the new one.
  // A worker spins: a 10 us sleep of a SCHED_OTHER thread lasts 60 us or more (the default
  // 50 us timer slack), each one a stall of its forwarding, seen on every rule.set of a storm.
  // The converter is never starved by it: the other worker has a CPU of its own, and the
  // control thread either preempts this worker (SCHED_FIFO) or outweighs it (nice -10). Past
  // kSpin (a converter descheduled by other load) it sleeps, as the control thread does.
  // The control thread sleeps from the start: on 2 CPUs it shares one with a busy-polling
  // worker, maybe the converter. At SCHED_FIFO a yield returns at once (a spin that keeps the
  // converter off its CPU); at SCHED_OTHER the scheduler lets the poller run out its whole
  // slice (ms) after a yield. A sleeper that wakes preempts the poller instead.
  // Sleeps double (sleep_backoff.hpp): a fixed 10 us sleep at SCHED_FIFO is a spin here.
  constexpr auto kSpin = std::chrono::microseconds(500);
  const auto spin_until = std::chrono::steady_clock::now() + kSpin;
  SleepBackoff backoff;
  for (int i = 0; snap.conversion_state.load(std::memory_order_acquire) != 2; ++i) {
    if (wait == ConversionWait::spin && ((i & 63) != 0 || std::chrono::steady_clock::now() < spin_until))
      detail::contention_backoff();  // a few pause instructions
    else
      backoff.sleep();
  }
}

void adopt_counters(const RulesSnapshot& snap, WorkerCounters& c) {
  if (c.per_rule.size() < snap.counter_slots) c.per_rule.resize(snap.counter_slots);
  for (const auto& r : snap.retiring) {
    if (r->counter_slot >= c.per_rule.size()) continue;
    r->fold(c.per_rule[r->counter_slot]);
    c.per_rule[r->counter_slot] = TrafficCounters{};
  }
  for (uint32_t s : snap.fresh_slots) c.per_rule[s] = TrafficCounters{};
  c.default_slot = snap.default_slot;
  c.generation = snap.generation;
}

}  // namespace sluice
