// process_burst's loops over one snapshot, for up to Pipeline::kMaxBurst frames of any frame
// source (frame_source.hpp): Pipeline::process_burst runs them over arrays of frames, a live
// worker over its mbufs in place (dataplane/live/mbuf_burst.cpp), so both take the same
// paths to the same verdicts and counters. Internal to the dataplane.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "frame_fast_v4.hpp"
#include "frame_source.hpp"
#include "pipeline_run.hpp"
#include "rules_snapshot.hpp"

namespace sluice::pipeline_run {

// No rule, and a default action that needs no field (pass or drop): every packet takes the
// default, so the burst needs only each frame's well-formedness (for `malformed`) and its
// length, and the default's counters take one add per outcome per burst. Same counts and
// verdicts as finish() gives each packet.
template <class Frames>
[[gnu::always_inline]] inline size_t burst_default_only(const RulesSnapshot& snap,
                                                        const Frames& frames, size_t n,
                                                        uint64_t now_ns,
                                                        WorkerCounters& counters,
                                                        Verdict* verdicts, VerdictFill fill) {
  const bool drop = snap.rules.default_action.kind == ActionKind::drop;
  const Frames src = frames;  // a copy: through the reference it is reloaded every frame
  uint64_t bytes = 0, malformed = 0, malformed_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Pipeline::Frame f = src.head(i);
    const uint32_t len = src.wire(f);
    bytes += len;
    // The common IPv4 frame's checks inline (its fields unused, so not even loaded); only a
    // frame they refuse pays a call into the general walk.
    Ipv4Fields common;
    if (!(src.as_is(f) && parse_common_ipv4_fields(f.data, f.len, len, common))) [[unlikely]] {
      const Pipeline::Frame whole = src.full(i);
      if (!frame_is_well_formed(whole.data, whole.len, whole.wire_len)) {
        ++malformed;
        malformed_bytes += len;
      }
    }
  }
  // The verdicts, all alike, apart from the loop (a pass burst a worker sends whole needs none).
  if (drop || fill == VerdictFill::all) {
    const Verdict v{drop ? Verdict::Kind::drop : Verdict::Kind::forward, now_ns};
    std::fill(verdicts, verdicts + n, v);
  }
  TrafficCounters& d = counters.default_rule();
  const size_t taken = size_t(drop ? Outcome::dropped : Outcome::passed);
  for (size_t o : {size_t(Outcome::matched), taken}) {
    d.packets[o] += n;
    d.bytes[o] += bytes;
  }
  d.packets[size_t(Outcome::malformed)] += malformed;
  d.bytes[size_t(Outcome::malformed)] += malformed_bytes;
  return drop ? n : 0;
}

// process_burst of snap for n <= Pipeline::kMaxBurst frames of src.
template <class Frames>
size_t run_burst(const RulesSnapshot& snap, const Frames& src, size_t n, uint16_t port,
                 uint64_t now_ns, WorkerCounters& counters, Verdict* verdicts, VerdictFill fill) {
  if (snap.rules_free_default) [[unlikely]]
    return burst_default_only(snap, src, n, now_ns, counters, verdicts, fill);
  const Run run{snap};
  // Raw storage (Classified is an aggregate, so the bytes implicitly hold its objects):
  // classify() writes every field of the entries it uses, so value-initialising the whole
  // array each burst would only be wasted stores.
  alignas(Classified) unsigned char raw[Pipeline::kMaxBurst * sizeof(Classified)];
  auto* cl = reinterpret_cast<Classified*>(raw);
  static_assert(std::is_aggregate_v<Classified> && std::is_trivially_destructible_v<Classified>);
  if (snap.fast_common_ipv4)
    return burst_common_ipv4(run, src, n, port, now_ns, counters, verdicts, cl, fill);
  for (size_t i = 0; i < n; ++i) {
    const Pipeline::Frame f = src.full(i);
    run.classify(f.data, f.len, f.wire_len, port, cl[i]);
  }
  if (snap.any_burstable) run.charge_burstable(cl, n, now_ns);
  size_t not_now = 0;
  for (size_t i = 0; i < n; ++i) {
    const Verdict v = run.finish(src.full(i).data, cl[i], now_ns, counters);
    verdicts[i] = v;
    not_now += !forwards_now(v, now_ns);
  }
  return not_now;
}

}  // namespace sluice::pipeline_run
