// Per-rule table of per-flow bucket state (SPEC §3 Flows), shared by every worker thread.
//
// Layout: sets of kWays = 8 flows, each set two halves of 4 ways: a half is its 4 tag words
// followed by those 4 flows' bucket words (state_words = 1 or 2 per flow: 1 for token-bucket,
// gcra, leaky-bucket and the windows, 2 for the srtcm/trtcm meters). With one word a flow a
// half is one 64-byte line and a set two; with two, a set is three lines. A single writer (one
// worker, replay) reads a whole set, so a burst prefetches all of it for every packet before
// charging any (Pipeline). Workers that share a table each have a home half (0 or 1,
// find_or_insert_home): they look there first, put their new flows there while it has room,
// and prefetch only it, so that two workers that see different flows (RSS) write different
// lines: a set whose tag and bucket line both workers wrote cost each packet a line transfer
// between the cores. A flow has two candidate sets picked independently from its hash: it is
// created in its first set while that has two free slots, else in the emptier of the two (~2%
// of flows at full capacity end up in their second set; with a home, in its home half of the
// first set, else of the second, else as a single writer does: ~0.3% land outside it), so
// lookups almost always read just the prefetched first set; new flows and flows in their
// second set read a second tag line. The whole table is one anonymous
// mapping (a small one: zeroed heap memory) made in the constructor and never resized; nothing
// in the hot path allocates, so a flood of new flows degrades to eviction / no_slot, never to
// more than `capacity` (SPEC §6).
//
// Memory follows use for tables above kHeapTableBytes (16 KB) and under kHugePageTableBytes
// (16 MB: ~500k flows): the mapping is reserved (MAP_NORESERVE) but not written, so the kernel
// backs a 4 KB page only when a flow is first created in it (a zero-filled page fault, once per
// page, bounded by the table's size), and a table no packet ever touched costs no memory:
// 10,000 keyed rules of the default 65,536 flows reserve ~20 GB of address space and start
// with next to nothing resident. They stay off huge pages, so a lightly used table holds a few
// 4 KB pages, not 2 MB. Larger tables are on transparent huge pages where the kernel allows (a
// 1M-flow table on 4 KB pages costs a TLB miss per packet) and are written at creation, as
// sized on purpose: a 2 MB fault on the first packets would stall a worker. Smaller ones are
// resident from the start (at most 4 pages each: what a few flows would back anyway). The
// expiry sweep skips an empty table without reading it.
//
// Memory: the table has kSlack = 2 slots per flow of capacity. With a second choice for the
// overflow of 8-way sets at half load, both of a new flow's sets are full essentially never
// before the table holds `capacity` flows. Per flow of capacity: 2 * (8 + 8 * state_words) bytes = 32 bytes
// (one state word) or 48 bytes (meters).
//
// Dense tables: a rule whose match pins its key to a few values (`dst: 192.0.2.0/24` with
// `key: dst-ip`: 256 keys, the shape of DPDK's qos_meter) gets a table of the same layout in
// which the key's offset in that range is its slot: flow k lives in way k % 8 of set k / 8
// under fingerprint k + 1 (dense_key.hpp works out k). A lookup reads one tag word: no hash,
// no tag scan, no second set. Every key has a slot of its own, so two flows never share a
// bucket and none is ever evicted; the table is made only when the range fits its capacity.
// Expiry, the tag word and the concurrency rules are those of the hashed table.
//
// Tag word: bit 63 pending | 38-bit fingerprint (bits 62..25) | bit 24 seen once | 24-bit
// last-seen tick (23..0). 0 is an empty slot. The fingerprint is the low 38 bits of the
// caller's seeded 64-bit hash (0 remapped to 1) and the first set comes from its high bits,
// the second from a re-mix of all of them, independently: two flows share a bucket only if
// their hashes agree in the fingerprint and a set, which with a random per-start seed is
// negligible (~2^-35 per new flow) and unforceable. "Seen once" is
// set when a flow is created and cleared by its next packet (the touch that moves the tick
// also clears it, so a hit costs nothing more); eviction prefers such flows
// (flow_eviction.hpp), so a flood of one-packet flows evicts its own kind first.
//
// Concurrency: lock-free; any number of threads may call find_or_insert() and expire() at once.
//  - Lookup of an existing flow reads its set's tags once (8 compared at a time; a home's 4
//    first); when the tick changed (at most once a tick per flow) or the flow was seen once,
//    one CAS moves the tick forward and clears the mark (a lost race only means someone else
//    touched it).
//  - A new flow claims a slot with one CAS on its tag word (empty/stale/victim -> PENDING|fp),
//    lets init() set its state words, then publishes fp|seen-once|tick with a release store.
//  - No duplicates: after its CAS the claimer re-reads the other 15 candidate tags (both sets;
//    seq_cst on both sides, so of two racing claimers at least one sees the other). The pending word carries the
//    fingerprint, so claimers of *different* flows never wait for each other; of two claimers of
//    the same flow, the one in the higher candidate way (first set's ways 0-7, then the second
//    set's 8-15) backs off (frees its slot) and the one in the lower way waits for the higher one to back off or publish. Waits are bounded: a thread that would
//    spin too long (its peer was preempted) gives up and reports no_slot.
//  - Expiry and eviction CAS from the exact tag word they judged, tick included, so a flow
//    touched after it was judged idle is never freed. Known, accepted race: a packet that found
//    its flow just before another thread recycles the slot may be charged against the recycled
//    slot (one packet per such race, only for flows idle >= min_evict_idle or idle_timeout).
//
// Time: the tick is now_ns >> tick_shift (2^20 ns ~ 1.05 ms, coarser for idle timeouts past
// ~73 min so that the timeout stays below 2^22 ticks), compared modulo 2^24 as a signed distance
// (a clock stepping back counts as "just seen"). In a table without expiry, the sweep clamps
// the age of flows idle past 2^22 ticks so that their distance never wraps. Idle decisions are conservative: a flow is
// treated as idle for d only once d has certainly elapsed, so expiry and eviction happen never
// early and at most ~2 ticks late.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "prefetch_for_write.hpp"
#include "result.hpp"

