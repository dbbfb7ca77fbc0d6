#include "packet_ring_drops.hpp"

#include <dirent.h>
#include <linux/if_packet.h>
#include <sys/socket.h>

#include <cstdlib>

namespace sluice {
namespace {

// An AF_PACKET socket bound to ifindex.
bool is_packet_socket_on(int fd, int ifindex) {
  int domain = 0;
  socklen_t len = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET) return false;
  sockaddr_ll addr{};
  len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return addr.sll_family == AF_PACKET && addr.sll_ifindex == ifindex;
}

}  // namespace

PacketRingDrops PacketRingDrops::find(int ifindex) {
  PacketRingDrops d;
  d.ifindex_ = ifindex;
  d.total_ = std::make_unique<std::atomic<uint64_t>>(0);
  if (ifindex <= 0) return d;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return d;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    if (is_packet_socket_on(int(fd), ifindex)) d.fds_.push_back(int(fd));
  }
  closedir(dir);
  // Counted from now on: what the sockets dropped before (between probe and start, with no
  // worker polling yet) is not the dataplane's loss.
  for (int fd : d.fds_) {
    tpacket_stats st{};
    socklen_t len = sizeof st;
    (void)getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len);
  }
  return d;
}

uint64_t PacketRingDrops::total() const {
  if (!total_) return 0;
  uint64_t read = 0;
  for (int fd : fds_) {
    if (!is_packet_socket_on(fd, ifindex_)) continue;
    tpacket_stats st{};
    socklen_t len = sizeof st;
    if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) read += st.tp_drops;
  }
  return total_->fetch_add(read, std::memory_order_relaxed) + read;
}

}  // namespace sluice
