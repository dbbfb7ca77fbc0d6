// libFuzzer target: the whole pipeline. A RuleSet built from the fuzz bytes (1-4 rules with
// random match fields, keys, algorithms, rates, bursts and parents, or 5-20 / 60-70 replicas of a few
// such templates: fuzz_pipeline_rules.hpp; built directly, not through the rules loader), then
// bursts of fuzzed frames at fuzzed timestamps (forward, equal, backward, days ahead) through
// Pipeline::process_burst. After every burst the counters must keep the identities of
// docs/SEMANTICS.md, and a lone token-bucket or gcra rule with one shared bucket must never
// have conformed more than B + r*T (SPEC §3). When the snapshot takes one of process_burst's
// shortcuts (the common-IPv4 burst, burst charging of aggregate policers), a second pipeline
// of the same rules runs the same frames one at a time (process()): every verdict, every
// rewritten byte and, at the end, every counter and flow count must be the same (as
// tests/unit/pipeline_burst_paths_test.cpp holds them). With match tables (more than
// Classifier::kLinearRules rules) every well-formed frame's rule is also the first rule of
// the linear walk (tests/common/linear_classifier.hpp), by classify() and, for a common IPv4
// frame, by classify_common_ipv4().
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "frame_fast_v4.hpp"
#include "fuzz_frame_writer.hpp"
#include "fuzz_input.hpp"
#include "fuzz_pipeline_rules.hpp"
#include "linear_classifier.hpp"
#include "pipeline.hpp"
#include "rules.hpp"
#include "rules_snapshot.hpp"

using namespace sluice;
using sluice::fuzz::FrameSlots;
using sluice::fuzz::FrameSpec;
using sluice::fuzz::FuzzInput;
using sluice::fuzz::L4Kind;

namespace {

using sluice::fuzz::AddressPool;

void check(bool ok, const char* what) { sluice::fuzz::pipeline_check(ok, what); }

// One frame into `slots`' slot i, its addresses from `pool`; returns its length. Reads the
// input as PacketBuilder's version of this function did (with the fixed addresses), so a
// corpus of 1-4 rules means the same frames. `common`: the many-rule mode, where 8 of 16
// kinds are kind 2 (untagged IPv4), so that most frames can take the common-IPv4 burst.
uint32_t frame(FuzzInput& in, FrameSlots& slots, size_t i, const AddressPool& pool, bool common) {
  uint8_t* out = slots.open(i);
  size_t len;
  unsigned kind = unsigned(common ? in.range(0, 15) : in.range(0, 7));
  if (kind > 7) kind = 2;
  if (kind == 0) {  // raw bytes: malformed, non-IP, anything
    len = in.take(out, in.range(0, 200));
  } else {
    FrameSpec s;
    if (kind & 4) s.vlan = int(in.range(0, 4095));
    s.dscp = uint8_t(in.range(0, 63));
    s.ipv6 = (kind & 1) != 0;
    const uint8_t *src, *dst;
    if (s.ipv6) {
      src = pool.v6[in.range(0, pool.n6 - 1)];
      dst = pool.v6[in.range(0, pool.n6 - 1)];
    } else {
      src = pool.v4[in.range(0, pool.n4 - 1)];
      dst = pool.v4[in.range(0, pool.n4 - 1)];
    }
    switch (in.range(0, 3)) {
      case 0: s.l4 = L4Kind::udp, s.src_port = in.u16(), s.dst_port = uint16_t(in.range(0, 4000)); break;
      case 1: s.l4 = L4Kind::tcp, s.src_port = in.u16(), s.dst_port = uint16_t(in.range(0, 4000)); break;
      case 2: s.l4 = L4Kind::icmp; break;
      default: s.l4 = L4Kind::bare, s.proto = uint8_t(in.range(0, 255)); break;
    }
    s.payload = in.range(0, 1500);
    len = write_frame(s, src, dst, out);
    if (in.range(0, 15) == 0) len = in.range(0, len - 1);  // truncated
  }
  slots.close(i, len);
  return uint32_t(len);
}

void check_identities(const TrafficCounters& t, bool is_rule) {
  for (int bytes = 0; bytes < 2; ++bytes) {
    auto get = [&](Outcome o) { return bytes ? t.byts(o) : t.pkts(o); };
    check(get(Outcome::matched) == get(Outcome::passed) + get(Outcome::dropped) +
                                       get(Outcome::marked) + get(Outcome::delayed),
          "matched != passed + dropped + marked + delayed");
    if (is_rule)
      check(get(Outcome::matched) == get(Outcome::conformed) + get(Outcome::exceeded),
            "matched != conformed + exceeded");
  }
}

bool same(const TrafficCounters& a, const TrafficCounters& b) {
  return a.packets == b.packets && a.bytes == b.bytes;
}

// The flows and counters of two snapshots of the same rules, rule by rule.
void check_same_snapshots(const CountersSnapshot& a, const CountersSnapshot& b) {
  check(a.rules.size() == b.rules.size(), "burst and one-by-one snapshots differ in rules");
  for (size_t i = 0; i < a.rules.size(); ++i) {
    check(same(a.rules[i].traffic, b.rules[i].traffic),
          "a rule's counters differ between burst and one-by-one");
    check(a.rules[i].active_flows == b.rules[i].active_flows &&
              a.rules[i].flows_evicted == b.rules[i].flows_evicted,
          "a rule's flows differ between burst and one-by-one");
  }
  check(same(a.default_rule.traffic, b.default_rule.traffic),
        "the default's counters differ between burst and one-by-one");
}

// With match tables: the classifier's answer for one frame is the linear walk's.
void check_classified(const Classifier& tables, const sluice::testing::LinearClassifier& linear,
                      const uint8_t* data, uint32_t len, uint16_t port) {
  ParsedFrame pf;
  parse_frame_into(data, len, len, pf);
  if (pf.status != FrameStatus::ok) return;  // never classified
  const int want = linear.classify(pf, port);
  check(tables.classify(pf, port) == want, "match tables and the linear walk disagree");
  Ipv4Fields f;
  if (parse_common_ipv4_fields(data, len, len, f))
    check(tables.classify_common_ipv4(f, port) == want,
          "classify_common_ipv4 and the linear walk disagree");
}

}  // namespace

