// Per-rule table of per-flow bucket state (SPEC §3 Flows), shared by every worker thread.
//
// Layout: sets of kWays = 8 slots of 32 bytes (one set = 256 bytes = 4 cache lines, 256-aligned).
// A flow lives in the set picked by the high bits of its hash, in any of the 8 ways. Slots are
// allocated once, in the constructor; nothing in the hot path allocates, so a flood of new flows
// degrades to eviction / no_slot, never to more memory (SPEC §6).
//
// Memory: 32 bytes per slot, ceil(capacity / 8) sets, so memory_bytes() / capacity is 32 bytes
// per flow (plus a fixed ~200 bytes for the table object; at most 7 spare slots of rounding).
//
// Identity: the caller's 64-bit seeded hash IS the flow key. The slot stores a 63-bit fingerprint
// of it (bit 63 marks a slot being initialised, see `tag` below); two flows whose hashes share a
// fingerprint share a bucket, which with a random per-start seed is negligible and unforceable.
//
// Concurrency: lock-free; any number of threads may call find_or_insert() and expire() at once.
//  - Lookup of an existing flow is 8 acquire loads and a relaxed store of last_seen.
//  - A new flow claims a slot with one CAS on its tag (empty/stale/victim -> PENDING|fingerprint),
//    lets init() set state[], then publishes the fingerprint with a release store.
//  - No duplicates: after its CAS the claimer re-reads the other 7 tags (seq_cst on both sides,
//    so of two racing claimers at least one sees the other). The pending tag carries the
//    fingerprint, so claimers of *different* flows never wait for each other; of two claimers of
//    the same flow, the one in the higher way backs off (frees its slot) and the one in the lower
//    way waits for the higher one to back off or publish. Waits are bounded: a thread that would
//    spin too long (its peer was preempted) gives up and reports no_slot.
//  - Known, accepted race: a packet that finds its flow at the very moment another thread
//    expires or evicts that slot may be charged against the slot after it was recycled (one
//    packet per such race). Only flows idle for >= min_evict_idle (evict) or idle_timeout
//    (expire) are recycled, so this needs a packet to arrive in the nanoseconds the recycle takes.
//
// Time: last_seen is a coarse tick (now_ns >> 20, ~1.05 ms) compared modulo 2^32 as a signed
// distance (a clock stepping back counts as "just seen", not as idle for 50 days). Idle
// decisions are conservative: a flow is treated as idle for d only once d has certainly elapsed,
// so expiry and eviction happen never early and at most ~2 ticks (~2.1 ms) late.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace sluice {

struct alignas(32) FlowSlot {
  // Bucket words, owned by the caller. First, so they are 16-byte aligned: the two-bucket meters
  // update both words with one 128-bit CAS (cmpxchg16b faults on a misaligned operand).
  alignas(16) std::atomic<uint64_t> state[2];
  // 0 = empty; bit 63 set = being initialised for the flow in the low 63 bits;
  // otherwise the flow's fingerprint (FlowTable::tag_of(hash), never 0, bit 63 clear).
  std::atomic<uint64_t> tag;
  std::atomic<uint32_t> last_seen;  // coarse time: now_ns >> 20, compared modulo 2^32
  uint32_t reserved;
};
static_assert(sizeof(FlowSlot) == 32, "a flow slot is 32 bytes");
static_assert(alignof(FlowSlot) == 32);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

class FlowTable {
 public:
  static constexpr unsigned kWays = 8;
  static constexpr unsigned kTickShift = 20;  // last_seen tick = now_ns >> 20 (~1.05 ms)
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kPending = uint64_t{1} << 63;

  struct alignas(kWays * sizeof(FlowSlot)) Set {
    FlowSlot slot[kWays];
  };
  static_assert(sizeof(Set) == 256);

  // capacity: max live flows (exactly enforced). idle_timeout_ns: a flow idle that long is gone
  // (0 = flows never expire; values past 2^31 ticks, ~26 days, act as "never"). min_evict_idle_ns:
  // an LRU victim must have been idle at least this long, else the new flow gets no slot (0 = any
  // victim will do). Throws std::bad_alloc / std::length_error if the slots cannot be allocated.
  FlowTable(uint64_t capacity, uint64_t idle_timeout_ns, uint64_t min_evict_idle_ns = 1'000'000);
  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;

  enum class Outcome : uint8_t { found, created, evicted, no_slot };
  struct Lookup {
    FlowSlot* slot;  // nullptr on no_slot
    Outcome outcome;
  };

