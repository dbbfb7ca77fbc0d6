// Holds packets a shaping rule delayed until their departure time, and releases them in
// departure order: (depart_ns, arrival sequence). Replay drives it with capture timestamps.
//
// The bulk of the work is the core's TimingWheel (1 us slots over the pipeline's longest
// max-delay), the same structure the live dataplane uses. A small ordered "spill" set takes
// what the wheel cannot: a full wheel, a departure earlier than the time the wheel has already
// advanced to (the input clock stepped backwards), and items the wheel hands out up to a slot
// early. Both are released together and sorted, so the output order never depends on which
// of the two held a packet, and nothing leaves before its departure time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "timing_wheel.hpp"

namespace sluice {

struct HeldPacket {
  uint64_t seq = 0;  // arrival order, breaks ties between equal departure times
  uint32_t wire_len = 0;
  std::vector<uint8_t> frame;
};

class DepartureQueue {
 public:
  static constexpr uint64_t kSlotNs = 1000;                // 1 us
  static constexpr uint64_t kMaxSlots = uint64_t(1) << 20;  // bounds the ring's memory
  static constexpr size_t kWheelCapacity = size_t(1) << 16; // beyond this, the spill set

  // max_delay_ns: the longest delay any packet can get (the pipeline's max_delay_ns()).
  explicit DepartureQueue(uint64_t max_delay_ns)
      : slot_ns_(std::max(kSlotNs, max_delay_ns / kMaxSlots + 1)),
        horizon_ns_(max_delay_ns + slot_ns_) {}

  // Holds a packet until depart_ns. Call release(now) first at each new time: the wheel
  // starts at the first time it is given.
  void hold(uint64_t depart_ns, HeldPacket packet) {
    uint64_t seq = packet.seq;
    store_.emplace(seq, std::move(packet));
    // The wheel only holds sequence numbers, so a refused push loses nothing.
    if (wheel_ && depart_ns >= wheel_now_ && depart_ns - wheel_now_ < horizon_ns_ &&
        wheel_->push(depart_ns, seq))
      return;
    spill_.emplace(depart_ns, seq);
  }

  // Calls fn(depart_ns, HeldPacket&&) for every packet due at or before now_ns, in order.
  template <class F>
  void release(uint64_t now_ns, F&& fn) {
    std::vector<Key> due;
    // No shaping rule, no wheel (anything held anyway waits in the spill set).
    // A horizon of at most max-delay's 60 s always fits the wheel; were one refused, the spill
    // set would hold everything.
    if (!wheel_ && horizon_ns_ > slot_ns_)
      if (auto w = TimingWheel<uint64_t>::create(slot_ns_, horizon_ns_, kWheelCapacity, now_ns))
        wheel_.emplace(std::move(w).value());
    wheel_now_ = std::max(wheel_now_, now_ns);
    if (wheel_) wheel_->drain(now_ns, [&](uint64_t depart_ns, auto&& seq) {
      // Never early, whatever the wheel's slot rounding: not yet due goes back to wait.
      if (depart_ns > now_ns) {
        spill_.emplace(depart_ns, seq);
      } else {
        due.emplace_back(depart_ns, seq);
      }
    });
    take_spilled(now_ns, due);
    emit(due, fn);
  }

  // End of input: everything still held, in order.
  template <class F>
  void release_all(F&& fn) {
    std::vector<Key> due;
    if (wheel_) wheel_->drain_all([&](uint64_t depart_ns, auto&& seq) { due.emplace_back(depart_ns, seq); });
    take_spilled(UINT64_MAX, due);
    emit(due, fn);
  }

  size_t size() const { return store_.size(); }

 private:
  using Key = std::pair<uint64_t, uint64_t>;  // (depart_ns, seq)

  void take_spilled(uint64_t now_ns, std::vector<Key>& due) {
    auto end = spill_.upper_bound(Key{now_ns, UINT64_MAX});
    due.insert(due.end(), spill_.begin(), end);
    spill_.erase(spill_.begin(), end);
  }

  template <class F>
  void emit(std::vector<Key>& due, F& fn) {
    // A 1 us slot can hold several departures, and the spill set interleaves with the wheel.
    std::sort(due.begin(), due.end());
    for (const Key& key : due) {
      auto it = store_.find(key.second);
      HeldPacket packet = std::move(it->second);
      store_.erase(it);
      fn(key.first, std::move(packet));
    }
  }

  uint64_t slot_ns_;     // 1 us, coarser only for very long max-delays (the order is exact anyway)
  uint64_t horizon_ns_;
  uint64_t wheel_now_ = 0;  // latest time the wheel was drained to
  std::optional<TimingWheel<uint64_t>> wheel_;
  std::set<Key> spill_;
  std::unordered_map<uint64_t, HeldPacket> store_;  // seq -> packet
};

}  // namespace sluice
