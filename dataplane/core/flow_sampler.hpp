// One worker's view of its busiest flows, for `sluicectl flows top`: a sample of the packets
// of keyed rules counted per (rule state, flow key) in two heavy-hitter sketches
// (heavy_hitters.hpp; one ranked by packets, one by bytes), per time window.
//
// Cost to the worker. Per burst: one subtraction and a branch (observe()). A packet is
// sampled after a random gap of 1 to 2N-1 packets (mean N, so no periodic pattern in the
// traffic aliases with it); a sampled packet is parsed and classified again (against the
// same snapshot the burst runs, so it meets the same rule) and counted with weight N in both
// sketches. N is a power of two that adapts to the traffic: it doubles whenever a window has
// taken kMaxSamplesPerWindow samples since it began or N last changed, and halves when a
// whole window took fewer than a quarter of that. So a worker samples at most a few tens of thousands of packets
// a second whatever its packet rate, and at a low rate it counts (almost) every packet.
// Nothing allocates after construction.
//
// Windows. The worker counts into the current window; at the first burst boundary past its
// end (tick()) it becomes the last complete one, with its start and end in the worker's
// clock, so rates are counts over the real duration. The control thread asks for the last
// complete window (the current one, until one completes) and the worker copies it at its next
// burst boundary, as CountersHandoff does with the counters: ask(), poll answered(), read
// answer(). One reader at a time.
//
// Which packets: those that match a keyed rule (first match), whatever the rule then does
// with them: offered rates, the traffic that makes the flow busy.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "heavy_hitters.hpp"
#include "pipeline.hpp"

namespace sluice {

struct RulesSnapshot;

struct FlowSamplerOptions {
  uint64_t window_ns = 1'000'000'000;
  size_t capacity = 256;  // counters per sketch: keys a worker can name per window
  // 0: adaptive (above); otherwise every packet has chance 1/fixed_every (a power of two).
  uint32_t fixed_every = 0;
  uint64_t seed = 1;  // index hash and sampling gaps: random per start in a dataplane
};

// A window's counts (estimated packets and bytes: samples times their N), as handed over.
struct FlowWindow {
  uint64_t start_ns = 0, end_ns = 0;  // the worker's clock
  std::vector<FlowCount> by_packets;  // weight: packets
  std::vector<FlowCount> by_bytes;    // weight: bytes
};

class FlowSampler {
 public:
  static constexpr uint32_t kMaxSamplesPerWindow = 16384;
  static constexpr uint32_t kMaxEvery = uint32_t{1} << 20;

  // Whether options can be built: a dataplane checks its configuration with it first.
  static Status check(const FlowSamplerOptions& opts);

  // Options that fail check() are made valid here (window 1 s, the next power of two,
  // capacity clamped), never thrown: no exception leaves the core.
  explicit FlowSampler(const FlowSamplerOptions& opts);
  FlowSampler(const FlowSampler&) = delete;
  FlowSampler& operator=(const FlowSampler&) = delete;

  // Worker, once per burst, before the pipeline runs it (a DSCP mark may change a frame's
  // match): `snap` is what the burst runs against, `port` its ingress port.
  void observe(const RulesSnapshot& snap, const Pipeline::Frame* frames, size_t n, uint16_t port) {
    observe_at(snap, n, port, [frames](size_t i) -> const Pipeline::Frame& { return frames[i]; });
  }
  // The same, for a worker that reads its frames in place: frame_at(i) gives frame i as the
  // pipeline will (called only for the packets sampled).
  template <class FrameAt>
  void observe_at(const RulesSnapshot& snap, size_t n, uint16_t port, const FrameAt& frame_at) {
    countdown_ -= int64_t(n);
    if (countdown_ <= 0) [[unlikely]] sample(snap, n, port, frame_at);
  }

  // Worker, between bursts: closes the window if its time is up, answers a question.
  void tick(uint64_t now_ns) {
    if (!started_) [[unlikely]] start(now_ns);
    if (now_ns - current().start_ns >= opts_.window_ns) [[unlikely]] roll(now_ns);
    if (asked_.load(std::memory_order_acquire) != served_local_) [[unlikely]] serve(now_ns);
  }

  // Reader (see above).
  void ask() noexcept { asked_.store(++question_, std::memory_order_release); }
  bool answered() const noexcept { return served_.load(std::memory_order_acquire) == question_; }
  const FlowWindow& answer() const noexcept { return answer_; }

  // The window a reader would get, read directly: only while the worker does not run, or
  // by the worker's own thread (a single-threaded caller: replay, tests).
  FlowWindow last_window(uint64_t now_ns) const;

  uint32_t every() const { return every_; }
  size_t memory_bytes() const;

 private:
  struct Window {
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;  // once complete
    uint64_t samples = 0;
    HeavyHitters by_packets, by_bytes;
    Window(size_t capacity, uint64_t seed) : by_packets(capacity, seed), by_bytes(capacity, seed) {}
  };

  Window& current() { return windows_[current_]; }
  const Window& current() const { return windows_[current_]; }
  // Out of line: the burst loop stays small.
  template <class FrameAt>
  [[gnu::noinline]] void sample(const RulesSnapshot& snap, size_t n, uint16_t port,
                                const FrameAt& frame_at) {
    // countdown_ + n - 1 is the position of the packet the gap ends on; a gap shorter than
    // the rest of the burst samples again in it.
    while (countdown_ <= 0) {
      count(snap, frame_at(size_t(countdown_ + int64_t(n) - 1)), port);
      sampled();
    }
  }
  // After a sample: the adaptive interval, and the gap to the next sample.
  void sampled();
  void count(const RulesSnapshot& snap, const Pipeline::Frame& frame, uint16_t port);
  uint64_t next_gap();
  void start(uint64_t now_ns);
  void roll(uint64_t now_ns);
  void serve(uint64_t now_ns);
  void copy_window(const Window& w, uint64_t end_ns, FlowWindow& out) const;

  FlowSamplerOptions opts_;
  int64_t countdown_ = 1;
  uint32_t every_ = 1;
  uint32_t samples_since_change_ = 0;
  uint64_t rng_;
  Window windows_[2];
  unsigned current_ = 0;
  bool started_ = false;    // the first tick() starts the first window
  bool completed_ = false;  // windows_[current_ ^ 1] is a complete window
  FlowWindow answer_;
  // As in CountersHandoff: the reader's word on a line of its own.
  alignas(64) std::atomic<uint64_t> asked_{0};
  uint64_t question_ = 0;
  alignas(64) std::atomic<uint64_t> served_{0};
  uint64_t served_local_ = 0;
};

}  // namespace sluice
