// A lookup from a key (an address, a port, a VLAN id) to the value of the interval holding it,
// over sorted disjoint intervals covering the whole key space. The classifier turns each match
// field into one: nested prefixes become the disjoint intervals between their boundaries, so a
// longest-prefix match is "the last interval starting at or below the key".
//
// The search is a direct index on the key's top bits (about one bucket per interval, more if
// the intervals cluster, at most 2^16 buckets), then a binary search inside the bucket: a
// table of n intervals costs ~4n bytes of index (at most 256 KiB), and a lookup reads the
// bucket and, for most keys, one or two starts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace sluice {

template <class Key, unsigned kKeyBits>
class IntervalIndex {
 public:
  // (start, value), sorted by start, the first starting at 0. Neighbours of equal value merge.
  void build(const std::vector<std::pair<Key, uint32_t>>& intervals) {
    starts_.clear();
    values_.clear();
    for (const auto& [start, value] : intervals) {
      if (!values_.empty() && values_.back() == value) continue;
      starts_.push_back(start);
      values_.push_back(value);
    }
    if (starts_.empty()) starts_.push_back(0), values_.push_back(0);
    unsigned bits = 1;
    while (bits < 16 && bits < kKeyBits && (size_t{1} << bits) < starts_.size()) ++bits;
    // Clustered intervals (a hundred /24s inside one /16, neighbouring port ranges) would fill
    // one bucket and leave the others empty, and every key near them would take the halving:
    // more buckets, up to 2^16, until none starts more than a few intervals. Past 2^8 buckets
    // per interval, only while more split a crowded bucket further: for a few intervals in a
    // cluster narrower than 2^16 buckets can split (IPv6 prefixes inside one /32), 65,537
    // bucket words bought nothing but their fill, 256 KiB written per field and rules change.
    // (A key near such a cluster then shares its bucket with the cluster at most once in 2^8.)
    const unsigned most_bits = std::min(16u, kKeyBits);
    const unsigned plenty_bits = std::min(most_bits, bits + 8);
    const size_t crowded_at_most_bits = starts_in_crowded_buckets(most_bits);
    for (;;) {
      if (bits >= most_bits) break;
      const size_t crowded = starts_in_crowded_buckets(bits);
      if (crowded == 0 || (bits >= plenty_bits && crowded == crowded_at_most_bits)) break;
      ++bits;
    }
    shift_ = kKeyBits - bits;
    const size_t nbuckets = size_t{1} << bits;
    // Bucket j holds the last interval starting at or below its first key, j << shift_:
    // interval i holds the buckets from the first at or above its start to the one before
    // the first at or above the next start, and bucket nbuckets the last interval. Written
    // run by run, each word once (up to 2^16 buckets: a walk testing every bucket's key
    // against the next start cost more than the rest of a Classifier's build).
    buckets_.clear();
    buckets_.reserve(nbuckets + 1);
    const Key low_bits = (Key(1) << shift_) - 1;
    for (size_t i = 0; i + 1 < starts_.size(); ++i) {
      const Key next = starts_[i + 1];
      const size_t end = size_t(next >> shift_) + ((next & low_bits) != 0 ? 1 : 0);
      buckets_.insert(buckets_.end(), end - buckets_.size(), uint32_t(i));
    }
    buckets_.insert(buckets_.end(), nbuckets + 1 - buckets_.size(), uint32_t(starts_.size() - 1));
  }

  // A bucket starting more intervals than this is split further, if the key has bits left.
  static constexpr size_t kCrowdedBucket = 4;

  uint32_t lookup(Key key) const {
    const size_t j = size_t(key >> shift_);
    const uint32_t first = buckets_[j];
    // The last start <= key among [first, last]: a branchless halving (the keys are random,
    // so a compare-and-branch would mispredict on every other step).
    const Key* base = starts_.data() + first;
    uint32_t len = buckets_[j + 1] - first + 1;
    while (len > 1) {
      const uint32_t half = len / 2;
      base = base[half] <= key ? base + half : base;
      len -= half;
    }
    return values_[size_t(base - starts_.data())];
  }

  // Every key gives the same value (then the caller may skip the lookup).
  bool uniform() const { return values_.size() == 1; }
  uint32_t first_value() const { return values_.front(); }
  size_t interval_count() const { return starts_.size(); }
  size_t memory_bytes() const {
    return starts_.capacity() * sizeof(Key) + (values_.capacity() + buckets_.capacity()) * 4;
  }

 private:
  // With 2^bits buckets, how many interval starts share a bucket with more than
  // kCrowdedBucket others (starts_ is sorted). It falls as bits grow, never rises: a start
  // crowded with more bits is crowded with fewer.
  size_t starts_in_crowded_buckets(unsigned bits) const {
    const unsigned shift = kKeyBits - bits;
    size_t crowded = 0, run = 1;
    for (size_t i = 1; i <= starts_.size(); ++i) {
      if (i < starts_.size() && (starts_[i] >> shift) == (starts_[i - 1] >> shift)) {
        ++run;
        continue;
      }
      if (run > kCrowdedBucket) crowded += run;
      run = 1;
    }
    return crowded;
  }

  std::vector<Key> starts_;
  std::vector<uint32_t> values_;
  std::vector<uint32_t> buckets_;
  unsigned shift_ = kKeyBits - 1;
};

}  // namespace sluice
