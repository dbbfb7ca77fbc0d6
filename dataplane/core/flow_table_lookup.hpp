// FlowTable's lookup paths (flow_table.hpp), the part a worker runs for every packet: the tag
// compare, the inline lookups (whole set, home half, dense slot) and their out-of-line ends.
// Templates and inline functions, so a header; flow_table.hpp includes it after the class,
// and the layout, tag word and concurrency rules they follow are described there.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "flow_table.hpp"
#include "sanitizers.hpp"

// The tag scan compares a set's 8 tags in SSE2 registers (x86-64 always has SSE2). Under
// ThreadSanitizer it takes the per-word atomic loads instead, which TSan can follow.
#if defined(__x86_64__) && defined(__SSE2__) && !defined(SLUICE_TSAN)
#define SLUICE_FLOW_TABLE_SSE2 1
#include <emmintrin.h>
#endif

namespace sluice {

#ifdef SLUICE_FLOW_TABLE_SSE2
// The high 32-bit halves of 4 tags (pending bit and fingerprint bits 62..32) compared with
// fp's in one vector compare: a half matching by chance (8 in 2^31 lookups) is only a
// candidate that its whole tag then rules out. Plain vector loads of words others write
// atomically, as DPDK's rte_hash compares its signatures: on x86 each aligned 8-byte half is
// read whole, and loads are not reordered with later loads, so this orders like the acquire
// loads of the scalar scan; the caller's fence keeps the compiler from moving its state reads
// above it.
inline unsigned flow_table_match4(const std::atomic<uint64_t>* tags, __m128i want) {
  const auto* t = reinterpret_cast<const float*>(tags);
  const __m128 highs = _mm_shuffle_ps(_mm_load_ps(t), _mm_load_ps(t + 4), _MM_SHUFFLE(3, 1, 3, 1));
  const __m128i same = _mm_cmpeq_epi32(_mm_castps_si128(highs), want);
  return unsigned(_mm_movemask_ps(_mm_castsi128_ps(same)));
}
// fp's high half in every lane: dword 1 of fp in a register, no shift out of it first.
inline __m128i flow_table_want(uint64_t fp) {
  return _mm_shuffle_epi32(_mm_cvtsi64_si128(static_cast<long long>(fp)), 0x55);
}
#endif

inline unsigned FlowTable::candidates(const std::atomic<uint64_t>* set, uint64_t fp,
                                      unsigned words) {
#ifdef SLUICE_FLOW_TABLE_SSE2
  const __m128i want = flow_table_want(fp);
  const size_t second_half = half_offset(1, words);
  const unsigned found = flow_table_match4(set, want) |
                         flow_table_match4(set + second_half, want) << second_half;
  std::atomic_signal_fence(std::memory_order_acquire);
  return found;
#else
  unsigned hits = 0;  // branchless: which way holds a flow is random
  for (unsigned way = 0; way < kWays; ++way) {
    const size_t at = tag_offset(way, words);
    hits |= unsigned((set[at].load(std::memory_order_acquire) & ~kLifeMask) == fp) << at;
  }
  return hits;
#endif
}

inline unsigned FlowTable::candidates_half(const std::atomic<uint64_t>* tags, uint64_t fp) {
#ifdef SLUICE_FLOW_TABLE_SSE2
  const unsigned found = flow_table_match4(tags, flow_table_want(fp));
  std::atomic_signal_fence(std::memory_order_acquire);
  return found;
#else
  unsigned hits = 0;
  for (unsigned q = 0; q < kHalfWays; ++q)
    hits |= unsigned((tags[q].load(std::memory_order_acquire) & ~kLifeMask) == fp) << q;
  return hits;
#endif
}

template <unsigned kStateWords, class Init>
[[gnu::always_inline]] inline FlowTable::Lookup FlowTable::find_or_insert_line(
    std::atomic<uint64_t>* line, uint64_t hash, uint32_t tick, Init&& init) {
  const uint64_t fp = fp_bits(hash);
  // The first set holds nearly every flow: one line, compared without a branch per way (which
  // way holds a flow is random, so an early-exit loop would mispredict on most packets). This
  // part is inlined into the caller's per-packet loop; the rest is out of line. The state
  // words' count is read before the tag loads, which are acquires, after which it would be
  // read again.
  const unsigned words = kStateWords != 0 ? kStateWords : state_words_;
  assert(words == state_words_);
  if (std::atomic<uint64_t>* const state = found_among(line, candidates(line, fp, words), fp,
                                                       tick, words))
    return {state, Outcome::found};
  return find_elsewhere_or_insert(hash, fp, tick, init);
}

inline std::atomic<uint64_t>* FlowTable::found_among(std::atomic<uint64_t>* base, unsigned c,
                                                     uint64_t fp, uint32_t tick,
                                                     unsigned words) const {
  // A flow already touched this tick and seen before (most packets of a busy flow) has
  // exactly this tag: one compare of the candidate's word, and nothing to write.
  const uint64_t busy = fp | tick;
  for (; c != 0; c &= c - 1) {
    // A half starts a multiple of 4 words from `base`: the tag's way in its half is its
    // offset's low bits.
    const size_t at = size_t(__builtin_ctz(c));
    std::atomic<uint64_t>* const tag = base + at;
    const uint64_t seen = tag->load(std::memory_order_acquire);
    if (seen != busy) [[unlikely]] {
      if ((seen & ~kLifeMask) != fp) continue;  // a high half that matched by chance
      touch(*tag, seen, fp, tick);
    }
    return state_of_tag(tag, at, words);
  }
  return nullptr;
}

template <unsigned kStateWords, class Init>
[[gnu::always_inline]] inline FlowTable::Lookup FlowTable::find_or_insert_home(
    std::atomic<uint64_t>* line, unsigned home, uint64_t hash, uint32_t tick, Init&& init) {
  assert(home < 2);
  const uint64_t fp = fp_bits(hash);
  const unsigned words = kStateWords != 0 ? kStateWords : state_words_;
  assert(words == state_words_);
  std::atomic<uint64_t>* const half = line + half_offset(home, words);
  if (std::atomic<uint64_t>* const state =
          found_among(half, candidates_half(half, fp), fp, tick, words))
    return {state, Outcome::found};
  return find_away_or_insert(hash, fp, tick, home, init);
}

template <unsigned kStateWords, class Init>
[[gnu::always_inline]] inline FlowTable::Lookup FlowTable::find_or_insert_dense(
    std::atomic<uint64_t>* tag, uint64_t slot, uint32_t tick, Init&& init) {
  assert(slot < dense_slots_ && tag == dense_tag(slot));
  const unsigned words = kStateWords != 0 ? kStateWords : state_words_;
  assert(words == state_words_);
  const uint64_t fp = dense_fp(slot);
  std::atomic<uint64_t>* const state = state_of_tag(tag, slot % kWays, words);
  const uint64_t seen = tag->load(std::memory_order_acquire);
  if ((seen & ~kLifeMask) == fp) [[likely]] {
    // A flow already touched this tick and seen before (most packets of a busy flow) has
    // exactly this tag, and nothing is written.
    if (seen != (fp | tick)) [[unlikely]] touch(*tag, seen, fp, tick);
    return {state, Outcome::found};
  }
  return insert_dense(*tag, state, slot, fp, tick, init);
}

template <class Init>
[[gnu::noinline]] FlowTable::Lookup FlowTable::insert_dense(std::atomic<uint64_t>& tag,
                                                           std::atomic<uint64_t>* state,
                                                           uint64_t slot, uint64_t fp,
                                                           uint32_t tick, Init& init) {
  const Lookup l = claim_dense(tag, state, slot, fp, tick);
  if (l.outcome == Outcome::created) publish(tag, state, fp, tick, init);
  return l;
}

template <class Init>
[[gnu::noinline]] FlowTable::Lookup FlowTable::find_away_or_insert(uint64_t hash, uint64_t fp,
                                                                  uint32_t tick, unsigned home,
                                                                  Init& init) {
  // The second set's home half (where this thread's flows go when their first set's is full),
  // then the other thread's halves: those lines are read only for its rare flows.
  const size_t first = set_of(hash), second = second_set_of(hash);
  struct Half {
    size_t set;
    unsigned half;
  };
  const Half away[3] = {{second, home}, {first, home ^ 1}, {second, home ^ 1}};
  for (unsigned k = 0; k < 3; ++k) {
    if (k != 1 && second == first) continue;  // one set (a small table)
    if (const unsigned way = scan_half(away[k].set, away[k].half, fp); way < kWays) {
      touch(tag_of_way(away[k].set, way), fp, tick);
      return {state_of(away[k].set, way), Outcome::found};
    }
  }
  return insert(first, second, fp, tick, home, init);
}

template <class Init>
[[gnu::noinline]] FlowTable::Lookup FlowTable::find_elsewhere_or_insert(uint64_t hash,
                                                                       uint64_t fp, uint32_t tick,
                                                                       Init& init) {
  const size_t first = set_of(hash), second = second_set_of(hash);
  if (second != first) {
    if (const unsigned way = scan(second, fp); way < kWays) {
      touch(tag_of_way(second, way), fp, tick);
      return {state_of(second, way), Outcome::found};
    }
  }
  return insert(first, second, fp, tick, kAnyHalf, init);
}

template <class Init>
FlowTable::Lookup FlowTable::insert(size_t first, size_t second, uint64_t fp, uint32_t tick,
                                    unsigned home, Init& init) {
  Claim c = claim(first, second, fp, tick, home);
  if (c.lookup.outcome == Outcome::created || c.lookup.outcome == Outcome::evicted)
    publish(*c.tag, c.lookup.state, fp, tick, init);
  return c.lookup;
}

}  // namespace sluice