namespace sluice {

class FlowTable {
 public:
  static constexpr unsigned kWays = 8;
  static constexpr unsigned kHalfWays = kWays / 2;
  static constexpr unsigned kSlack = 2;         // slots per flow of capacity
  static constexpr unsigned kTickShift = 20;    // finest tick: 2^20 ns (~1.05 ms)
  static constexpr unsigned kTickBits = 24;
  static constexpr unsigned kFingerprintBits = 38;
  static constexpr unsigned kFingerprintShift = kTickBits + 1;
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kPending = uint64_t{1} << 63;
  static constexpr uint64_t kTickMask = (uint64_t{1} << kTickBits) - 1;
  static constexpr uint64_t kSeenOnce = uint64_t{1} << kTickBits;
  // The bits of a live flow's tag that change while it lives; the rest names the flow.
  static constexpr uint64_t kLifeMask = kTickMask | kSeenOnce;
  static constexpr uint64_t kFingerprintMask = ((uint64_t{1} << kFingerprintBits) - 1) << kFingerprintShift;
  // A flow seen twice is never evicted while it sends at least this often; it leaves by going
  // idle (flow_eviction.hpp).
  static constexpr uint64_t kProtectIdleNs = 1'000'000'000;

  // capacity: max live flows (exactly enforced). idle_timeout_ns: a flow idle that long is gone
  // (0 = flows never expire). min_evict_idle_ns: an LRU victim must have been idle at least this
  // long, else the new flow gets no slot (0 = any victim will do). state_words: bucket words per
  // flow, 1 or 2 (two are 16-byte aligned for cmpxchg16b).
  // slots_per_flow: table slots per flow of capacity (kSlack; tests use 1 to pin flows to one set).
  // Errors: invalid_input for parameters no table can have (capacity above 2^40 flows,
  // state_words, slots_per_flow); runtime, with the bytes asked for, when the address space
  // cannot be reserved.
  // dense_slots: a dense table for keys 0 .. dense_slots - 1 (0: hashed); at most capacity
  // and 2^32.
  static Result<FlowTable> create(uint64_t capacity, uint64_t idle_timeout_ns,
                                  uint64_t min_evict_idle_ns = 1'000'000,
                                  unsigned state_words = 2, unsigned slots_per_flow = kSlack,
                                  uint64_t dense_slots = 0);
  static constexpr uint64_t kMaxDenseSlots = uint64_t{1} << 32;
  static constexpr uint64_t kMaxCapacity = uint64_t{1} << 40;
  // The shape create() gives a table: its set count and its tick numbers (idle ticks at which a
  // flow has certainly expired, may be evicted, is on probation again). The XDP backend lays
  // its tables out with the same numbers (dataplane/abi/sluice_abi.h "Flow tables").
  struct Geometry {
    uint64_t sets = 0;
    unsigned tick_shift = kTickShift;
    uint32_t expire_ticks = 0, evict_ticks = 0, protect_ticks = 0;
  };
  static Geometry geometry(uint64_t capacity, uint64_t idle_timeout_ns,
                           uint64_t min_evict_idle_ns, unsigned slots_per_flow = kSlack);
  ~FlowTable();
  FlowTable(FlowTable&& other) noexcept;  // `other` is left empty (only destructible)
  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;

