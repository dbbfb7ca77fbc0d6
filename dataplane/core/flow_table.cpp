#include "flow_table.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <new>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "flow_eviction.hpp"

namespace sluice {
namespace {

// Idle distances are signed 24-bit tick differences: 2^23 - 1 ticks is the most we can tell
// apart, and it also serves as "never" for a disabled expiry.
constexpr uint32_t kMaxIdleTicks = (uint32_t{1} << (FlowTable::kTickBits - 1)) - 1;
// Timeouts are kept below this many ticks, so an idle flow is judged well before its distance
// could wrap (the expiry sweep visits every slot far more often than that).
constexpr uint64_t kMaxTimeoutTicks = uint64_t{1} << 22;
// Bound on waiting for another thread's claim in the same set. A claim takes nanoseconds; we
// only hit this when the claimer was preempted, and then report no_slot rather than block.
constexpr unsigned kSpinLimit = 1u << 14;
constexpr size_t kHugePage = size_t{2} << 20;
// A new flow goes to its first set while that has at least this many free slots; only a
// nearly full first set hands it to the emptier of the two (see claim()).
constexpr unsigned kKeepFirstEmpties = 2;

// FlowTable::totals(): every live table's share.
std::atomic<uint64_t> g_tables{0}, g_capacity{0}, g_reserved{0};

// Ticks of idleness that guarantee at least `ns` really elapsed: touched anywhere in tick L,
// seen in tick N, the real idle time is more than (N - L - 1) ticks.
uint32_t certain_idle_ticks(uint64_t ns, unsigned shift) {
  if (ns == 0) return 0;
  const uint64_t tick_ns = uint64_t{1} << shift;
  const uint64_t ticks = (ns + tick_ns - 1) / tick_ns + 1;
  return uint32_t(std::min<uint64_t>(ticks, kMaxIdleTicks));
}

// Idle ticks between the tick in a tag word and now, modulo 2^24; a tick ahead of now (another
// thread's slightly later clock, or our clock stepped back) counts as not idle at all.
uint32_t idle_ticks(uint64_t tag, uint32_t now) {
  const uint32_t d = (now - uint32_t(tag & FlowTable::kTickMask)) & uint32_t(FlowTable::kTickMask);
  return d > kMaxIdleTicks ? 0 : d;  // negative as a 24-bit signed distance
}

bool is_live(uint64_t t) { return t != FlowTable::kEmpty && !(t & FlowTable::kPending); }

// The word a claim parks in a slot: the flow's fingerprint, pending, no tick (so racing
// claimers of one flow write the very same word and recognise each other).
uint64_t pending_word(uint64_t fp) { return FlowTable::kPending | fp; }

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

FlowTable::Geometry FlowTable::geometry(uint64_t capacity, uint64_t idle_timeout_ns,
                                        uint64_t min_evict_idle_ns, unsigned slots_per_flow) {
  Geometry g;
  g.sets = std::max<uint64_t>(1, (capacity * slots_per_flow + kWays - 1) / kWays);
  // Tick: the finest one whose timeout fits kMaxTimeoutTicks.
  while (g.tick_shift < 63 && (idle_timeout_ns >> g.tick_shift) >= kMaxTimeoutTicks) ++g.tick_shift;
  g.expire_ticks = idle_timeout_ns == 0 ? kMaxIdleTicks + 1u
                                        : certain_idle_ticks(idle_timeout_ns, g.tick_shift);
  g.evict_ticks = certain_idle_ticks(min_evict_idle_ns, g.tick_shift);
  g.protect_ticks = certain_idle_ticks(kProtectIdleNs, g.tick_shift);
  return g;
}

Result<FlowTable> FlowTable::create(uint64_t capacity, uint64_t idle_timeout_ns,
                                    uint64_t min_evict_idle_ns, unsigned state_words,
                                    unsigned slots_per_flow, uint64_t dense_slots) {
  if (state_words != 1 && state_words != 2)
    return invalid_input("flow table: state_words must be 1 or 2");
  if (slots_per_flow < 1 || slots_per_flow > 8)
    return invalid_input("flow table: slots_per_flow must be in [1, 8]");
  if (capacity > kMaxCapacity)
    return invalid_input("flow table of " + std::to_string(capacity) + " flows: at most " +
                         std::to_string(kMaxCapacity) + " fit in one table");
  if (dense_slots > capacity || dense_slots > kMaxDenseSlots)
    return invalid_input("flow table: a dense table of " + std::to_string(dense_slots) +
                         " keys needs at most its capacity (" + std::to_string(capacity) +
                         ") and 2^32");
  FlowTable t;
  t.capacity_ = capacity;
  t.dense_slots_ = dense_slots;
  t.state_words_ = state_words;
  if (Status s = t.map(idle_timeout_ns, min_evict_idle_ns, slots_per_flow); !s) return s.error();
  return t;
}

FlowTable::FlowTable(FlowTable&& o) noexcept
    : sets_(o.sets_),
      mapping_(o.mapping_),
      used_sets_(std::move(o.used_sets_)),
      mapping_bytes_(o.mapping_bytes_),
      nsets_(o.nsets_),
      capacity_(o.capacity_),
      dense_slots_(o.dense_slots_),
      state_words_(o.state_words_),
      stride_words_(o.stride_words_),
      tick_shift_(o.tick_shift_),
      single_writer_(o.single_writer_),
      expire_ticks_(o.expire_ticks_),
      evict_ticks_(o.evict_ticks_),
      protect_ticks_(o.protect_ticks_),
      active_(o.active_.load(std::memory_order_relaxed)),
      evicted_(o.evicted_.load(std::memory_order_relaxed)),
      cursor_(o.cursor_.load(std::memory_order_relaxed)) {
  o.sets_ = nullptr;
  o.mapping_ = nullptr;  // the destructor of `o` unmaps nothing
}

Status FlowTable::map(uint64_t idle_timeout_ns, uint64_t min_evict_idle_ns,
                      unsigned slots_per_flow) {
  stride_words_ = kWays * (1 + state_words_);
  const uint64_t set_bytes = stride_words_ * sizeof(uint64_t);
  const Geometry g = geometry(capacity_, idle_timeout_ns, min_evict_idle_ns, slots_per_flow);
  nsets_ = g.sets;
  tick_shift_ = g.tick_shift;
  expire_ticks_ = g.expire_ticks;
  evict_ticks_ = g.evict_ticks;
  protect_ticks_ = g.protect_ticks;

  const size_t bytes = nsets_ * set_bytes;
  if (bytes <= kHeapTableBytes) {
    // A few pages at most, zeroed from the heap: a mapping of its own would cost two system
    // calls, a page fault per page and a TLB shootdown at the end, for memory that a flow or
    // two would back anyway (the pipeline fuzzer builds up to 140 such tables per input; their
    // mappings took ~15% of its wall time). bytes is a multiple of a set, so of 64.
    void* m = std::aligned_alloc(64, bytes);
    if (m == nullptr)
      return make_error("flow table of " + std::to_string(capacity_) + " flows: cannot allocate " +
                        std::to_string(bytes) + " bytes");
    std::memset(m, 0, bytes);
    mapping_ = m;
    mapping_bytes_ = bytes;
    adopt(reinterpret_cast<uintptr_t>(m));
    return Ok{};
  }
  // Anonymous memory, reserved but not written (see the header: pages are backed on first
  // use), 2 MB aligned when it is to be on huge pages.
  const bool aligned = bytes >= kHugePageTableBytes;
  mapping_bytes_ = bytes + (aligned ? kHugePage : 0);
  void* m = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return make_error("flow table of " + std::to_string(capacity_) + " flows: cannot reserve " +
                      std::to_string(bytes >> 20) + " MB (" + std::to_string(bytes) +
                      " bytes): " + std::strerror(errno));
  mapping_ = m;
  auto base = reinterpret_cast<uintptr_t>(m);
  if (aligned) base = (base + kHugePage - 1) & ~(kHugePage - 1);
  // Best effort either way: with THP off the table works the same, only with more TLB misses;
  // a small table is kept off huge pages even where THP is "always", so that a few flows
  // cost a few 4 KB pages.
  (void)madvise(reinterpret_cast<void*>(base), bytes,
                bytes >= kHugePageTableBytes ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  // The kernel's zero-filled pages are the empty table: every word 0 (kEmpty, zero state).
  // std::atomic<uint64_t> is a plain 8-byte word holding its value (lock-free, no padding),
  // so the words are used in place rather than constructed, which would write every page.
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                std::atomic<uint64_t>::is_always_lock_free &&
                std::is_trivially_destructible_v<std::atomic<uint64_t>>);
  adopt(base);
  // A huge-page table is written now, a word per 4 KB, as it always was: its 2 MB page faults
  // (each zeroing 2 MB) would stall a worker for ~100 us on the first packets, and a table
  // that large is sized on purpose (`--flows`, max-flows), so it is committed at start.
  if (bytes >= kHugePageTableBytes) {
    for (size_t w = 0; w < nsets_ * stride_words_; w += 4096 / sizeof(uint64_t))
      sets_[w].store(0, std::memory_order_relaxed);
  }
  return Ok{};
}

void FlowTable::adopt(uintptr_t base) {
  sets_ = reinterpret_cast<std::atomic<uint64_t>*>(base);
  used_sets_ = std::make_unique<std::atomic<uint64_t>[]>((nsets_ + 63) / 64);  // all 0
  g_tables.fetch_add(1, std::memory_order_relaxed);
  g_capacity.fetch_add(capacity_, std::memory_order_relaxed);
  g_reserved.fetch_add(mapping_bytes_, std::memory_order_relaxed);
}

FlowTable::~FlowTable() {
  if (!mapping_) return;
  if (on_heap()) std::free(mapping_);
  else munmap(mapping_, mapping_bytes_);
  g_tables.fetch_sub(1, std::memory_order_relaxed);
  g_capacity.fetch_sub(capacity_, std::memory_order_relaxed);
  g_reserved.fetch_sub(mapping_bytes_, std::memory_order_relaxed);
}

size_t FlowTable::resident_bytes() const {
  if (on_heap()) return mapping_bytes_;  // zeroed, so written, at creation
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((mapping_bytes_ + page - 1) / page);
  if (mincore(mapping_, mapping_bytes_, in_core.data()) != 0) return 0;
  size_t pages = 0;
  for (unsigned char c : in_core) pages += c & 1;
  return pages * page;
}

FlowTable::Totals FlowTable::totals() {
  return {g_tables.load(std::memory_order_relaxed), g_capacity.load(std::memory_order_relaxed),
          g_reserved.load(std::memory_order_relaxed)};
}

std::string FlowTable::totals_line() {
  const Totals t = totals();
  if (t.tables == 0) return {};
  return "flow tables: " + std::to_string(t.reserved_bytes >> 20) + " MB for " +
         std::to_string(t.capacity_flows) + " flows (" + std::to_string(t.tables) +
         " tables; reserved, backed as flows arrive)";
}

const std::atomic<uint64_t>* FlowTable::find(uint64_t hash) const {
  const uint64_t fp = fp_bits(hash);
  const size_t first = set_of(hash), second = second_set_of(hash);
  if (const unsigned way = scan(first, fp); way < kWays) return state_of(first, way);
  if (second == first) return nullptr;
  if (const unsigned way = scan(second, fp); way < kWays) return state_of(second, way);
  return nullptr;
}

size_t FlowTable::slot_of(const std::atomic<uint64_t>* state) const {
  const size_t word = size_t(state - sets_);
  const size_t set = word / stride_words_, in_set = word % stride_words_;
  const size_t half_words = half_offset(1, state_words_);
  const size_t half = in_set / half_words;
  return set * kWays + half * kHalfWays + (in_set % half_words - kHalfWays) / state_words_;
}

void FlowTable::abandon(std::atomic<uint64_t>& tag) {
  tag.store(kEmpty, std::memory_order_release);
  active_.fetch_sub(1, std::memory_order_relaxed);
}

FlowTable::Claim FlowTable::claim(size_t first, size_t second, uint64_t fp, uint32_t tick,
                                  unsigned home) {
  // The candidate ways: the first set's 8, then the second set's 8 (if it is another set).
  const unsigned n = second == first ? kWays : 2 * kWays;
  auto tag_at = [&](unsigned i) -> std::atomic<uint64_t>& {
    return i < kWays ? tag_of_way(first, i) : tag_of_way(second, i - kWays);
  };
  auto state_at_way = [&](unsigned i) {
    return i < kWays ? state_of(first, i) : state_of(second, i - kWays);
  };
  const uint64_t pending = pending_word(fp);
  unsigned spins = 0;
  for (;;) {
    // 1. Scan: the flow may have appeared meanwhile; otherwise note the candidates. An empty
    //    slot of the first set is preferred while it has kKeepFirstEmpties of them: packets
    //    prefetch only the first set, so a flow there costs one line per lookup and one in its
    //    second set two (dependent) lines. At full capacity ~2% of flows end up in their second
    //    set (flow_table_test prints it); always taking the emptier set would put about half of
    //    them there, and always the first set (spilling only when it is full) refused far
    //    more flows than this rule when both were tried.
    int stale = -1;
    int empty[2] = {-1, -1};
    int home_empty[2] = {-1, -1};  // the first empty way of each set's home half
    unsigned empties[2] = {0, 0};
    uint64_t stale_tag = 0;
    EvictionChoice eviction(evict_ticks_, protect_ticks_);
    bool ours_pending = false, others_pending = false;
    for (unsigned i = 0; i < n; ++i) {
      const uint64_t t = tag_at(i).load(std::memory_order_acquire);
      if ((t & ~kLifeMask) == fp) {
        touch(tag_at(i), fp, tick);
        return {{state_at_way(i), Outcome::found}, nullptr};
      }
      if (t == pending) {
        ours_pending = true;
      } else if (t == kEmpty) {
        const unsigned which = i / kWays;
        if (empty[which] < 0) empty[which] = int(i);
        if (home_empty[which] < 0 && (i % kWays) / kHalfWays == home) home_empty[which] = int(i);
        ++empties[which];
      } else if (t & kPending) {
        others_pending = true;
      } else {
        const uint32_t idle = idle_ticks(t, tick);
        if (idle >= expire_ticks_) {
          if (stale < 0) stale = int(i), stale_tag = t;
        } else {
          eviction.consider(int(i), t, idle, (t & kSeenOnce) != 0);
        }
      }
    }
    // Another thread is creating this very flow: wait for it rather than race it.
    if (ours_pending) {
      if (!relax(spins)) return {{nullptr, Outcome::no_slot}, nullptr};
      continue;
    }
    // One of several threads (home): its own half of the first set, else of the second, so
    // that its flows stay off the lines the others write; else, or with one thread, as above.
    const int best_empty =
        home_empty[0] >= 0 ? home_empty[0]
        : home_empty[1] >= 0 ? home_empty[1]
        : empties[0] >= kKeepFirstEmpties || empties[0] >= empties[1] ? empty[0] : empty[1];

    // 2. Pick: a stale (expired) slot replaces a dead flow, so it needs no capacity; an empty
    //    slot needs a unit of capacity; otherwise a victim, if one may go (flow_eviction.hpp:
    //    the least recently used flow seen once or idle for kProtectIdleNs, idle enough).
    int victim;
    uint64_t expected;
    Outcome outcome = Outcome::created;
    bool reserved = false;
    if (stale >= 0) {
      victim = stale, expected = stale_tag;
    } else if (best_empty >= 0 && (reserved = reserve())) {
      victim = best_empty, expected = kEmpty;
    } else if (const EvictionChoice::Victim v = eviction.pick(); v.way >= 0) {
      victim = v.way, expected = v.tag, outcome = Outcome::evicted;
    } else {
      // Full of active flows. A pending claim may still publish or abandon: look again briefly.
      if (others_pending && relax(spins)) continue;
      return {{nullptr, Outcome::no_slot}, nullptr};
    }

    // 3. Claim with one CAS; it fails if anyone touched the tag word since our scan. A stale
    //    or evicted slot's set was marked by the claim that filled it.
    if (expected == kEmpty) mark_used(unsigned(victim) < kWays ? first : second);
    std::atomic<uint64_t>& mine = tag_at(unsigned(victim));
    if (!mine.compare_exchange_strong(expected, pending, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      if (reserved) active_.fetch_sub(1, std::memory_order_relaxed);
      if (!relax(spins)) return {{nullptr, Outcome::no_slot}, nullptr};
      continue;
    }
    if (outcome == Outcome::evicted) evicted_.fetch_add(1, std::memory_order_relaxed);

    // 4. Re-read the other candidate ways (seq_cst, after our seq_cst CAS: of two racing
    //    claimers of this flow, at least one sees the other). Lower way wins; see the header.
    bool restart = false;
    for (unsigned j = 0; j < n && !restart; ++j) {
      if (int(j) == victim) continue;
      for (;;) {
        const uint64_t t = tag_at(j).load(std::memory_order_seq_cst);
        if ((t & ~kLifeMask) == fp) {  // it got there first
          abandon(mine);
          touch(tag_at(j), fp, tick);
          return {{state_at_way(j), Outcome::found}, nullptr};
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
          return {{nullptr, Outcome::no_slot}, nullptr};
        }
      }
    }
    if (restart) continue;
    return {{state_at_way(unsigned(victim)), outcome}, &mine};
  }
}

FlowTable::Lookup FlowTable::claim_dense(std::atomic<uint64_t>& tag, std::atomic<uint64_t>* state,
                                         uint64_t slot, uint64_t fp, uint32_t tick) {
  const uint64_t pending = pending_word(fp);
  unsigned spins = 0;
  for (;;) {
    uint64_t t = tag.load(std::memory_order_acquire);
    if ((t & ~kLifeMask) == fp) {  // published meanwhile
      touch(tag, t, fp, tick);
      return {state, Outcome::found};
    }
    if (t == pending) {  // another thread is creating it: wait rather than race
      if (!relax(spins)) return {nullptr, Outcome::no_slot};
      continue;
    }
    // The slot is this key's alone, so it holds nothing else; a table can only be wrong here
    // if its caller mixed keys of two ranges, and then no flow is better than another's.
    if (t != kEmpty) return {nullptr, Outcome::no_slot};
    // A stale flow is freed by expire(), and a slot frees its unit of capacity with it: a
    // range within capacity always finds one.
    if (!reserve()) return {nullptr, Outcome::no_slot};
    mark_used(slot / kWays);
    if (tag.compare_exchange_strong(t, pending, std::memory_order_seq_cst,
                                    std::memory_order_relaxed))
      return {state, Outcome::created};
    active_.fetch_sub(1, std::memory_order_relaxed);
    if (!relax(spins)) return {nullptr, Outcome::no_slot};
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
  // No flow (live, stale or being claimed: each holds a unit of active_) means nothing to
  // free or age: skip reading the slots, whose pages an unused table never had backed, and
  // the cursor's line (where the sweep starts in an empty table does not matter).
  if (n == 0 || active_.load(std::memory_order_relaxed) == 0) return 0;
  uint64_t i = cursor_.fetch_add(n, std::memory_order_relaxed) % total;
  const uint32_t tick = tick_of(now_ns);
  size_t freed = 0;
  for (uint64_t k = 0; k < n; ++k) {
    std::atomic<uint64_t>& tag = tag_of_way(i / kWays, i % kWays);
    uint64_t t = tag.load(std::memory_order_relaxed);
    // The CAS from the exact word we judged (tick included) frees only that flow, and only if
    // nobody touched it since.
    if (is_live(t)) {
      const uint32_t idle = idle_ticks(t, tick);
      if (idle >= expire_ticks_) {
        if (tag.compare_exchange_strong(t, kEmpty, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
          active_.fetch_sub(1, std::memory_order_relaxed);
          ++freed;
        }
      } else if (idle > kMaxTimeoutTicks) {
        // Never expiring (no timeout): clamp the age, so that the 24-bit distance never wraps
        // and a flow idle for days still reads as old to LRU eviction. Only flows idle past
        // 2^22 ticks (~73 min) get here, and all such flows are equally old to eviction.
        const uint64_t aged = (t & ~kTickMask) | ((tick - kMaxTimeoutTicks) & kTickMask);
        tag.compare_exchange_strong(t, aged, std::memory_order_relaxed, std::memory_order_relaxed);
      }
    }
    if (++i == total) i = 0;
  }
  return freed;
}

}  // namespace sluice
