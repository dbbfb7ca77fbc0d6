// Ordered first-match classifier over a rule set (SPEC §2 `match`), from the match tables
// both backends share (match_tables.hpp): per field, one lookup of the frame's value gives a
// precomputed bitmap of the rules still possible; the first match is the lowest set bit of
// their intersection. The per-packet cost is a lookup per constrained field plus the
// intersection, which for many rules touches only candidate words:
//
//  - Bitmaps live in one arena, deduplicated (most protocol, DSCP and port entries are the
//    same "rules without this condition" map). Up to 64 rules a bitmap is one word. Above,
//    it starts with its lowest rule and summary words (bit k: word k is non-zero): no rule
//    below the highest of the fields' lowest rules can match, and that one does if every
//    field has it (one field: always); otherwise the intersection ANDs the summaries from
//    there, then only the words every field has non-zero.
//  - Lookups: prefixes (v4, v6), port ranges, VLAN ids and ingress ports are IntervalIndex
//    searches (a nested set of prefixes is a set of disjoint intervals); protocol and DSCP are
//    direct arrays. A field no rule constrains (for that family) is not looked up at all.
//  - When each field alone lets many rules through but together they do not (e.g. thousands
//    of rules, each on a different field), the summaries cannot tell and the intersection
//    visits many words. Such results are remembered per thread, keyed by the bitmaps' offsets
//    (a frame's answer depends only on them): a direct-mapped cache of 1,024 entries, looked
//    at as soon as the fields' highest lowest rule is not the answer (before any word is
//    walked), and filled only with answers that needed a second candidate word.
//  - Up to kLinearRules rules (built from the rules, not from bare tables), a walk over the
//    rules in order is cheaper than any lookup: each rule tests all of its exact fields with
//    one mask-and-compare of the frame's match word (frame.hpp), and only prefixes and port
//    ranges need more. It gives the tables' answer for every frame (classifier_test holds
//    both to tests/common/linear_classifier.hpp). No rule at all: -1 without a lookup.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "frame.hpp"
#include "frame_fast_v4.hpp"
#include "interval_index.hpp"
#include "match_tables.hpp"
#include "rules.hpp"

namespace sluice {

namespace classifier_detail {
struct CachedResult;  // classifier.cpp
}

class Classifier {
  struct LinearRule;  // a rule of the linear walk (below)

 public:
  static constexpr size_t kLinearRules = 4;
  explicit Classifier(const std::vector<Rule>& rules);
  explicit Classifier(const MatchTables& tables);
  // Index of the first rule whose every match field holds, or -1.
  int classify(const ParsedFrame& pf, uint16_t ingress_port) const;

  // Whether classify() is the linear walk (up to kLinearRules rules).
  bool linear() const { return use_linear_; }
  // classify() of a common IPv4 frame (frame_fast_v4.hpp) from its fields alone: the same
  // walk over the same words, or the same table lookups for the fields such a frame has, so
  // the same answer.
  int classify_common_ipv4(const Ipv4Fields& f, uint16_t ingress_port) const {
    if (!use_linear_) return classify_tables_common_ipv4(f, ingress_port);
    const uint64_t word = match_word_of(f) | uint64_t(ingress_port) << match_word::kPortShift;
    // An IPv4 address is the first 4 of ParsedFrame's 16 address bytes, the rest zero.
    return walk_linear(word, AddrWords{f.src(), 0}, AddrWords{f.dst(), 0}, f.src_port(),
                       f.dst_port());
  }
  // The walk's step for rule i (of a linear() classifier) on the common IPv4 frames of one
  // ingress port, for a caller that knows it has one rule: worked out once per burst, since
  // in those frames' match words only the protocol and DSCP vary (frame_fast_v4.hpp), and
  // the rest can be folded into the value compared. The fixed and varying bits are disjoint,
  // so (word & mask) == value exactly when (varying << shift & mask) == value ^ (fixed &
  // mask), which needs that right side to be 0 outside the varying bits.
  struct CommonIpv4Rule {
    uint32_t mask = 0, value = 1;      // on tos_varying(); 1: never
    const LinearRule* more = nullptr;  // the rule, if addresses or port ranges decide too
  };
  CommonIpv4Rule common_ipv4_rule(uint32_t i, uint16_t ingress_port) const {
    CommonIpv4Rule t;
    if (i >= linear_count_) return t;  // no rule i
    const LinearRule& r = linear_[i];
    const uint64_t fixed = kCommonIpv4MatchWord | uint64_t(ingress_port) << match_word::kPortShift;
    const uint64_t want = r.value ^ (fixed & r.mask);
    if ((want & ~(uint64_t{0xffff} << kVaryingShift)) != 0) return t;  // fixed bits differ
    const uint32_t mask = uint32_t(r.mask >> kVaryingShift) & 0xffff;
    const uint32_t value = uint32_t(want >> kVaryingShift);
    // A value outside the mask, or above the DSCP (0 in every such frame), never holds.
    if ((value & ~mask) != 0 || value >> (kVaryingDscp + 6) != 0) return t;
    t.mask = tos_varying_bits(mask);
    t.value = tos_varying_bits(value);
    if (r.more) t.more = &r;
    return t;
  }
  // The same step without the test of one address field, for a caller that tests it itself
  // (a dense table's slot: dense_key.hpp), when that test is all the rule has beyond the
  // match word; otherwise the whole step (and the caller's test holds for every frame it
  // lets through).
  CommonIpv4Rule common_ipv4_rule_but_address(uint32_t i, uint16_t ingress_port, bool src) const {
    CommonIpv4Rule t = common_ipv4_rule(i, ingress_port);
    if (t.more == nullptr) return t;
    const LinearRule& r = *t.more;
    if (!r.ports && (src ? r.src && !r.dst : r.dst && !r.src)) t.more = nullptr;
    return t;
  }
  // Whether that rule holds for such a frame: classify_common_ipv4()'s answer for it.
  [[gnu::always_inline]] static bool common_ipv4_matches(const CommonIpv4Rule& t,
                                                         const Ipv4Fields& f) {
    if ((tos_varying(f) & t.mask) != t.value) return false;
    return t.more == nullptr ||
           linear_more_holds(*t.more, AddrWords{f.src(), 0},
                             AddrWords{f.dst(), 0}, f.src_port(), f.dst_port());
  }