  // Finds the flow or claims a slot for it. On created/evicted, init(FlowSlot&) sets state[]
  // before the slot becomes visible to other threads under this flow's tag. Touches last_seen.
  // init should not throw; if it does, the claim is undone and the exception propagates.
  template <class Init>
  Lookup find_or_insert(uint64_t hash, uint64_t now_ns, Init&& init);

  // Read-only lookup (no insert, no touch); nullptr if absent or not yet published.
  const FlowSlot* find(uint64_t hash) const;

  // Starts loading the set a hash lives in (4 cache lines), so that a burst can hash every
  // packet first and find_or_insert() later hits cache instead of waiting on memory.
  void prefetch(uint64_t hash) const {
    const Set* set = &sets_[set_of(tag_of(hash))];
    for (unsigned line = 0; line < sizeof(Set); line += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(set) + line, 1, 3);
  }

  // Visits at most max_slots slots from where the previous call stopped (wrapping), freeing the
  // idle ones. Concurrent callers get disjoint ranges. Returns the number freed.
  size_t expire(uint64_t now_ns, size_t max_slots);

  uint64_t active() const { return active_.load(std::memory_order_relaxed); }
  // Live flows pushed out by a new flow before their idle timeout (expired ones do not count).
  uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }
  size_t memory_bytes() const { return sizeof(*this) + nsets_ * sizeof(Set); }

  // Introspection (tests, diagnostics).
  size_t slot_count() const { return nsets_ * kWays; }
  const FlowSlot& slot_at(size_t i) const { return sets_[i / kWays].slot[i % kWays]; }
  size_t set_index(uint64_t hash) const { return set_of(tag_of(hash)); }
  // The fingerprint stored in `tag` for a hash: low 63 bits, 0 remapped to 1.
  static constexpr uint64_t tag_of(uint64_t hash) {
    const uint64_t t = hash & ~kPending;
    return t == kEmpty ? 1 : t;
  }
  static constexpr uint32_t tick_of(uint64_t now_ns) { return uint32_t(now_ns >> kTickShift); }

 private:
  // Fastrange on the fingerprint's top bits: uses the high bits of the hash (the low bits may
  // be used elsewhere) and needs no power-of-two set count, so memory stays at 32 B/flow.
  size_t set_of(uint64_t tag) const {
    return size_t((static_cast<unsigned __int128>(tag << 1) * nsets_) >> 64);
  }
  static void touch(FlowSlot& s, uint32_t tick) {
    // Skip the store when unchanged: most packets of a busy flow land in the same tick.
    if (s.last_seen.load(std::memory_order_relaxed) != tick)
      s.last_seen.store(tick, std::memory_order_relaxed);
  }
  // Slow path: the flow was not in the set. Returns found (it appeared meanwhile), no_slot, or
  // created/evicted with the slot held as PENDING|tag for the caller to init and publish.
  Lookup claim(Set& set, uint64_t tag, uint32_t tick);
  // Takes one unit of capacity if the table is below capacity.
  bool reserve();
  // Gives up a held claim: the slot becomes empty (any flow it held before is gone).
  void abandon(FlowSlot& s);
  static void publish(FlowSlot& s, uint64_t tag, uint32_t tick) {
    s.last_seen.store(tick, std::memory_order_relaxed);
    s.tag.store(tag, std::memory_order_release);  // makes init()'s state[] visible with the tag
  }

  struct SetDeleter {
    void operator()(Set* p) const { delete[] p; }
  };

  std::unique_ptr<Set[], SetDeleter> sets_;
  uint64_t nsets_;
  uint64_t capacity_;
  uint32_t expire_ticks_;  // idle ticks at which a flow is certainly expired
  uint32_t evict_ticks_;   // idle ticks at which a flow may certainly be evicted
  // Written by every inserting / expiring thread: keep them off the read-mostly line above.
  alignas(64) std::atomic<uint64_t> active_{0};
  std::atomic<uint64_t> evicted_{0};
  alignas(64) std::atomic<uint64_t> cursor_{0};
};

template <class Init>
FlowTable::Lookup FlowTable::find_or_insert(uint64_t hash, uint64_t now_ns, Init&& init) {
  const uint64_t tag = tag_of(hash);
  const uint32_t tick = tick_of(now_ns);
  Set& set = sets_[set_of(tag)];
  for (FlowSlot& s : set.slot) {
    if (s.tag.load(std::memory_order_acquire) == tag) {
      touch(s, tick);
      return {&s, Outcome::found};
    }
  }
  Lookup l = claim(set, tag, tick);
  if (l.outcome == Outcome::created || l.outcome == Outcome::evicted) {
    try {
      init(*l.slot);
    } catch (...) {
      abandon(*l.slot);
      throw;
    }
    publish(*l.slot, tag, tick);
  }
  return l;
}

}  // namespace sluice
