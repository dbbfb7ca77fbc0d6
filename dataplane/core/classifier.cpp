#include "classifier.hpp"

#include <algorithm>
#include <bit>
#include <atomic>
#include <cstring>
#include <unordered_map>

#include "unaligned_load.hpp"

namespace sluice {
namespace {

using U128 = unsigned __int128;
using Offset = uint32_t;

// The bitmaps of one classifier, each stored once. Up to 64 rules a bitmap is its one word;
// above, [lowest rule (kNoRule if none)][summary words][rule words].
constexpr uint64_t kNoRule = ~uint64_t{0};

class Arena {
 public:
  Arena(std::vector<uint64_t>& words, size_t rule_words, size_t summary_words)
      : arena_(words), words_(rule_words), summary_(summary_words), head_(summary_words ? 1 : 0) {}

  size_t words() const { return words_; }

  Offset add(const RuleBits& bits) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint64_t w : bits) h = (h ^ w) * 0xff51afd7ed558ccdull + 0x632be59bd9b4e5f5ull;
    auto [lo, hi] = seen_.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (std::equal(bits.begin(), bits.end(), arena_.begin() + it->second + head_ + summary_))
        return it->second;
    const Offset at = Offset(arena_.size());
    arena_.resize(arena_.size() + head_ + summary_ + words_, 0);
    uint64_t lowest = kNoRule;
    for (size_t k = 0; k < words_; ++k) {
      arena_[at + head_ + summary_ + k] = bits[k];
      if (summary_ && bits[k]) arena_[at + head_ + k / 64] |= uint64_t{1} << (k % 64);
      if (lowest == kNoRule && bits[k]) lowest = k * 64 + unsigned(__builtin_ctzll(bits[k]));
    }
    if (head_) arena_[at] = lowest;
    seen_.emplace(h, at);
    return at;
  }

 private:
  std::vector<uint64_t>& arena_;
  size_t words_, summary_, head_;
  std::unordered_multimap<uint64_t, Offset> seen_;
};

uint32_t key4(const uint8_t* a) {
  uint32_t v;
  std::memcpy(&v, a, 4);
  return __builtin_bswap32(v);
}

U128 key6(const uint8_t* a) {
  uint64_t hi, lo;
  std::memcpy(&hi, a, 8);
  std::memcpy(&lo, a + 8, 8);
  return U128(__builtin_bswap64(hi)) << 64 | __builtin_bswap64(lo);
}

template <class Key>
Key key_of(const Cidr& c) {
  if constexpr (sizeof(Key) == 4) return key4(c.addr.data());
  else return key6(c.addr.data());
}

// Adds (start, value), a later value at the same start replacing the earlier one.
template <class Key>
void emit(std::vector<std::pair<Key, uint32_t>>& out, Key start, uint32_t value) {
  if (!out.empty() && out.back().first == start) out.back().second = value;
  else out.emplace_back(start, value);
}

// Nested prefixes -> the disjoint intervals between their boundaries, each with the bitmap of
// the longest prefix holding it. Walks the entries in (start, length) order with the chain of
// enclosing prefixes on a stack: leaving a prefix resumes its parent.
template <class Key, unsigned kBits>
void build_prefix_field(const std::vector<PrefixBits>& entries, Arena& arena,
                        IntervalIndex<Key, kBits>& index, Offset full, bool& skip) {
  struct Entry {
    Key start, end;
    unsigned len;
    size_t i;
  };
  std::vector<Entry> sorted;
  for (size_t i = 0; i < entries.size(); ++i) {
    const unsigned len = std::min<unsigned>(entries[i].prefix.prefix_len, kBits);
    const Key host = len == 0 ? ~Key(0) : len == kBits ? Key(0) : Key(~Key(0)) >> len;
    const Key start = key_of<Key>(entries[i].prefix) & ~host;
    sorted.push_back({start, Key(start | host), len, i});
  }
  std::sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) {
    return a.start != b.start ? a.start < b.start : a.len < b.len;
  });
  std::vector<std::pair<Key, uint32_t>> out;
  struct Open {
    Key end;
    Offset value;
  };
  std::vector<Open> open;
  // Addresses outside every entry (only if the /0 were missing) match nothing.
  const Offset none = arena.add(RuleBits(arena.words(), 0));
  out.emplace_back(Key(0), none);
  open.push_back({~Key(0), none});
  for (const Entry& e : sorted) {
    const Offset value = arena.add(entries[e.i].rules);
    while (open.back().end < e.start) {
      const Key resume = open.back().end + 1;
      open.pop_back();
      emit(out, resume, open.back().value);
    }
    emit(out, e.start, value);
    open.push_back({e.end, value});
  }
  while (open.size() > 1) {
    const Key end = open.back().end;
    open.pop_back();
    if (end != ~Key(0)) emit(out, Key(end + 1), open.back().value);
  }
  index.build(out);
  skip = index.uniform() && index.first_value() == full;
}