  size_t rule_count() const { return rule_count_; }
  size_t memory_bytes() const;

 private:
  using U128 = unsigned __int128;
  // Arena offsets of bitmaps (in words).
  using Offset = uint32_t;
  struct Field4 {
    IntervalIndex<uint32_t, 32> index;
    bool skip = false;
  };
  struct Field6 {
    IntervalIndex<U128, 128> index;
    bool skip = false;
  };
  struct Field16 {
    IntervalIndex<uint32_t, 16> index;
    bool skip = false;
  };

  // A rule of the linear walk: match-word mask and value, then what needs more than that.
  struct LinearRule {
    uint64_t mask = 0, value = 0;
    uint64_t src_addr[2] = {}, src_mask[2] = {};  // masked, as loaded from the wire
    uint64_t dst_addr[2] = {}, dst_mask[2] = {};
    uint16_t src_lo = 0, src_span = 0xffff, dst_lo = 0, dst_span = 0xffff;  // span: hi - lo
    bool src = false, dst = false, ports = false;
    bool more = false;  // any of the three: the match word alone does not decide
  };
  static LinearRule compile_linear(const Match& m);
  // The lookups and bitmaps of `tables` (rule_count_, words_, summary_words_ set).
  void build_tables(const MatchTables& tables);
  int classify_linear(const ParsedFrame& pf, uint16_t ingress_port) const;
  // classify_common_ipv4() of a classifier with tables: classify()'s lookups for an untagged
  // IPv4 frame with ports.
  int classify_tables_common_ipv4(const Ipv4Fields& f, uint16_t ingress_port) const;
  // The first rule of every bitmap in maps[0, n): classify()'s last step.
  int first_of(const Offset* maps, unsigned n) const;
  // An address's 16 wire-order bytes as two little-endian loads.
  struct AddrWords {
    uint64_t lo = 0, hi = 0;
  };
  // One rule's test in the walk below.
  [[gnu::always_inline]] static bool linear_holds(const LinearRule& r, uint64_t word,
                                                  AddrWords src, AddrWords dst,
                                                  uint16_t src_port, uint16_t dst_port) {
    if ((word & r.mask) != r.value) return false;
    return !r.more || linear_more_holds(r, src, dst, src_port, dst_port);
  }
  // The part of that test beyond the match word.
  [[gnu::always_inline]] static bool linear_more_holds(const LinearRule& r, AddrWords src,
                                                       AddrWords dst, uint16_t src_port,
                                                       uint16_t dst_port) {
    auto holds = [](const uint64_t addr[2], const uint64_t mask[2], AddrWords a) {
      // Both halves compared without a branch between them (an int AND, not &&).
      return (int((a.lo & mask[0]) == addr[0]) & int((a.hi & mask[1]) == addr[1])) != 0;
    };
    if (r.src && !holds(r.src_addr, r.src_mask, src)) return false;
    if (r.dst && !holds(r.dst_addr, r.dst_mask, dst)) return false;
    if (r.ports && (uint16_t(src_port - r.src_lo) > r.src_span ||
                    uint16_t(dst_port - r.dst_lo) > r.dst_span))
      return false;
    return true;
  }
  // The walk over the rules in order, on a frame's match word (ingress port included),
  // addresses and ports.
  [[gnu::always_inline]] int walk_linear(uint64_t word, AddrWords src, AddrWords dst,
                                         uint16_t src_port, uint16_t dst_port) const {
    for (uint32_t i = 0; i < linear_count_; ++i)
      if (linear_holds(linear_[i], word, src, dst, src_port, dst_port)) return int(i);
    return -1;
  }
  // Above 64 rules: the summaries, then the candidate words. kN (the number of bitmaps, 1 to
  // 8) is a template argument so that the loops over the fields unroll.
  int intersect(const Offset* maps, unsigned n) const;
  template <unsigned kN>
  int intersect_n(const Offset* maps) const;
  // This thread's cache slot for a set of bitmaps.
  template <unsigned kN>
  classifier_detail::CachedResult& remembered(const Offset* maps) const;

  std::array<LinearRule, kLinearRules> linear_{};
  uint32_t linear_count_ = 0;
  bool use_linear_ = false;
  uint64_t id_ = 0;  // unique per classifier in the process: the cache's owner tag
  size_t rule_count_ = 0;
  size_t words_ = 0;         // words_for(rule_count_)
  size_t summary_words_ = 0; // 0 up to 64 rules
  std::vector<uint64_t> arena_;
  Offset full_ = 0;          // every rule
  Field4 src4_, dst4_;
  Field6 src6_, dst6_;
  Field16 src_port_, dst_port_, vlan_, ingress_;
  std::array<Offset, 256> proto_{};
  std::array<Offset, 64> dscp_{};
  Offset no_ports_ = 0, untagged_ = 0, non_ip_ = 0;
  bool skip_proto_ = false, skip_dscp_ = false, skip_no_ports_ = false, skip_untagged_ = false,
       skip_non_ip_ = false;
};

}  // namespace sluice
