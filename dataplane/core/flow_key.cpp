#include "flow_key.hpp"

#include <random>

namespace sluice {

uint64_t random_hash_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd() ^ (uint64_t(rd()) << 16);
}

}  // namespace sluice
