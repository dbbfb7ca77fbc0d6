#include "flow_sampler.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "flow_key_text.hpp"
#include "frame.hpp"
#include "rules_snapshot.hpp"

namespace sluice {

Status FlowSampler::check(const FlowSamplerOptions& opts) {
  if (opts.window_ns == 0) return invalid_input("flow sampler window must be > 0");
  if (opts.fixed_every != 0 &&
      (!std::has_single_bit(opts.fixed_every) || opts.fixed_every > kMaxEvery))
    return invalid_input("flow sampling interval must be a power of two up to " +
                         std::to_string(kMaxEvery) + ", not " + std::to_string(opts.fixed_every));
  return HeavyHitters::check_capacity(opts.capacity);
}

FlowSampler::FlowSampler(const FlowSamplerOptions& opts)
    : opts_(opts),
      rng_(opts.seed | 1),
      windows_{Window(opts.capacity, opts.seed), Window(opts.capacity, opts.seed)} {
  if (opts_.window_ns == 0) opts_.window_ns = FlowSamplerOptions{}.window_ns;
  opts_.capacity = std::clamp<size_t>(opts_.capacity, 1, HeavyHitters::kMaxCapacity);
  if (opts_.fixed_every != 0) {
    opts_.fixed_every = std::min(std::bit_ceil(opts_.fixed_every), kMaxEvery);
    every_ = opts_.fixed_every;
  }
  answer_.by_packets.reserve(opts_.capacity);
  answer_.by_bytes.reserve(opts_.capacity);
  countdown_ = int64_t(next_gap());
}

size_t FlowSampler::memory_bytes() const {
  return 2 * (windows_[0].by_packets.memory_bytes() + windows_[0].by_bytes.memory_bytes()) +
         2 * opts_.capacity * sizeof(FlowCount) + sizeof(*this);
}

uint64_t FlowSampler::next_gap() {
  // xorshift64*: a few instructions, and only once per sample.
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  const uint64_t r = (rng_ * 0x2545f4914f6cdd1dull) >> 32;
  // Uniform in [1, 2N - 1]: mean N, so a packet's chance of being sampled is 1/N.
  return 1 + r % (2 * uint64_t(every_) - 1);
}

void FlowSampler::sampled() {
  if (opts_.fixed_every == 0 && ++samples_since_change_ >= kMaxSamplesPerWindow &&
      every_ < kMaxEvery) {
    every_ *= 2;
    samples_since_change_ = 0;
  }
  countdown_ += int64_t(next_gap());
}

void FlowSampler::count(const RulesSnapshot& snap, const Pipeline::Frame& frame, uint16_t port) {
  Window& w = current();
  ++w.samples;
  // No keyed rule, no flow to count (no rule, only key: none): the sample still counts for
  // the adaptive interval, so N is where the rate puts it when keyed rules come.
  if (snap.keyed.empty()) return;
  ParsedFrame pf;
  parse_frame_into(frame.data, frame.len, frame.wire_len, pf);
  if (pf.status != FrameStatus::ok) return;
  const int rule = snap.classifier.classify(pf, port);
  if (rule < 0) return;
  const CompiledRule& cr = snap.compiled[size_t(rule)];
  if (cr.flows == nullptr) return;  // key: none has no flows
  const FlowKey key = flow_key_for(cr.rule->key, pf, cr.rule->key_prefix_len);
  const uint64_t packets = every_, bytes = uint64_t(every_) * pf.frame_len;
  w.by_packets.add(cr.state->id, key, packets, packets, bytes);
  w.by_bytes.add(cr.state->id, key, bytes, packets, bytes);
}

void FlowSampler::start(uint64_t now_ns) {
  started_ = true;
  current().start_ns = now_ns;
}

void FlowSampler::roll(uint64_t now_ns) {
  Window& done = current();
  done.end_ns = now_ns;
  // A window that took few samples: sample more in the next (adaptive mode). The budget is
  // per window: so N settles where a window takes between a quarter of it and all of it.
  if (opts_.fixed_every == 0 && done.samples < kMaxSamplesPerWindow / 4 && every_ > 1) every_ /= 2;
  samples_since_change_ = 0;
  current_ ^= 1;
  completed_ = true;
  Window& next = current();
  next.by_packets.clear();
  next.by_bytes.clear();
  next.samples = 0;
  next.start_ns = now_ns;
  next.end_ns = 0;
}

void FlowSampler::copy_window(const Window& w, uint64_t end_ns, FlowWindow& out) const {
  out.start_ns = w.start_ns;
  out.end_ns = end_ns;
  // Within the capacity reserved at construction: no allocation.
  out.by_packets.assign(w.by_packets.begin(), w.by_packets.end());
  out.by_bytes.assign(w.by_bytes.begin(), w.by_bytes.end());
}

FlowWindow FlowSampler::last_window(uint64_t now_ns) const {
  FlowWindow out;
  if (completed_) {
    const Window& w = windows_[current_ ^ 1];
    copy_window(w, w.end_ns, out);
  } else {
    copy_window(current(), now_ns, out);
  }
  return out;
}

void FlowSampler::serve(uint64_t now_ns) {
  const uint64_t asked = asked_.load(std::memory_order_acquire);
  if (completed_) {
    const Window& w = windows_[current_ ^ 1];
    copy_window(w, w.end_ns, answer_);
  } else {
    copy_window(current(), now_ns, answer_);
  }
  served_local_ = asked;
  // Release: the copy above is visible to whoever reads this number.
  served_.store(asked, std::memory_order_release);
}

}  // namespace sluice