void build_exact_field(const std::vector<ExactBits>& values, const RuleBits& other,
                       Arena& arena, IntervalIndex<uint32_t, 16>& index, Offset full,
                       bool& skip) {
  std::vector<const ExactBits*> sorted;
  for (const ExactBits& v : values) sorted.push_back(&v);
  std::sort(sorted.begin(), sorted.end(),
            [](const ExactBits* a, const ExactBits* b) { return a->value < b->value; });
  const Offset rest = arena.add(other);
  std::vector<std::pair<uint32_t, uint32_t>> out{{0, rest}};
  for (const ExactBits* v : sorted) {
    emit(out, uint32_t(v->value), arena.add(v->rules));
    if (v->value < 0xffff) emit(out, uint32_t(v->value) + 1, rest);
  }
  index.build(out);
  skip = index.uniform() && index.first_value() == full;
}

}  // namespace

namespace classifier_detail {
// Remembered intersections (see the header). Per thread, so workers never share a line.
struct CachedResult {
  uint64_t owner = 0;  // Classifier::id_; 0: empty
  Offset maps[8] = {};
  uint32_t n = 0;
  int32_t result = -1;
};
constexpr size_t kCacheEntries = 1024;
static thread_local CachedResult t_cache[kCacheEntries];
static std::atomic<uint64_t> g_next_id{1};

}  // namespace classifier_detail
using classifier_detail::CachedResult;
using classifier_detail::t_cache;
using classifier_detail::kCacheEntries;
using classifier_detail::g_next_id;

using namespace match_word;

// Up to kLinearRules rules classify() only walks them: the tables would never be read, and
// building them (about 350 bitmaps, most of them copies) cost more than the rest of a
// Pipeline::create of a few rules together.
Classifier::Classifier(const std::vector<Rule>& rules)
    : id_(g_next_id.fetch_add(1, std::memory_order_relaxed)),
      rule_count_(rules.size()),
      words_(words_for(rules.size())),
      summary_words_(rules.size() > 64 ? (words_ + 63) / 64 : 0) {
  if (rules.size() > kLinearRules) {
    build_tables(compile_match_tables(rules));
    return;
  }
  for (const Rule& r : rules) linear_[linear_count_++] = compile_linear(r.match);
  use_linear_ = true;
}

namespace {

using unaligned::load64;

// The first `bits` bits of 8 wire-order bytes, as a mask over their load: byte i keeps its
// top min(8, bits - 8i) bits.
uint64_t prefix_mask(unsigned bits) {
  uint8_t m[8] = {};
  for (unsigned i = 0; i < 8; ++i) {
    const unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * i : 0;
    m[i] = uint8_t(0xff00u >> keep);
  }
  return load64(m);
}

// Never in a match word nor in a mask: a value with it set matches no frame.
constexpr uint64_t kNever = uint64_t{1} << 63;

}  // namespace

