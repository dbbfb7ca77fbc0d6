// The burst pipeline's per-packet stages over one snapshot (pipeline.cpp's process and
// process_burst, and the common-IPv4 burst of pipeline_fast_v4.cpp): internal to the core.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "flow_key.hpp"
#include "frame.hpp"
#include "frame_rewrite.hpp"
#include "pipeline.hpp"
#include "rules_snapshot.hpp"

namespace sluice::pipeline_run {

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
    const auto init = [&](std::atomic<uint64_t>* w) { cr.init_state(w, now_ns); };
    if (cr.dense.slots != 0) return cr.flows->find_or_insert_dense(hash, now_ns, init).state;
    return cr.flows->find_or_insert(hash, now_ns, init).state;
  }

  // The key mode's hash, inlined (a switch costs less than the call through cr.hash_fn); for
  // a dense table, the key's slot (only IPv4 packets reach such a rule: dense_key.hpp).
  [[gnu::always_inline]] static uint64_t flow_hash(const CompiledRule& cr, const ParsedFrame& pf) {
    if (cr.dense.slots != 0) [[unlikely]]
      return dense_slot(unaligned::load32((cr.dense.src ? pf.src : pf.dst).data()), cr.dense);
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
    return coloured(cr, colour, c, frame, pf, now_ns);
  }

  // What a meter's colour counts and does.
  Verdict coloured(const CompiledRule& cr, sl_colour colour, TrafficCounters& c, uint8_t* frame,
                   const ParsedFrame& pf, uint64_t now_ns) const {
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
    if (cr.dense.slots != 0)
      cr.flows->prefetch_dense(cr.flows->dense_tag(c.flow_hash), c.flow_hash);
    else
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


// process_burst of a snapshot with fast_common_ipv4 set, for m <= kMaxBurst frames of a
// frame source (frame_source.hpp): the same verdicts and counters as finish() after
// classify() of each frame in order. `cl` is scratch space for m entries. Returns how many
// verdicts are not forwards_now(); `fill` says which verdicts are written. Defined in
// pipeline_fast_v4.hpp, instantiated for FrameArray in pipeline_fast_v4.cpp and for a live
// worker's mbufs in dataplane/live.
template <class Frames>
size_t burst_common_ipv4(const Run& run, const Frames& src, size_t m, uint16_t port,
                         uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts,
                         Classified* cl, VerdictFill fill);
// burst_common_ipv4 of a snapshot with uniform_token_bucket_key set
// (pipeline_fast_v4_uniform.hpp: a translation unit of its own per source).
template <class Frames>
size_t burst_uniform_common_ipv4(const Run& run, const Frames& src, size_t m, uint16_t port,
                                 uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts,
                                 Classified* cl, VerdictFill fill);
// burst_common_ipv4 of a snapshot whose one rule has a dense flow table
// (pipeline_fast_v4_dense.hpp: a translation unit of its own per source).
template <class Frames>
size_t burst_dense_common_ipv4(const Run& run, const Frames& src, size_t m, uint16_t port,
                               uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts,
                               Classified* cl, VerdictFill fill);

}  // namespace sluice::pipeline_run
