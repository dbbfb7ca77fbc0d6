// A packet-buffer pool (rte_pktmbuf_pool_create) as an owned resource: freed on destruction.
// The owner destroys it only after every port and worker that could hold its mbufs is gone
// (Dataplane's member order), and in_use() tells tests and the shutdown log whether any leaked.
#pragma once

#include <rte_mbuf.h>
#include <rte_errno.h>
#include <rte_mempool.h>

#include <string>
#include <utility>

#include "result.hpp"

namespace sluice {

class Mempool {
 public:
  // n mbufs of `data_room` bytes each, headroom included (RTE_MBUF_DEFAULT_BUF_SIZE: 2 KiB +
  // headroom, one standard frame), per-lcore cache of `cache` mbufs, memory on `socket`
  // (SOCKET_ID_ANY: wherever).
  static Result<Mempool> create(const std::string& name, unsigned n, uint32_t data_room,
                                unsigned cache, int socket);

  Mempool() = default;
  Mempool(Mempool&& other) noexcept : mp_(std::exchange(other.mp_, nullptr)) {}
  Mempool& operator=(Mempool&& other) noexcept {
    if (this != &other) {
      reset();
      mp_ = std::exchange(other.mp_, nullptr);
    }
    return *this;
  }
  Mempool(const Mempool&) = delete;
  Mempool& operator=(const Mempool&) = delete;
  ~Mempool() { reset(); }

  rte_mempool* get() const { return mp_; }
  unsigned size() const { return mp_ ? mp_->size : 0; }
  // mbufs not in the pool (nor in any lcore's cache): held by a queue, a worker or a leak.
  unsigned in_use() const { return mp_ ? rte_mempool_in_use_count(mp_) : 0; }

 private:
  explicit Mempool(rte_mempool* mp) : mp_(mp) {}
  void reset() {
    if (mp_) rte_mempool_free(mp_);
    mp_ = nullptr;
  }
  rte_mempool* mp_ = nullptr;
};

inline Result<Mempool> Mempool::create(const std::string& name, unsigned n, uint32_t data_room,
                                       unsigned cache, int socket) {
  rte_mempool* mp =
      rte_pktmbuf_pool_create(name.c_str(), n, cache, 0, uint16_t(data_room), socket);
  if (mp == nullptr)
    return make_error("cannot create mbuf pool '" + name + "' of " + std::to_string(n) +
                      " mbufs of " + std::to_string(data_room) + " bytes: " +
                      rte_strerror(rte_errno) +
                      " (give EAL more memory: -m, --socket-mem, or hugepages)");
  return Mempool(mp);
}

}  // namespace sluice