  enum class Outcome : uint8_t { found, created, evicted, no_slot };
  struct Lookup {
    std::atomic<uint64_t>* state;  // the flow's state_words bucket words; nullptr on no_slot
    Outcome outcome;
  };

  // Finds the flow or claims a slot for it. On created/evicted, init(std::atomic<uint64_t>*)
  // sets the state words before the slot becomes visible to other threads under this flow's
  // tag. Touches the flow's tick. init must not throw (the core throws nothing: result.hpp).
  template <class Init>
  Lookup find_or_insert(uint64_t hash, uint64_t now_ns, Init&& init) {
    return find_or_insert_line(first_line(hash), hash, tick_of(now_ns), init);
  }
  // The same, for a caller that worked out the hash's first set's line (first_line(), to
  // prefetch it with prefetch_line()) and the tick of now_ns (tick_of(), once per burst).
  // kStateWords: state_words(), for a caller that knows it (0: read from the table).
  template <unsigned kStateWords = 0, class Init>
  Lookup find_or_insert_line(std::atomic<uint64_t>* line, uint64_t hash, uint32_t tick,
                             Init&& init);
  // The same for one of several threads sharing the table, whose `home` half of every set
  // (0 or 1: ways 0-3 or 4-7) is where it looks first and puts its new flows first, so that
  // threads that see different flows (RSS) write different lines. It reads the home half
  // inline and the rest out of line; prefetch_half() loads what it reads first.
  template <unsigned kStateWords = 0, class Init>
  Lookup find_or_insert_home(std::atomic<uint64_t>* line, unsigned home, uint64_t hash,
                             uint32_t tick, Init&& init);
  // kStateWords: state_words(), for a caller that knows it (the set's stride is then a
  // constant: a shift, not a multiply; 0: read from the table).
  template <unsigned kStateWords = 0>
  std::atomic<uint64_t>* first_line(uint64_t hash) const {
    return set_at<kStateWords>(set_of(hash));
  }

  // Dense tables: the same for the flow of key offset `slot` (< dense_slots()), from its tag
  // word (dense_tag(slot), worked out once to prefetch it with prefetch_dense()).
  template <unsigned kStateWords = 0, class Init>
  Lookup find_or_insert_dense(std::atomic<uint64_t>* tag, uint64_t slot, uint32_t tick,
                              Init&& init);
  template <class Init>
  Lookup find_or_insert_dense(uint64_t slot, uint64_t now_ns, Init&& init) {
    return find_or_insert_dense(dense_tag(slot), slot, tick_of(now_ns), init);
  }
  // kStateWords: state_words(), for a caller that knows it (the set's stride is then a
  // constant; 0: read from the table).
  template <unsigned kStateWords = 0>
  std::atomic<uint64_t>* dense_tag(uint64_t slot) const {
    // Slot k is way k % 4 of half k / 4 counted over the whole table (halves are alike).
    const unsigned words = kStateWords != 0 ? kStateWords : state_words_;
    assert(words == state_words_);
    return sets_ + slot / kHalfWays * half_offset(1, words) + slot % kHalfWays;
  }
  // Loads what a dense lookup and charge read: the tag's line and the line of its words.
  template <unsigned kStateWords = 0>
  void prefetch_dense(const std::atomic<uint64_t>* tag, uint64_t slot) const {
    const unsigned words = kStateWords != 0 ? kStateWords : state_words_;
    prefetch_for_write(tag);
    prefetch_for_write(state_of_tag(tag, slot % kWays, words));
  }
  // Keys a dense table has a slot for; 0 for a hashed table.
  uint64_t dense_slots() const { return dense_slots_; }
  // The fingerprint bits a dense table's flow of key offset `slot` is stored under.
  // slot + 1 is never 0 and, below 2^32, within the fingerprint's 38 bits: tag_of(slot + 1).
  static constexpr uint64_t dense_fp(uint64_t slot) { return (slot + 1) << kFingerprintShift; }