// Once, before the first input: the frames written in place are PacketBuilder's.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  check(sluice::fuzz::same_as_packet_builder(sluice::fuzz::kV4, 5, sluice::fuzz::kV6, 4),
        "write_frame and PacketBuilder build different frames");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  RuleSet built;
  built.default_action = sluice::fuzz::fuzzed_action(in);
  const unsigned count = in.u8();
  const bool many = count >= 192;
  AddressPool many_pool;
  if (many) sluice::fuzz::many_rules(in, built, many_pool);
  else sluice::fuzz::few_rules(in, 1 + count % 4, built);
  const AddressPool& pool = many ? many_pool : sluice::fuzz::fixed_addresses();
  // The loader refuses parent cycles; the pipeline is handed only what the loader accepts.
  for (size_t i = 0; i < built.rules.size(); ++i) {
    size_t steps = 0;
    for (int at = built.rules[i].parent_index; at >= 0; at = built.rules[size_t(at)].parent_index)
      if (++steps > built.rules.size()) return 0;
  }
  PipelineOptions opts;
  opts.hash_seed = 1 + in.u8();
  opts.single_writer = true;
  opts.stale_read_tolerance_ns = in.flag() ? 0 : SL_STEP_TOLERANCE_NS;
  opts.default_max_flows = 1 + in.range(0, 255);
  RuleSet copy = built;
  auto made = Pipeline::create(std::move(built), opts);
  if (!made) {  // a combination the profile builder refuses: it must say why
    check(!made.error().message.empty(), "Pipeline::create failed without a message");
    return 0;
  }
  std::unique_ptr<Pipeline> pipeline = std::move(made).value();
  const RuleSet& rs = pipeline->rules();  // the set it runs (moved in, not copied)
  WorkerCounters counters = pipeline->make_counters();
  const RulesSnapshot& snap = pipeline->enter(counters, 0);

  // The one-by-one twin, only where process_burst has a path of its own: otherwise it
  // classifies every frame and then finishes each, which is process() in another order of
  // side-effect-free steps.
  std::unique_ptr<Pipeline> twin;
  WorkerCounters twin_counters;
  if (snap.fast_common_ipv4 || snap.any_burstable || snap.rules_free_default) {
    auto made_twin = Pipeline::create(std::move(copy), opts);
    check(made_twin.ok(), "the same rules made a pipeline once and not twice");
    twin = std::move(made_twin).value();
    twin_counters = twin->make_counters();
  }
  std::optional<sluice::testing::LinearClassifier> linear;
  if (!snap.classifier.linear()) linear.emplace(rs.rules);

  // One shared token-bucket/gcra bucket that every charge of rule 0 goes through.
  const Rule& r0 = rs.rules[0];
  const bool bounded = rs.rules.size() == 1 && r0.key == KeyMode::none && r0.parent.empty() &&
                       (r0.algorithm == Algorithm::token_bucket || r0.algorithm == Algorithm::gcra);
  uint64_t now = in.u64() >> 1;
  const uint64_t first = now;
  bool monotone = true;

  static FrameSlots slots(Pipeline::kMaxBurst), twin_slots(Pipeline::kMaxBurst);
  Pipeline::Frame frames[Pipeline::kMaxBurst];
  Verdict verdicts[Pipeline::kMaxBurst];
  for (int burst = 0; burst < 48 && !in.empty(); ++burst) {
    switch (in.range(0, 7)) {
      case 0: break;                                                // same instant
      case 1: now += in.range(0, 1'000'000); break;                 // up to 1 ms
      case 2: now += in.range(0, 2'000'000'000ull); break;          // up to 2 s
      case 3: now -= in.range(1, 2'000'000'000ull); monotone = false; break;  // steps back
      case 4: now += in.range(0, 400ull * 86400 * 1'000'000'000); break;      // idle of days
      case 5: now = in.u64(); monotone = false; break;              // anything, wrap included
      default: now += in.range(0, 100'000); break;
    }
    const size_t n = in.range(1, Pipeline::kMaxBurst);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t len = frame(in, slots, i, pool, many);
      frames[i] = Pipeline::Frame{slots.data(i), len};
      if (twin) {
        std::memcpy(twin_slots.open(i), slots.data(i), len);
        twin_slots.close(i, len);
      }
    }
    const uint16_t port = uint16_t(in.range(0, 3));
    if (linear)
      for (size_t i = 0; i < n; ++i)
        check_classified(snap.classifier, *linear, frames[i].data, frames[i].len, port);
    const size_t not_now = pipeline->process_burst(frames, n, port, now, counters, verdicts);
    if (twin) {
      size_t twin_not_now = 0;
      for (size_t i = 0; i < n; ++i) {
        const Verdict v = twin->process(twin_slots.data(i), frames[i].len, port, now, twin_counters);
        check(v.kind == verdicts[i].kind && v.depart_ns == verdicts[i].depart_ns,
              "a verdict differs between burst and one-by-one");
        check(std::memcmp(twin_slots.data(i), frames[i].data, frames[i].len) == 0,
              "a frame rewritten differently by burst and one-by-one");
        twin_not_now += !forwards_now(v, now);
      }
      check(twin_not_now == not_now, "process_burst's count of verdicts not forwarding now");
    }
    for (size_t i = 0; i < n; ++i)
      if (verdicts[i].kind == Verdict::Kind::forward)
        check(verdicts[i].depart_ns - now <= 60'000'000'000ull, "departs before arrival or > 60 s later");

    // The one worker's counters, which are what snapshot() sums (checked equal below): rule
    // i of the start-up set counts in slot i, the default in its own (counters.hpp).
    for (size_t i = 0; i < rs.rules.size(); ++i) check_identities(counters.rule(i), true);
    check_identities(counters.default_rule(), false);
    if (bounded && monotone) {
      const TrafficCounters& t = counters.rule(0);
      const unsigned __int128 cost =
          r0.rate.unit == CostUnit::packets
              ? t.pkts(Outcome::conformed)
              : t.byts(Outcome::conformed) + uint64_t(r0.overhead_bytes) * t.pkts(Outcome::conformed);
      // cost <= B + r*T, scaled by den * 1e9 to stay in integers.
      const unsigned __int128 scale = (unsigned __int128)r0.rate.per_sec_den * 1'000'000'000u;
      check(cost * scale <= (unsigned __int128)r0.burst * scale +
                                (unsigned __int128)(now - first) * r0.rate.per_sec_num,
            "a bucket admitted more than B + r*T");
    }
  }
  // A snapshot per input, not per burst (its allocations were ~5% of the run): it must list
  // every rule with exactly the counters the bursts were checked on.
  CountersSnapshot snap_of_counters = pipeline->snapshot({&counters});
  check(snap_of_counters.rules.size() == rs.rules.size(), "a snapshot without every rule");
  for (size_t i = 0; i < rs.rules.size(); ++i)
    check(snap_of_counters.rules[i].name == rs.rules[i].name && same(snap_of_counters.rules[i].traffic, counters.rule(i)),
          "a snapshot's rule counters are not the worker's");
  check(same(snap_of_counters.default_rule.traffic, counters.default_rule()),
        "a snapshot's default counters are not the worker's");
  if (twin) check_same_snapshots(snap_of_counters, twin->snapshot({&twin_counters}));
  return 0;
}