Classifier::LinearRule Classifier::compile_linear(const Match& m) {
  LinearRule r;
  auto exact = [&](uint64_t field_mask, unsigned shift, uint64_t v) {
    r.mask |= field_mask << shift;
    r.value |= (v & field_mask) << shift;
  };
  auto prefix = [&](const Cidr& c, uint64_t addr[2], uint64_t mask[2]) {
    exact(0xff, kVersionShift, c.family);  // a v4 prefix never matches a v6 packet
    // IPv4 addresses sit in the first 4 bytes, the rest zero (as the parser leaves them);
    // a v4 prefix past /32 counts as /32, as in the tables.
    const unsigned bits = std::min<unsigned>(c.prefix_len, c.family == 4 ? 32 : 128);
    mask[0] = prefix_mask(bits > 64 ? 64 : bits);
    mask[1] = prefix_mask(bits > 64 ? bits - 64 : 0);
    addr[0] = load64(c.addr.data()) & mask[0];
    addr[1] = load64(c.addr.data() + 8) & mask[1];
  };
  if (m.port) exact(0xffff, kPortShift, *m.port);
  if (m.vlan) {
    exact(0xfff, kVlanShift, *m.vlan);
    r.mask |= kHasVlan, r.value |= kHasVlan;
  }
  if (m.src || m.dst || m.proto || m.dscp || m.src_port || m.dst_port)
    r.mask |= kIsIp, r.value |= kIsIp;  // any L3/L4 field: never matches non-IP frames
  if (m.proto) exact(0xff, kProtoShift, *m.proto);
  if (m.dscp) exact(0x3f, kDscpShift, *m.dscp);
  if (m.src_port || m.dst_port) {
    // Port rules need ports: non-first fragments and port-less protocols never match them.
    r.mask |= kHasPorts, r.value |= kHasPorts;
    r.ports = true;
    if (m.src_port) r.src_lo = m.src_port->lo, r.src_span = uint16_t(m.src_port->hi - m.src_port->lo);
    if (m.dst_port) r.dst_lo = m.dst_port->lo, r.dst_span = uint16_t(m.dst_port->hi - m.dst_port->lo);
  }
  // Prefixes of two families can never both hold.
  if (m.src && m.dst && m.src->family != m.dst->family) r.value |= kNever;
  if (m.src) r.src = true, prefix(*m.src, r.src_addr, r.src_mask);
  if (m.dst) r.dst = true, prefix(*m.dst, r.dst_addr, r.dst_mask);
  r.more = r.src || r.dst || r.ports;
  return r;
}

int Classifier::classify_linear(const ParsedFrame& pf, uint16_t ingress_port) const {
  const uint64_t word = pf.match_word | uint64_t(ingress_port) << kPortShift;
  return walk_linear(word, AddrWords{load64(pf.src.data()), load64(pf.src.data() + 8)},
                     AddrWords{load64(pf.dst.data()), load64(pf.dst.data() + 8)}, pf.src_port,
                     pf.dst_port);
}

Classifier::Classifier(const MatchTables& t)
    : id_(g_next_id.fetch_add(1, std::memory_order_relaxed)),
      rule_count_(t.rule_count),
      words_(words_for(t.rule_count)),
      summary_words_(t.rule_count > 64 ? (words_ + 63) / 64 : 0) {
  build_tables(t);
}

void Classifier::build_tables(const MatchTables& t) {
  Arena arena(arena_, words_, summary_words_);
  RuleBits all(words_, 0);
  for (size_t i = 0; i < rule_count_; ++i) set_bit(all, i);
  full_ = arena.add(all);

  build_prefix_field(t.src_v4, arena, src4_.index, full_, src4_.skip);
  build_prefix_field(t.dst_v4, arena, dst4_.index, full_, dst4_.skip);
  build_prefix_field(t.src_v6, arena, src6_.index, full_, src6_.skip);
  build_prefix_field(t.dst_v6, arena, dst6_.index, full_, dst6_.skip);

  for (auto [ranges, field] :
       {std::pair{&t.src_port, &src_port_}, std::pair{&t.dst_port, &dst_port_}}) {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const PortRangeBits& r : *ranges) emit(out, uint32_t(r.lo), arena.add(r.rules));
    if (out.empty() || out.front().first != 0)  // ports no range covers match nothing
      out.insert(out.begin(), {0, arena.add(RuleBits(words_, 0))});
    field->index.build(out);
    field->skip = field->index.uniform() && field->index.first_value() == full_;
  }
  build_exact_field(t.vlan, t.vlan_other, arena, vlan_.index, full_, vlan_.skip);
  build_exact_field(t.ingress_port, t.ingress_port_other, arena, ingress_.index, full_,
                    ingress_.skip);

  skip_proto_ = skip_dscp_ = true;
  for (size_t p = 0; p < proto_.size(); ++p) {
    proto_[p] = arena.add(t.proto[p]);
    skip_proto_ &= proto_[p] == full_;
  }
  for (size_t d = 0; d < dscp_.size(); ++d) {
    dscp_[d] = arena.add(t.dscp[d]);
    skip_dscp_ &= dscp_[d] == full_;
  }
  no_ports_ = arena.add(t.no_ports);
  untagged_ = arena.add(t.untagged);
  non_ip_ = arena.add(t.non_ip);
  skip_no_ports_ = no_ports_ == full_;
  skip_untagged_ = untagged_ == full_;
  skip_non_ip_ = non_ip_ == full_;
  arena_.shrink_to_fit();
}