  // Read-only lookup (no insert, no touch); nullptr if absent or not yet published.
  const std::atomic<uint64_t>* find(uint64_t hash) const;

  // Starts loading the lines a hash's lookup and charge will read: the set's tags and state
  // words (two lines; three for meters), so that a burst can hash every packet first and
  // find_or_insert() later hits cache instead of waiting on memory.
  void prefetch(uint64_t hash) const { prefetch_line(first_line(hash)); }
  template <unsigned kStateWords = 0>
  void prefetch_line(const std::atomic<uint64_t>* line) const {
    // A set is 2 lines (one state word per flow) or 3 (two); the set base is 64-byte aligned.
    const unsigned words = kStateWords != 0 ? kStateWords : state_words_;
    assert(words == state_words_);
    const char* set = reinterpret_cast<const char*>(line);
    prefetch_for_write(set);
    prefetch_for_write(set + 64);
    if (words == 2) prefetch_for_write(set + 128);
  }

  // Loads the lines find_or_insert_home() reads first: the set's `home` half (one line for
  // one state word a flow, two for two).
  template <unsigned kStateWords = 0>
  void prefetch_half(const std::atomic<uint64_t>* line, unsigned home) const {
    const unsigned words = kStateWords != 0 ? kStateWords : state_words_;
    assert(words == state_words_);
    const char* half = reinterpret_cast<const char*>(line + half_offset(home, words));
    prefetch_for_write(half);
    if (words == 2) prefetch_for_write(half + 64);
  }

  // Visits at most max_slots slots from where the previous call stopped (wrapping), freeing the
  // idle ones. Concurrent callers get disjoint ranges. Returns the number freed.
  size_t expire(uint64_t now_ns, size_t max_slots);

  // Only one thread will ever call find_or_insert() and expire(): a found flow's tick then
  // moves with a plain store instead of a compare-and-swap. Only while no thread uses the table.
  void set_single_writer(bool single_writer) { single_writer_ = single_writer; }

  uint64_t active() const { return active_.load(std::memory_order_relaxed); }
  // Live flows pushed out by a new flow before their idle timeout (expired ones do not count).
  uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }
  // The table's full size, as if every page were in use.
  size_t memory_bytes() const { return sizeof(*this) + sets_bytes() + (nsets_ + 63) / 64 * 8; }
  // The sets alone: the mapping the table reserves (less alignment).
  size_t sets_bytes() const { return nsets_ * stride_words_ * sizeof(uint64_t); }
  // Address space reserved for the table, and how much of it is mapped so far (mincore():
  // pages written, and pages only read, which share the kernel's zero page; a diagnostic,
  // not for the packet path).
  size_t reserved_bytes() const { return mapping_bytes_; }
  size_t resident_bytes() const;
  // Over every table alive in the process: for the start-up log ("flow tables: N MB for M
  // flows").
  struct Totals {
    uint64_t tables = 0;
    uint64_t capacity_flows = 0;
    uint64_t reserved_bytes = 0;
  };
  static Totals totals();
  // totals() for the operator, once at start: "flow tables: N MB for M flows (T tables;
  // reserved, backed as flows arrive)"; empty with no table.
  static std::string totals_line();
  // Tables at least this big are asked for transparent huge pages.
  static constexpr size_t kHugePageTableBytes = size_t{16} << 20;
  // Tables at most this big (4 pages: 512 flows of one state word, 340 of two) are zeroed
  // heap memory, resident from the start, not a mapping of their own.
  static constexpr size_t kHeapTableBytes = size_t{16} << 10;
  unsigned state_words() const { return state_words_; }

