// The common-IPv4 burst's loops (pipeline_fast_v4.cpp says what they do), as a template the
// two files that instantiate it include: pipeline_fast_v4.cpp (one rule, any rules) and
// pipeline_fast_v4_uniform.cpp (rules alike). Apart, so that the instantiations of one file do
// not change how GCC inlines the other's (six more in one file cost the one-rule meter loop
// ~9 instructions a packet).
#pragma once

#include <algorithm>
#include <cassert>

#include "frame_fast_v4.hpp"
#include "frame_source.hpp"
#include "pipeline_run.hpp"

namespace sluice::pipeline_run {
namespace fast_v4 {
namespace {


// What the first pass learns of a frame, for the second.
struct Pass1 {
  uint64_t hash;                // fast rules: the flow's hash
  std::atomic<uint64_t>* line;  // and its first set's line, already being fetched
  uint32_t len;                 // wire length
  // >= 0: a fast rule; kDefault: no rule, a pass/drop default; kGeneral. With one rule
  // (burst's kOne) a frame of the rule is one with a line, and only the others have this.
  int32_t rule;
};
constexpr int32_t kDefault = -1;
constexpr int32_t kGeneral = -2;

// A fast rule's share of the burst: its token bucket's word-free parts (bucket_math.h
// sl_tb_decide_at) and what it counts.
struct RuleBurst {
  sl_tb_at at{};
  uint64_t packets = 0, bytes = 0;  // matched, conformed and passed
  int32_t rule = -1;                // whose share (kOne: always the one rule's)
};

// Any number of rules: a burst's shares in a few entries by rule index, an entry handed to
// another rule only after its counts are added to the counters. Up to kLinearRules rules
// (a linear classifier) each has its own entry; with thousands, a burst meets a few.
constexpr size_t kShares = 8;
static_assert(Classifier::kLinearRules <= kShares);

void count_share(const RulesSnapshot& s, const RuleBurst& b, WorkerCounters& counters) {
  if (b.packets == 0) return;
  const CompiledRule& cr = s.compiled[size_t(b.rule)];
  TrafficCounters& c = counters.rule(cr.counter_slot);
  for (Outcome o : {Outcome::matched, Outcome::conformed, Outcome::passed}) {
    c.packets[size_t(o)] += b.packets;
    c.bytes[size_t(o)] += b.bytes;
  }
  if (cr.fast_srtcm) {  // green too
    c.packets[size_t(Outcome::green)] += b.packets;
    c.bytes[size_t(Outcome::green)] += b.bytes;
  }
}

// Rule r's entry, its token-bucket parts worked out for now_ns when it is taken.
[[gnu::always_inline]] inline RuleBurst& share_of(RuleBurst* shares, const RulesSnapshot& s,
                                                  size_t r, uint64_t now_ns,
                                                  WorkerCounters& counters) {
  RuleBurst& b = shares[r % kShares];
  if (b.rule == int32_t(r)) [[likely]] return b;
  if (b.rule >= 0) count_share(s, b, counters);
  b = RuleBurst{};
  b.rule = int32_t(r);
  const CompiledRule& cr = s.compiled[r];
  if (!cr.fast_srtcm) {
    sl_tb_at_time(&cr.p.rate, now_ns, &b.at);
    sl_tb_at_cost(&cr.p.rate, 1, &b.at);
  }
  return b;
}

template <KeyMode mode>
[[gnu::always_inline]] inline uint64_t common_ipv4_hash_of(const FlowHashKeys& keys,
                                                           uint8_t prefix_len,
                                                           const Ipv4Fields& f) {
  return hash_flow_key(flow_key_v4<mode>(4, f.src(), f.dst(), f.proto, f.ports, prefix_len), keys);
}
template <KeyMode mode>
[[gnu::always_inline]] inline uint64_t common_ipv4_hash_of(const CompiledRule& cr,
                                                           const Ipv4Fields& f) {
  return common_ipv4_hash_of<mode>(cr.hash_keys, cr.key_prefix_len, f);
}

[[gnu::always_inline]] inline uint64_t common_ipv4_hash(const CompiledRule& cr,
                                                        const Ipv4Fields& f) {
  switch (cr.key_mode) {
    case KeyMode::five_tuple: return common_ipv4_hash_of<KeyMode::five_tuple>(cr, f);
    case KeyMode::src_ip: return common_ipv4_hash_of<KeyMode::src_ip>(cr, f);
    case KeyMode::dst_ip: return common_ipv4_hash_of<KeyMode::dst_ip>(cr, f);
    case KeyMode::src_dst: return common_ipv4_hash_of<KeyMode::src_dst>(cr, f);
    case KeyMode::src_prefix: return common_ipv4_hash_of<KeyMode::src_prefix>(cr, f);
    case KeyMode::dst_prefix: return common_ipv4_hash_of<KeyMode::dst_prefix>(cr, f);
    case KeyMode::none: break;
  }
  return common_ipv4_hash_of<KeyMode::none>(cr, f);
}

// The out-of-line paths below store verdict i themselves and return whether it is not
// "forward now": the loop passes the frame's index, not its frame or verdict, so it carries
// no pointer into either for the common packet.

// A packet of a fast rule that its bucket refused or that found no flow slot: counted and
// acted on as finish() does, with the frame parsed whole for the action (a DSCP mark).
template <class Frames>
[[gnu::noinline]] bool refused(const Run& run, const CompiledRule& cr, bool no_slot, Frames src,
                               size_t i, Verdict* verdicts, uint64_t now_ns,
                               WorkerCounters& counters) {
  const Pipeline::Frame& frame = src.full(i);
  ParsedFrame pf;
  parse_frame_into(frame.data, frame.len, frame.wire_len, pf);
  TrafficCounters& c = counters.rule(cr.counter_slot);
  c.add(Outcome::matched, pf.frame_len);
  c.add(Outcome::exceeded, pf.frame_len);
  const Rule& r = *cr.rule;
  verdicts[i] =
      run.act(no_slot ? r.overflow.value_or(r.action) : r.action, c, frame.data, pf, now_ns);
  return !forwards_now(verdicts[i], now_ns);
}

// A packet of a fast srtcm rule that is not green, or whose green action is not pass:
// counted and acted on as Run::meter does.
template <class Frames>
[[gnu::noinline]] bool coloured(const Run& run, const CompiledRule& cr, sl_colour colour,
                                Frames src, size_t i, Verdict* verdicts, uint64_t now_ns,
                                WorkerCounters& counters) {
  const Pipeline::Frame& frame = src.full(i);
  ParsedFrame pf;
  parse_frame_into(frame.data, frame.len, frame.wire_len, pf);
  TrafficCounters& c = counters.rule(cr.counter_slot);
  c.add(Outcome::matched, pf.frame_len);
  verdicts[i] = run.coloured(cr, colour, c, frame.data, pf, now_ns);
  return !forwards_now(verdicts[i], now_ns);
}

// A packet the first pass classified the general way: finished as process_burst does, out
// of line (finish() inlined would take registers from the common path's loop).
template <class Frames>
[[gnu::noinline]] bool general(const Run& run, Frames src, size_t i, Verdict* verdicts,
                               const Classified& c, uint64_t now_ns, WorkerCounters& counters) {
  verdicts[i] = run.finish(src.full(i).data, c, now_ns, counters);
  return !forwards_now(verdicts[i], now_ns);
}

// What the first pass reads besides the frames: burst's per-burst values, copied into the
// pass's locals.
struct FirstPassIn {
  const RulesSnapshot* s;
  const CompiledRule* one;  // burst's kOne: the rule
  FlowTable* one_flows;
  FlowHashKeys one_keys;
  Classifier::CommonIpv4Rule one_match;
  DenseKey one_dense;
  uint16_t port;
  uint8_t one_prefix_len;
  bool default_fast;
  // Workers share the tables: a packet's lookup reads its worker's half of the set first
  // (FlowTable::find_or_insert_home), so only that half is prefetched.
  bool home_first;
  uint8_t home;
};

// burst's first pass: each frame parsed, classified, hashed and its set's lines prefetched,
// or marked for the general stages (classified after it); returns how many were marked. A
// function of its own, without calls, so that its loop has every register: inlined into
// burst, values live across both passes took them, and its constants (match, hash keys,
// table) were reloaded from the stack for every packet.
template <bool kOne, KeyMode kMode, bool kUniform, bool kDense, bool kPlain, unsigned kOneWords,
          class Frames>
[[gnu::noinline]] size_t first_pass(const FirstPassIn& arg, const Frames& frames, size_t m,
                                    Pass1* p1) {
  const Frames src = frames;
  const RulesSnapshot& s = *arg.s;
  const CompiledRule& one = *arg.one;
  FlowTable* const one_flows = arg.one_flows;
  const FlowHashKeys one_keys = arg.one_keys;
  const Classifier::CommonIpv4Rule one_match = arg.one_match;
  const DenseKey one_dense = arg.one_dense;
  const uint16_t port = arg.port;
  const uint8_t one_prefix_len = arg.one_prefix_len;
  const bool default_fast = arg.default_fast;
  const bool home_first = !kPlain && arg.home_first;
  const unsigned home = arg.home;
  size_t general_seen = 0;
  for (size_t i = 0; i < m; ++i) {
    const Pipeline::Frame fr = src.head(i);
    const uint32_t len = src.wire(fr);
    p1[i].len = len;
    Ipv4Fields f;
    if (src.as_is(fr) && parse_common_ipv4_fields(fr.data, fr.len, len, f)) [[likely]] {
      uint64_t dense_at = 0;
      int r;
      if constexpr (kOne && kDense) {
        const bool in = dense_slot_in(dense_host_order(one_dense.src ? f.src() : f.dst()),
                                      one_dense, dense_at);
        r = in && Classifier::common_ipv4_matches(one_match, f) ? 0 : -1;
      } else {
        r = kOne ? (Classifier::common_ipv4_matches(one_match, f) ? 0 : -1)
                 : s.classifier.classify_common_ipv4(f, port);
      }
      if (r >= 0) {
        const CompiledRule& cr = kOne ? one : s.compiled[size_t(r)];
        if (kOne || cr.fast_common_ipv4) [[likely]] {
          if constexpr (!kOne) p1[i].rule = int32_t(r);
          if (kDense && (kOne || cr.dense.slots != 0)) {
            const DenseKey& dk = kOne ? one_dense : cr.dense;
            const uint64_t slot = kOne ? dense_at : dense_slot(dk.src ? f.src() : f.dst(), dk);
            FlowTable* const flows = kOne ? one_flows : cr.flows;
            p1[i].hash = slot;
            p1[i].line = flows->template dense_tag<kOneWords>(slot);
            flows->prefetch_dense<kOneWords>(p1[i].line, slot);
            continue;
          }
          const uint64_t hash =
              kOne       ? common_ipv4_hash_of<kMode>(one_keys, one_prefix_len, f)
              : kUniform ? common_ipv4_hash_of<kMode>(cr, f)
                         : common_ipv4_hash(cr, f);
          p1[i].hash = hash;
          FlowTable* const flows = kOne ? one_flows : cr.flows;
          p1[i].line = flows->template first_line<kOneWords>(hash);
          if (home_first)
            flows->prefetch_half<kOneWords>(p1[i].line, home);
          else
            flows->prefetch_line<kOneWords>(p1[i].line);
          continue;
        }
      } else if (default_fast) {
        p1[i].rule = kDefault;
        if constexpr (kOne) p1[i].line = nullptr;
        continue;
      }
    }
    p1[i].rule = kGeneral;
    if constexpr (kOne) p1[i].line = nullptr;
    ++general_seen;
  }
  return general_seen;
}

// The burst. kOne: the snapshot's only rule is a fast rule keyed by kMode, so the loops know
// its rule, its key and its counters without looking; otherwise any rules, of the linear walk
// or of match tables: kUniform, every fast rule a token bucket keyed by kMode
// (RulesSnapshot::uniform_token_bucket_key), else each keyed by its own mode (kMode unused).
// Frames: frame_source.hpp. The common outcome's verdict (forward now) is not stored per
// packet: the out-of-line paths store theirs and mark them in `written`, and the rest are
// filled in after the loops only when some verdict is not "forward now" or `fill` says all.
// kPlain (with kOne): the rule's common shape, so the loop tests none of it per packet: its
// table has a single writer (one worker, replay), and a token bucket's packet costs 1 (a pps
// rate), a meter's its bytes, with green passing (qos_meter's shape).
// kDense: with kOne, the rule's table is dense (dense_key.hpp): a packet's slot from its
// address, no hash (kMode unused); otherwise, some rule's table may be dense (each packet's
// rule says), where without it none is.
template <bool kOne, KeyMode kMode, bool kMeter = false, bool kUniform = false,
          bool kPlain = false, bool kDense = false, class Frames>
size_t burst(const Run& run, const Frames& frames, size_t m, uint16_t port, uint64_t now_ns,
             WorkerCounters& counters, Verdict* verdicts, Classified* cl, VerdictFill fill) {
  // A copy (a pointer or two): read through the reference, it would be loaded again after
  // every store the compiler cannot tell apart from it.
  const Frames src = frames;
  const RulesSnapshot& s = run.s;
  const ActionKind default_kind = s.rules.default_action.kind;
  const bool default_fast = default_kind == ActionKind::pass || default_kind == ActionKind::drop;
  // kOne: the rule's fields in locals, read once (a call in the loops, or the flow table's
  // acquire loads, would have them read again for every packet), and its match with its
  // constant part worked out.
  const CompiledRule& one = s.compiled[0];
  FlowTable* const one_flows = kOne ? one.flows : nullptr;
  static_assert(kOne || !kPlain);
  const Sharing one_sharing = kPlain ? Sharing::single_writer : kOne ? one.sharing : Sharing::shared;
  // Every rule's sharing is the pipeline's (Pipeline::set_single_writer).
  const bool home_first =
      !kPlain && !s.compiled.empty() && s.compiled[0].sharing == Sharing::shared;
  const uint8_t home = counters.table_half;
  const bool one_by_packets = kPlain ? !kMeter : kOne && one.cost_in_packets;
  const uint64_t one_overhead = kOne ? one.overhead_bytes : 0;
  const bool one_green_passes = kPlain || (kOne && one.green_passes);
  assert(!kPlain || (one.sharing == Sharing::single_writer &&
                     one.cost_in_packets == !kMeter && (!kMeter || one.green_passes)));
  // Its table's bucket words per flow, as rules_snapshot.cpp makes them: a meter's two, a
  // token bucket's one (0: any rule, read from the table).
  constexpr unsigned kOneWords = kOne ? (kMeter ? 2 : 1) : kUniform ? 1 : 0;
  const FlowHashKeys one_keys = kOne ? one.hash_keys : FlowHashKeys{};
  const uint8_t one_prefix_len = kOne ? one.key_prefix_len : 0;
  assert(!kOne || kDense == (one.dense.slots != 0));
  const DenseKey one_dense = kOne && kDense ? one.dense : DenseKey{};
  // kDense: the match's test of the keyed address is the slot's range test (dense_slot_in),
  // so the match leaves it out when it can.
  const Classifier::CommonIpv4Rule one_match =
      kOne && kDense ? s.classifier.common_ipv4_rule_but_address(0, port, one_dense.src)
      : kOne ? s.classifier.common_ipv4_rule(0, port)
             : Classifier::CommonIpv4Rule{};

  Pass1 p1[Pipeline::kMaxBurst];
  // Frame i is one of a fast rule. kOne: from its line, so that the first pass stores no
  // rule for such a frame and the second loads none.
  const auto of_fast_rule = [&p1](size_t i) {
    return kOne ? p1[i].line != nullptr : p1[i].rule >= 0;
  };
  // Frames for the general stages are only marked by the first pass and classified after it.
  const size_t general_seen = first_pass<kOne, kMode, kUniform, kDense, kPlain, kOneWords>(
      FirstPassIn{&s, &one, one_flows, one_keys, one_match, one_dense, port, one_prefix_len,
                  default_fast, home_first, home},
      src, m, p1);
  // The frames for the general stages take the scratch entries in order, so the loops carry
  // no pointer into `cl` for the common frames.
  if (general_seen != 0) [[unlikely]] {
    size_t at = 0;
    for (size_t i = 0; i < m; ++i) {
      if (of_fast_rule(i) || p1[i].rule != kGeneral) continue;
      const Pipeline::Frame whole = src.full(i);
      run.classify(whole.data, whole.len, whole.wire_len, port, cl[at++]);
    }
  }
  size_t general_done = 0;

  // The second pass's constants, worked out where it begins: before the first pass they
  // would only be kept across its call.
  std::array<RuleBurst, kOne ? 1 : kShares> rb{};
  uint32_t tick = 0;
  if constexpr (kOne) {
    tick = one_flows->tick_of(now_ns);
    rb[0].rule = 0;
    if (!one.fast_srtcm) {
      sl_tb_at_time(&one.p.rate, now_ns, &rb[0].at);
      sl_tb_at_cost(&one.p.rate, 1, &rb[0].at);
    }
  }
  // kOne meter: its green test's numbers for this burst's clock.
  sl_srtcm_at one_meter{};
  if (kOne && kMeter) sl_srtcm_at_time(&one.p.meter, now_ns, &one_meter);

  uint64_t default_packets = 0, default_bytes = 0;
  const Verdict pass{Verdict::Kind::forward, now_ns};
  const Verdict by_default{default_kind == ActionKind::drop ? Verdict::Kind::drop
                                                            : Verdict::Kind::forward,
                           now_ns};
  // kOne: the bytes its conforming packets had; how many they were is known after the loop.
  uint64_t one_bytes = 0;
  size_t not_now = 0;  // verdicts of the out-of-line paths and the default's drops
  uint64_t written = 0;  // bit i: verdicts[i] stored by an out-of-line path
  // A new flow's state words (the lookup's slow path takes this by reference): kOne's made
  // once per burst, not once per packet.
  const auto init_one = [&one, now_ns](std::atomic<uint64_t>* st) { one.init_state(st, now_ns); };
  for (size_t i = 0; i < m; ++i) {
    if (of_fast_rule(i)) [[likely]] {
      const size_t ri = kOne ? 0 : size_t(p1[i].rule);
      const CompiledRule& cr = kOne ? one : s.compiled[ri];
      RuleBurst& b = kOne ? rb[0] : share_of(rb.data(), s, ri, now_ns, counters);
      const uint32_t len = p1[i].len;
      FlowTable* const flows = kOne ? one_flows : cr.flows;
      const uint32_t rule_tick = kOne ? tick : flows->tick_of(now_ns);
      std::atomic<uint64_t>* w;
      if constexpr (kOne && kDense) {
        w = flows->find_or_insert_dense<kOneWords>(p1[i].line, p1[i].hash, rule_tick, init_one)
                .state;
      } else if constexpr (kOne) {
        w = home_first ? flows->find_or_insert_home<kOneWords>(p1[i].line, home,
                                                               p1[i].hash, rule_tick, init_one)
                             .state
                       : flows->find_or_insert_line<kOneWords>(p1[i].line, p1[i].hash,
                                                               rule_tick, init_one)
                             .state;
      } else {
        const auto init = [&](std::atomic<uint64_t>* st) { cr.init_state(st, now_ns); };
        w = kDense && cr.dense.slots != 0
                ? flows->template find_or_insert_dense<kOneWords>(p1[i].line, p1[i].hash,
                                                                  rule_tick, init)
                      .state
            : home_first ? flows->template find_or_insert_home<kOneWords>(
                               p1[i].line, home, p1[i].hash, rule_tick, init)
                               .state
                         : flows->template find_or_insert_line<kOneWords>(
                               p1[i].line, p1[i].hash, rule_tick, init)
                               .state;
      }
      if ((kOne ? kMeter : !kUniform && cr.fast_srtcm) && w != nullptr) {
        MeterWord& word = *reinterpret_cast<MeterWord*>(w);
        const Sharing sharing = kOne ? one_sharing : cr.sharing;
        sl_colour colour;
        if (sharing == Sharing::single_writer) [[likely]] {
          // As the token bucket below: update_meter's plain stores, without its test.
          const MeterWord cur = detail::meter_read(word);
          const sl_meter_state st{cur.e0, cur.e1};
          const uint64_t cost = kOne ? (one_by_packets ? 1 : uint64_t(len) + one_overhead)
                                     : cr.cost(len);
          sl_meter_state next{};
          // kOne: green from the burst's prepared numbers (a full committed bucket, or
          // sl_srtcm_decide's short path); any other case as sl_srtcm_decide decides it.
          if (kOne && sl_srtcm_green_at(&one_meter, &st, cost, &next)) [[likely]]
            colour = SL_GREEN;
          else
            colour = sl_srtcm_decide(&cr.p.meter, &st, now_ns, cost, &next);
          __atomic_store_n(&word.e0, next.e0, __ATOMIC_RELAXED);
          __atomic_store_n(&word.e1, next.e1, __ATOMIC_RELAXED);
        } else {
          colour = srtcm_charge(cr.p.meter, word, now_ns, cr.cost(len), sharing);
        }
        if (colour == SL_GREEN && (kOne ? one_green_passes : cr.green_passes)) [[likely]] {
          if constexpr (kOne) {
            one_bytes += len;
          } else {
            ++b.packets;
            b.bytes += len;
          }
          continue;
        }
        not_now += coloured(run, cr, colour, src, i, verdicts, now_ns, counters);
        written |= uint64_t{1} << i;
        continue;
      }
      if (w != nullptr) [[likely]] {
        const sl_tb_at* at = &b.at;
        sl_tb_at by_bytes;
        if (!(kOne ? one_by_packets : cr.cost_in_packets)) {
          by_bytes = b.at;
          sl_tb_at_cost(&cr.p.rate, cr.cost(len), &by_bytes);
          at = &by_bytes;
        }
        const Sharing sharing = kOne ? one_sharing : cr.sharing;
        bool ok;
        // One worker (and replay) is the single writer; with more, their compare-and-swap
        // costs far more than this branch.
        if (sharing == Sharing::single_writer) [[likely]] {
          // update_word's plain store, without its test for an unchanged word (a refusal):
          // no other thread writes this one, and the conforming packet goes straight on.
          uint64_t next;
          ok = sl_tb_decide_at(at, w->load(std::memory_order_relaxed), &next) != 0;
          w->store(next, std::memory_order_relaxed);
        } else {
          ok = detail::update_word(*w, sharing, [&](uint64_t cur, uint64_t* next) {
            return sl_tb_decide_at(at, cur, next) != 0;
          });
        }
        if (ok) [[likely]] {
          if constexpr (kOne) {
            one_bytes += len;
          } else {
            ++b.packets;
            b.bytes += len;
          }
          continue;
        }
      }
      not_now += refused(run, cr, w == nullptr, src, i, verdicts, now_ns, counters);
      written |= uint64_t{1} << i;
    } else if (p1[i].rule == kDefault) {
      ++default_packets;
      default_bytes += p1[i].len;
    } else {
      not_now += general(run, src, i, verdicts, cl[general_done++], now_ns, counters);
      written |= uint64_t{1} << i;
    }
  }
  if constexpr (kOne) {
    // Every frame not of the default's and not finished out of line (refused, another colour,
    // general) conformed.
    rb[0].packets = m - default_packets - size_t(__builtin_popcountll(written));
    rb[0].bytes = one_bytes;
  }

  for (const RuleBurst& b : rb)
    if (b.rule >= 0) count_share(s, b, counters);
  if (default_packets != 0) {
    TrafficCounters& d = counters.default_rule();
    const Outcome taken = default_kind == ActionKind::drop ? Outcome::dropped : Outcome::passed;
    for (Outcome o : {Outcome::matched, taken}) {
      d.packets[size_t(o)] += default_packets;
      d.bytes[size_t(o)] += default_bytes;
    }
    if (default_kind == ActionKind::drop) not_now += default_packets;
  }
  if (not_now != 0 || fill == VerdictFill::all) {
    for (size_t i = 0; i < m; ++i)
      if (!(written >> i & 1))
        verdicts[i] = !of_fast_rule(i) && p1[i].rule == kDefault ? by_default : pass;
  }
  return not_now;
}

}  // namespace
}  // namespace fast_v4
}  // namespace sluice::pipeline_run