size_t Classifier::memory_bytes() const {
  size_t n = sizeof(*this) + arena_.capacity() * sizeof(uint64_t);
  for (size_t b : {src4_.index.memory_bytes(), dst4_.index.memory_bytes(),
                   src6_.index.memory_bytes(), dst6_.index.memory_bytes(),
                   src_port_.index.memory_bytes(), dst_port_.index.memory_bytes(),
                   vlan_.index.memory_bytes(), ingress_.index.memory_bytes()})
    n += b;
  return n;
}

int Classifier::classify(const ParsedFrame& pf, uint16_t ingress_port) const {
  if (use_linear_) return classify_linear(pf, ingress_port);
  if (rule_count_ == 0) return -1;
  const uint64_t w = pf.match_word;
  Offset maps[8];
  unsigned n = 0;
  if (!ingress_.skip) maps[n++] = ingress_.index.lookup(ingress_port);
  if (w & kHasVlan) {
    if (!vlan_.skip) maps[n++] = vlan_.index.lookup(uint32_t(w >> kVlanShift) & 0xfff);
  } else if (!skip_untagged_) {
    maps[n++] = untagged_;
  }
  if (!(w & kIsIp)) {
    if (!skip_non_ip_) maps[n++] = non_ip_;
  } else {
    // The parser sets only 4 or 6 with kIsIp.
    if (((w >> kVersionShift) & 0xff) == 4) {
      if (!src4_.skip) maps[n++] = src4_.index.lookup(key4(pf.src.data()));
      if (!dst4_.skip) maps[n++] = dst4_.index.lookup(key4(pf.dst.data()));
    } else {
      if (!src6_.skip) maps[n++] = src6_.index.lookup(key6(pf.src.data()));
      if (!dst6_.skip) maps[n++] = dst6_.index.lookup(key6(pf.dst.data()));
    }
    if (w & kHasPorts) {
      if (!src_port_.skip) maps[n++] = src_port_.index.lookup(pf.src_port);
      if (!dst_port_.skip) maps[n++] = dst_port_.index.lookup(pf.dst_port);
    } else if (!skip_no_ports_) {
      maps[n++] = no_ports_;
    }
    if (!skip_proto_) maps[n++] = proto_[(w >> kProtoShift) & 0xff];
    if (!skip_dscp_) maps[n++] = dscp_[(w >> kDscpShift) & 0x3f];
  }
  return first_of(maps, n);
}

int Classifier::classify_tables_common_ipv4(const Ipv4Fields& f, uint16_t ingress_port) const {
  if (rule_count_ == 0) return -1;
  // Ipv4Fields holds each address as loaded from the wire; the tables key it in host order,
  // as key4() of the wire bytes does.
  constexpr bool kLittle = std::endian::native == std::endian::little;
  auto key = [](uint32_t loaded) { return kLittle ? __builtin_bswap32(loaded) : loaded; };
  Offset maps[8];
  unsigned n = 0;
  if (!ingress_.skip) maps[n++] = ingress_.index.lookup(ingress_port);
  if (!skip_untagged_) maps[n++] = untagged_;
  if (!src4_.skip) maps[n++] = src4_.index.lookup(key(f.src()));
  if (!dst4_.skip) maps[n++] = dst4_.index.lookup(key(f.dst()));
  if (!src_port_.skip) maps[n++] = src_port_.index.lookup(f.src_port());
  if (!dst_port_.skip) maps[n++] = dst_port_.index.lookup(f.dst_port());
  if (!skip_proto_) maps[n++] = proto_[f.proto];
  if (!skip_dscp_) maps[n++] = dscp_[f.dscp() & 0x3f];
  return first_of(maps, n);
}