  // Introspection (tests, diagnostics). Slot i is way i % kWays of set i / kWays.
  size_t slot_count() const { return nsets_ * kWays; }
  uint64_t tag_word(size_t i) const { return tag_of_way(i / kWays, i % kWays).load(std::memory_order_acquire); }
  uint64_t fingerprint_at(size_t i) const { return (tag_word(i) & kFingerprintMask) >> kFingerprintShift; }
  uint32_t tick_at(size_t i) const { return uint32_t(tag_word(i) & kTickMask); }
  bool seen_once_at(size_t i) const { return (tag_word(i) & kSeenOnce) != 0; }
  const std::atomic<uint64_t>* state_at(size_t i) const {
    return state_of(i / kWays, unsigned(i % kWays));
  }
  // Calls f(slot) for every slot that holds a flow (published: neither empty nor being
  // claimed) when its tag is read, reading only the sets a flow was ever claimed in. A rate
  // change converts every flow's bucket on the first worker to run it: a sweep of every set
  // of a default 64k-flow table was ~2M instructions however few flows it held (bench
  // sluice-bench-control-load --set), time that worker did not forward.
  template <class F>
  void for_each_flow_slot(F&& f) const {
    const size_t words = (nsets_ + 63) / 64;
    for (size_t w = 0; w < words; ++w) {
      // seq_cst, as mark_used(): a set whose bit reads 0 here had no claim yet, so every tag
      // in it reads empty, as a sweep of its tags would have found them.
      for (uint64_t bits = used_sets_[w].load(std::memory_order_seq_cst); bits != 0; bits &= bits - 1) {
        const size_t set = w * 64 + size_t(__builtin_ctzll(bits));
        for (unsigned way = 0; way < kWays; ++way) {
          const uint64_t t = tag_of_way(set, way).load(std::memory_order_acquire);
          if (t != kEmpty && !(t & kPending)) f(set * kWays + way);
        }
      }
    }
  }
  // The slot index of a state pointer returned by find_or_insert() / find().
  size_t slot_of(const std::atomic<uint64_t>* state) const;
  size_t set_index(uint64_t hash) const { return set_of(hash); }
  size_t second_set_index(uint64_t hash) const { return second_set_of(hash); }
  const void* data() const { return sets_; }
  // The fingerprint a hash is stored under: its low 38 bits, 0 remapped to 1.
  static constexpr uint64_t tag_of(uint64_t hash) {
    const uint64_t f = hash & (kFingerprintMask >> kFingerprintShift);
    return f == 0 ? 1 : f;
  }
  uint32_t tick_of(uint64_t now_ns) const { return uint32_t((now_ns >> tick_shift_) & kTickMask); }

