#include "flow_table.hpp"

#include <algorithm>
#include <limits>
#include <new>
#include <stdexcept>
#include <thread>

namespace sluice {
namespace {

constexpr uint64_t kTickNs = uint64_t{1} << FlowTable::kTickShift;
// Idle distances are signed 32-bit tick differences, so 2^31 - 1 ticks (~26 days) is the most
// we can tell apart; it also serves as "never" for a disabled expiry.
constexpr uint32_t kMaxIdleTicks = std::numeric_limits<int32_t>::max();
// Bound on waiting for another thread's claim in the same set. A claim takes nanoseconds; we
// only hit this when the claimer was preempted, and then report no_slot rather than block.
constexpr unsigned kSpinLimit = 1u << 14;

// Ticks of idleness that guarantee at least `ns` really elapsed: touched anywhere in tick L,
// seen in tick N, the real idle time is more than (N - L - 1) ticks.
uint32_t certain_idle_ticks(uint64_t ns) {
  if (ns == 0) return 0;
  const uint64_t ticks = (ns + kTickNs - 1) / kTickNs + 1;
  return uint32_t(std::min<uint64_t>(ticks, kMaxIdleTicks));
}

// Idle ticks between last_seen and now, modulo 2^32; a last_seen ahead of now (another
// thread's slightly later clock, or our clock stepped back) counts as not idle at all.
uint32_t idle_ticks(uint32_t last_seen, uint32_t now) {
  const auto d = static_cast<int32_t>(now - last_seen);
  return d < 0 ? 0 : uint32_t(d);
}

bool is_live(uint64_t t) { return t != FlowTable::kEmpty && !(t & FlowTable::kPending); }

// One step of a bounded wait; false once the budget is spent.
bool relax(unsigned& spins) {
  if (++spins > kSpinLimit) return false;
  if (spins % 64 == 0) {
    std::this_thread::yield();  // let a preempted claimer on this core finish
  } else {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  return true;
}

}  // namespace

FlowTable::FlowTable(uint64_t capacity, uint64_t idle_timeout_ns, uint64_t min_evict_idle_ns)
    : capacity_(capacity) {
  if (capacity > std::numeric_limits<uint64_t>::max() / 2 / sizeof(FlowSlot))
    throw std::length_error("flow table capacity too large");
  nsets_ = std::max<uint64_t>(1, (capacity + kWays - 1) / kWays);
  sets_.reset(new Set[nsets_]());  // value-initialised: every tag empty
  expire_ticks_ = idle_timeout_ns == 0 ? kMaxIdleTicks + 1u : certain_idle_ticks(idle_timeout_ns);
  evict_ticks_ = certain_idle_ticks(min_evict_idle_ns);
}

const FlowSlot* FlowTable::find(uint64_t hash) const {
  const uint64_t tag = tag_of(hash);
  for (const FlowSlot& s : sets_[set_of(tag)].slot)
    if (s.tag.load(std::memory_order_acquire) == tag) return &s;
  return nullptr;
}

void FlowTable::abandon(FlowSlot& s) {
  s.tag.store(kEmpty, std::memory_order_release);
  active_.fetch_sub(1, std::memory_order_relaxed);
}

FlowTable::Lookup FlowTable::claim(Set& set, uint64_t tag, uint32_t tick) {
  const uint64_t pending = tag | kPending;
  unsigned spins = 0;
  for (;;) {
    // 1. Scan: the flow may have appeared meanwhile; otherwise note the candidates.
    int empty = -1, stale = -1, lru = -1;
    uint64_t stale_tag = 0, lru_tag = 0;
    uint32_t lru_idle = 0;
    bool ours_pending = false, others_pending = false;
    for (unsigned i = 0; i < kWays; ++i) {
      FlowSlot& s = set.slot[i];
      const uint64_t t = s.tag.load(std::memory_order_acquire);
      if (t == tag) {
        touch(s, tick);
        return {&s, Outcome::found};
      }
      if (t == pending) {
        ours_pending = true;
      } else if (t == kEmpty) {
        if (empty < 0) empty = int(i);
      } else if (t & kPending) {
        others_pending = true;
      } else {
        const uint32_t idle = idle_ticks(s.last_seen.load(std::memory_order_relaxed), tick);
        if (idle >= expire_ticks_) {
          if (stale < 0) stale = int(i), stale_tag = t;
        } else if (lru < 0 || idle > lru_idle) {
          lru = int(i), lru_tag = t, lru_idle = idle;
        }
      }
    }
    // Another thread is creating this very flow: wait for it rather than race it.
    if (ours_pending) {
      if (!relax(spins)) return {nullptr, Outcome::no_slot};
      continue;
    }

    // 2. Pick: a stale (expired) slot replaces a dead flow, so it needs no capacity; an empty
    //    slot needs a unit of capacity; otherwise the LRU flow, if idle long enough.
    int victim;
    uint64_t expected;
    Outcome outcome = Outcome::created;
    bool reserved = false;
    if (stale >= 0) {
      victim = stale, expected = stale_tag;
    } else if (empty >= 0 && (reserved = reserve())) {
      victim = empty, expected = kEmpty;
    } else if (lru >= 0 && lru_idle >= evict_ticks_) {
      victim = lru, expected = lru_tag, outcome = Outcome::evicted;
    } else {
      // Full of active flows. A pending claim may still publish or abandon: look again briefly.
      if (others_pending && relax(spins)) continue;
      return {nullptr, Outcome::no_slot};
    }

    // 3. Claim with one CAS; it fails if anyone touched the tag since our scan.
    FlowSlot& mine = set.slot[victim];
    if (!mine.tag.compare_exchange_strong(expected, pending, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
      if (reserved) active_.fetch_sub(1, std::memory_order_relaxed);
      if (!relax(spins)) return {nullptr, Outcome::no_slot};
      continue;
    }
    if (outcome == Outcome::evicted) evicted_.fetch_add(1, std::memory_order_relaxed);

    // 4. Re-read the other ways (seq_cst, after our seq_cst CAS: of two racing claimers of
    //    this flow, at least one sees the other). Lower way wins; see the header.
    bool restart = false;
    for (unsigned j = 0; j < kWays && !restart; ++j) {
      if (int(j) == victim) continue;
      FlowSlot& other = set.slot[j];
      for (;;) {
        const uint64_t t = other.tag.load(std::memory_order_seq_cst);
        if (t == tag) {  // it got there first
          abandon(mine);
          touch(other, tick);
          return {&other, Outcome::found};
        }
        if (t != pending) break;
        if (int(j) < victim) {  // it wins: step aside, then wait for it in step 1
          abandon(mine);
          restart = true;
          break;
        }
        // We win; it will step aside (or publish first). Wait, holding our claim.
        if (!relax(spins)) {
          abandon(mine);
          return {nullptr, Outcome::no_slot};
        }
      }
    }
    if (restart) continue;
    return {&mine, outcome};
  }
}

bool FlowTable::reserve() {
  uint64_t n = active_.load(std::memory_order_relaxed);
  while (n < capacity_) {
    if (active_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed,
                                      std::memory_order_relaxed))
      return true;
  }
  return false;
}

size_t FlowTable::expire(uint64_t now_ns, size_t max_slots) {
  const uint64_t total = slot_count();
  const uint64_t n = std::min<uint64_t>(max_slots, total);
  if (n == 0) return 0;
  uint64_t i = cursor_.fetch_add(n, std::memory_order_relaxed) % total;
  const uint32_t tick = tick_of(now_ns);
  size_t freed = 0;
  for (uint64_t k = 0; k < n; ++k) {
    FlowSlot& s = sets_[i / kWays].slot[i % kWays];
    uint64_t t = s.tag.load(std::memory_order_relaxed);
    // The CAS from the exact tag we judged frees only that flow, never a newer one.
    if (is_live(t) &&
        idle_ticks(s.last_seen.load(std::memory_order_relaxed), tick) >= expire_ticks_ &&
        s.tag.compare_exchange_strong(t, kEmpty, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      active_.fetch_sub(1, std::memory_order_relaxed);
      ++freed;
    }
    if (++i == total) i = 0;
  }
  return freed;
}

}  // namespace sluice