int Classifier::first_of(const Offset* maps, unsigned n) const {
  if (n == 0) return 0;  // nothing constrains the frame: every rule holds, the first wins
  if (summary_words_ == 0) {
    const uint64_t* a = arena_.data();
    uint64_t x = a[maps[0]];
    for (unsigned i = 1; i < n; ++i) x &= a[maps[i]];
    return x ? int(__builtin_ctzll(x)) : -1;
  }
  return intersect(maps, n);
}

template <unsigned kN>
CachedResult& Classifier::remembered(const Offset* maps) const {
  uint64_t h = id_ * 0x9e3779b97f4a7c15ull + kN;
  for (unsigned i = 0; i < kN; ++i) h = (h ^ maps[i]) * 0xff51afd7ed558ccdull;
  return t_cache[(h >> 40) % kCacheEntries];
}

int Classifier::intersect(const Offset* maps, unsigned n) const {
  switch (n) {  // classify() looks up 1 to 8 fields
    case 1: return intersect_n<1>(maps);
    case 2: return intersect_n<2>(maps);
    case 3: return intersect_n<3>(maps);
    case 4: return intersect_n<4>(maps);
    case 5: return intersect_n<5>(maps);
    case 6: return intersect_n<6>(maps);
    case 7: return intersect_n<7>(maps);
    default: return intersect_n<8>(maps);
  }
}

template <unsigned kN>
int Classifier::intersect_n(const Offset* maps) const {
  constexpr unsigned n = kN;
  const uint64_t* a = arena_.data();
  const size_t words_at = 1 + summary_words_;
  // No rule below the highest of the fields' lowest rules can be in every field; that rule
  // itself is the answer when every field has it (always so for one field).
  uint64_t floor = a[maps[0]];
  for (unsigned i = 1; i < n; ++i) floor = std::max(floor, a[maps[i]]);
  if (floor == kNoRule) return -1;  // a field with no rule at all
  {
    const size_t w = words_at + floor / 64;
    const uint64_t bit = uint64_t{1} << (floor % 64);
    uint64_t x = a[maps[0] + w];
    for (unsigned i = 1; i < n; ++i) x &= a[maps[i] + w];
    if (x & bit) return int(floor);
  }
  // Past the floor the walk may visit many words (each field alone letting most rules
  // through): look for a remembered answer before it, not after its first word. Only
  // answers that needed a second candidate word are stored, so cheap ones evict no costly.
  CachedResult& memo = remembered<kN>(maps);
  if (memo.owner == id_ && memo.n == n && std::equal(maps, maps + n, memo.maps))
    return memo.result;
  unsigned visited = 0;
  int result = -1;
  const size_t first_word = floor / 64;
  for (size_t s = first_word / 64; s < summary_words_ && result < 0; ++s) {
    uint64_t candidates = a[maps[0] + 1 + s];
    for (unsigned i = 1; i < n; ++i) candidates &= a[maps[i] + 1 + s];
    if (s == first_word / 64) candidates &= ~uint64_t{0} << (first_word % 64);
    while (candidates) {
      ++visited;
      const size_t k = s * 64 + size_t(__builtin_ctzll(candidates));
      const size_t at = words_at + k;
      uint64_t x = a[maps[0] + at];
      for (unsigned i = 1; i < n; ++i) x &= a[maps[i] + at];
      if (x) {
        result = int(k * 64 + size_t(__builtin_ctzll(x)));
        break;
      }
      candidates &= candidates - 1;
    }
  }
  if (visited >= 2) {
    memo.owner = id_;
    memo.n = n;
    std::copy(maps, maps + n, memo.maps);
    memo.result = result;
  }
  return result;
}

}  // namespace sluice