 private:
  // Fastrange on the hash: its high bits pick the set (no power-of-two set count needed), the
  // low 38 are the fingerprint, so the two are independent below 2^26 sets (a 200M-flow
  // table). The hash's last step is a multiply-fold, so its high bits need no re-mix.
  size_t set_of(uint64_t hash) const {
    return size_t((static_cast<unsigned __int128>(hash) * nsets_) >> 64);
  }
  // The second choice: another multiplicative re-mix, independent of the first and of the
  // fingerprint. May equal the first (small tables); then the flow simply has one set.
  size_t second_set_of(uint64_t hash) const {
    return size_t((static_cast<unsigned __int128>(hash * 0xd6e8feb86659fd93ull) * nsets_) >> 64);
  }
  // The first way of a set whose tag holds fingerprint bits fp (pending clear), or kWays if
  // none does.
  unsigned scan(size_t set, uint64_t fp) const {
    const std::atomic<uint64_t>* const tags = set_at(set);
    for (unsigned c = candidates(tags, fp, state_words_); c != 0; c &= c - 1) {
      const unsigned at = unsigned(__builtin_ctz(c));
      if ((tags[at].load(std::memory_order_acquire) & ~kLifeMask) == fp)
        return at < kHalfWays ? at : kHalfWays + at % kHalfWays;
    }
    return kWays;
  }
  // The same over one half of the set (its ways half * kHalfWays ..): the way, or kWays.
  unsigned scan_half(size_t set, unsigned half, uint64_t fp) const {
    const std::atomic<uint64_t>* const tags = set_at(set) + half_offset(half, state_words_);
    for (unsigned c = candidates_half(tags, fp); c != 0; c &= c - 1) {
      const unsigned q = unsigned(__builtin_ctz(c));
      if ((tags[q].load(std::memory_order_acquire) & ~kLifeMask) == fp) return half * kHalfWays + q;
    }
    return kWays;
  }
  // The tags of a set (from its first word) that may hold fingerprint bits fp, as bits: bit k
  // for the tag k words from the set's first (tag_offset(way)), so that a tag's address is one
  // add away; in way order. Every tag holding fp is among them; a caller checks each whole tag.
  static unsigned candidates(const std::atomic<uint64_t>* set, uint64_t fp, unsigned words);
  // The same for one half's 4 tags (from its first tag): bits 0-3.
  static unsigned candidates_half(const std::atomic<uint64_t>* tags, uint64_t fp);
  // kStateWords: state_words(), for a caller that knows it (the set's stride is then a
  // constant: a shift, not a load and a multiply; 0: read from the table).
  template <unsigned kStateWords = 0>
  std::atomic<uint64_t>* set_at(size_t set) const {
    const unsigned stride = kStateWords != 0 ? kWays * (1 + kStateWords) : stride_words_;
    assert(stride == stride_words_);
    return sets_ + set * stride;
  }
  // Words from a set's first word to half h's first tag, and to way w's tag: a set is two
  // halves of kHalfWays tags followed by those ways' state words.
  static constexpr size_t half_offset(unsigned h, unsigned words) {
    return h * kHalfWays * (1 + words);
  }
  static constexpr size_t tag_offset(unsigned way, unsigned words) {
    return way + (way & kHalfWays) * words;
  }
  std::atomic<uint64_t>& tag_of_way(size_t set, size_t way) const {
    return set_at(set)[tag_offset(unsigned(way), state_words_)];
  }
  std::atomic<uint64_t>* state_of(size_t set, unsigned way) const {
    return state_of_tag(&tag_of_way(set, way), way, state_words_);
  }
  // tag_of(hash) << kFingerprintShift, from two shifts whose flags give the zero test.
  static uint64_t fp_bits(uint64_t hash) {
    const uint64_t f = hash << (64 - kFingerprintBits) >> (64 - kFingerprintBits - kFingerprintShift);
    return f != 0 ? f : uint64_t{1} << kFingerprintShift;
  }
  // The state words of way `way`, from its tag word: way w's words are kHalfWays + (w % 4) *
  // words from its half's first tag, so kHalfWays + (w % 4) * (words - 1) from its own. A half
  // starts a multiple of kHalfWays words into its set, so `way` may also be the tag's offset
  // in the set (tag_offset()).
  template <class Word>
  static Word* state_of_tag(Word* tag, size_t way, unsigned words) {
    return tag + kHalfWays + (way % kHalfWays) * (words - 1);
  }
  // A claimed slot's flow made visible: init() sets its words, then the tag (seen once until
  // its next packet; the release makes init()'s words visible with it).
  template <class Init>
  static void publish(std::atomic<uint64_t>& tag, std::atomic<uint64_t>* state, uint64_t fp,
                      uint32_t tick, Init& init) {
    init(state);
    tag.store(fp | kSeenOnce | tick, std::memory_order_release);
  }
  // Moves a found flow's tick forward and clears its seen-once mark; skipped when both are
  // unchanged (most packets of a busy flow). `seen` is the tag as last read: if it no longer
  // holds fp, the slot was recycled meanwhile and is not ours to touch; if it changed since,
  // the CAS below fails and leaves it.
  void touch(std::atomic<uint64_t>& tag, uint64_t seen, uint64_t fp, uint32_t tick) const {
    if ((seen & kLifeMask) == tick || (seen & ~kLifeMask) != fp) return;
    if (single_writer_) {
      tag.store(fp | tick, std::memory_order_relaxed);
      return;
    }
    // A failed CAS means someone else touched or recycled the slot meanwhile: either way
    // there is nothing left for us to do.
    tag.compare_exchange_strong(seen, fp | tick, std::memory_order_relaxed,
                                std::memory_order_relaxed);
  }
  void touch(std::atomic<uint64_t>& tag, uint64_t fp, uint32_t tick) const {
    touch(tag, tag.load(std::memory_order_relaxed), fp, tick);
  }
  // Slow path: the flow was not in the set. Returns found (it appeared meanwhile), no_slot, or
  // created/evicted with the slot held as PENDING|fp for the caller to init and publish.
  struct Claim {
    Lookup lookup;
    std::atomic<uint64_t>* tag;  // the claimed slot's tag word (created/evicted)
  };
  FlowTable() = default;  // create() fills it in
  // Reserves the table's memory for capacity_ and state_words_; sets the ticks.
  Status map(uint64_t idle_timeout_ns, uint64_t min_evict_idle_ns, unsigned slots_per_flow);
  // Takes the zeroed sets at base as the table's and counts it in totals().
  void adopt(uintptr_t base);
  // mapping_ is from aligned_alloc, not mmap: only a small table's mapping_bytes_ are this few.
  bool on_heap() const { return mapping_bytes_ <= kHeapTableBytes; }
  // home: the caller's half (find_or_insert_home), whose empty ways it takes first; kAnyHalf
  // for a single writer.
  static constexpr unsigned kAnyHalf = 2;
  Claim claim(size_t first, size_t second, uint64_t fp, uint32_t tick, unsigned home = kAnyHalf);
  // find_or_insert() past its first set: the second set, then a claim.
  template <class Init>
  Lookup find_elsewhere_or_insert(uint64_t hash, uint64_t fp, uint32_t tick, Init& init);
  // find_or_insert_home() past its home half.
  template <class Init>
  Lookup find_away_or_insert(uint64_t hash, uint64_t fp, uint32_t tick, unsigned home,
                             Init& init);
  // The slow paths' end: claim() a slot for the flow and, if one was taken, publish it.
  template <class Init>
  Lookup insert(size_t first, size_t second, uint64_t fp, uint32_t tick, unsigned home,
                Init& init);
  // The inline lookups' common part: the state words of the first of the candidate tags `c`
  // (bits: offsets from `base`, a set's or a half's first tag) that holds fp, its tick
  // touched; null if none does.
  [[gnu::always_inline]] std::atomic<uint64_t>* found_among(std::atomic<uint64_t>* base,
                                                             unsigned c, uint64_t fp,
                                                             uint32_t tick, unsigned words) const;
  // find_or_insert_dense() of a flow not (yet) in its slot: found (it appeared meanwhile),
  // no_slot, or created with the slot held as PENDING|fp for the caller to init and publish.
  Lookup claim_dense(std::atomic<uint64_t>& tag, std::atomic<uint64_t>* state, uint64_t slot,
                     uint64_t fp, uint32_t tick);
  template <class Init>
  Lookup insert_dense(std::atomic<uint64_t>& tag, std::atomic<uint64_t>* state, uint64_t slot,
                      uint64_t fp, uint32_t tick, Init& init);
  // Takes one unit of capacity if the table is below capacity.
  bool reserve();
  // Gives up a held claim: the slot becomes empty (any flow it held before is gone).
  void abandon(std::atomic<uint64_t>& tag);
  // Notes, before the claim of an empty slot of `set`, that the set may hold a flow (once per
  // set: later claims see the bit and write nothing).
  void mark_used(size_t set) {
    std::atomic<uint64_t>& w = used_sets_[set / 64];
    const uint64_t bit = uint64_t{1} << (set % 64);
    if (!(w.load(std::memory_order_seq_cst) & bit)) w.fetch_or(bit, std::memory_order_seq_cst);
  }

