// Packets waiting for one TX queue. When the device takes fewer than offered (a full TX ring:
// back-pressure), the rest stay here, in order, and the next flush retries them; only a packet
// that finds the buffer itself full is refused, and the caller drops and counts it. DPDK's
// rte_eth_tx_buffer drops on the first short send instead, which is why this exists.
//
// A ring of item pointers allocated once (no allocation when sending). Generic over the item
// and the send function, so it is tested without DPDK. One owner (the worker of the queue).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "result.hpp"

namespace sluice {

template <class T>
class TxBuffer {
 public:
  // capacity: rounded up to a power of two; an invalid_input error outside [1, 2^30].
  static Result<TxBuffer> create(size_t capacity) {
    if (capacity == 0 || capacity > kMaxCapacity)
      return invalid_input("tx buffer: capacity " + std::to_string(capacity) +
                           " must be in [1, 2^30]");
    size_t n = 1;
    while (n < capacity) n <<= 1;
    return TxBuffer(n);
  }
  static constexpr size_t kMaxCapacity = size_t{1} << 30;

  // False when full: the item stays with the caller.
  bool push(T item) {
    if (size() == ring_.size()) return false;
    ring_[tail_++ & mask_] = item;
    return true;
  }

  // Offers the buffered items, oldest first, to send(T* items, uint16_t n) -> uint16_t taken,
  // which must take a prefix of them. Stops at the first short send (the device is full).
  // Returns the number taken.
  template <class Send>
  size_t flush(Send&& send) {
    size_t taken = 0;
    while (head_ != tail_) {
      // The oldest items up to the end of the ring, at most what a uint16_t count can say.
      const size_t at = head_ & mask_;
      const size_t n = std::min({size(), ring_.size() - at,
                                 size_t(std::numeric_limits<uint16_t>::max())});
      const size_t sent = send(&ring_[at], uint16_t(n));
      head_ += sent;
      taken += sent;
      if (sent < n) break;
    }
    return taken;
  }

  // Hands every buffered item to fn (shutdown: free them). Returns how many.
  template <class F>
  size_t clear(F&& fn) {
    size_t n = 0;
    for (; head_ != tail_; ++head_, ++n) fn(ring_[head_ & mask_]);
    return n;
  }

  size_t size() const { return size_t(tail_ - head_); }
  bool empty() const { return head_ == tail_; }
  size_t capacity() const { return ring_.size(); }

 private:
  explicit TxBuffer(size_t power_of_two) : ring_(power_of_two), mask_(power_of_two - 1) {}

  std::vector<T> ring_;
  size_t mask_ = 0;
  // Free-running counters: head_ == tail_ is empty, tail_ - head_ == capacity is full.
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace sluice
