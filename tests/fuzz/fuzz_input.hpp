// Reads typed values from a libFuzzer input, front to back; past the end every read is 0, so
// a short input is still a valid (if dull) one and the targets never branch on "ran out".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sluice::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return empty() ? 0 : size_ - pos_; }

  uint64_t bits(unsigned n) {  // n <= 64 bits, little-endian
    uint64_t v = 0;
    for (unsigned i = 0; i < (n + 7) / 8; ++i) v |= uint64_t(u8()) << (8 * i);
    return n >= 64 ? v : v & ((uint64_t{1} << n) - 1);
  }
  uint8_t u8() { return empty() ? 0 : data_[pos_++]; }
  uint16_t u16() { return uint16_t(bits(16)); }
  uint32_t u32() { return uint32_t(bits(32)); }
  uint64_t u64() { return bits(64); }
  bool flag() { return (u8() & 1) != 0; }
  // A value in [lo, hi].
  uint64_t range(uint64_t lo, uint64_t hi) {
    uint64_t span = hi - lo;
    uint64_t v = span < 0x100 ? u8() : span < 0x10000 ? u16() : span < 0x100000000ull ? u32() : u64();
    return span == UINT64_MAX ? v : lo + v % (span + 1);
  }
  // Up to n bytes (fewer at the end of the input).
  size_t take(uint8_t* out, size_t n) {
    size_t k = n < remaining() ? n : remaining();
    if (k != 0) std::memcpy(out, data_ + pos_, k);
    pos_ += k;
    return k;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace sluice::fuzz