  std::atomic<uint64_t>* sets_ = nullptr;  // nsets_ * stride_words_ words
  void* mapping_ = nullptr;                // what to unmap (sets_ is aligned inside it)
  // A bit per set: a flow was claimed in it since the table was made (never cleared; a
  // cleared bit could race a claim). 1/1024 of the table's bytes at one state word a flow.
  std::unique_ptr<std::atomic<uint64_t>[]> used_sets_;
  size_t mapping_bytes_ = 0;
  uint64_t nsets_ = 0;
  uint64_t capacity_ = 0;
  uint64_t dense_slots_ = 0;
  unsigned state_words_ = 2;
  unsigned stride_words_ = 0;  // words per set: kWays tags + kWays * state_words_
  unsigned tick_shift_ = kTickShift;
  bool single_writer_ = false;
  uint32_t expire_ticks_ = 0;  // idle ticks at which a flow is certainly expired
  uint32_t evict_ticks_ = 0;   // idle ticks at which a flow may certainly be evicted
  uint32_t protect_ticks_ = 0;  // idle ticks at which a flow seen twice is on probation again
  // Written by every inserting / expiring thread: keep them off the read-mostly line above.
  alignas(64) std::atomic<uint64_t> active_{0};
  std::atomic<uint64_t> evicted_{0};
  alignas(64) std::atomic<uint64_t> cursor_{0};
};

}  // namespace sluice

// The definitions of the inline lookup paths above.
#include "flow_table_lookup.hpp"
