// Frame and address bytes read as one machine word, in memory order, from any alignment:
// memcpy is the only way C++ allows it, and compilers turn it into a single load. The
// parser, the flow key and the classifier all compare such words against constants or
// masks laid out the same way, so none of them needs a byte swap on the fast path.
#pragma once

#include <cstdint>
#include <cstring>

namespace sluice::unaligned {

inline uint16_t load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace sluice::unaligned
