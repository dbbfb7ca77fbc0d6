// libFuzzer target: the capture reader (libpcap underneath) on arbitrary file contents. The
// bytes are handed over as a file (a memfd, no disk, reused from input to input), read to the end or to the first error,
// and every packet it returns must be within the snap length it promised.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "replay/pcap_io.hpp"

using namespace sluice;

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_pcap_reader: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One memfd for the whole run, rewritten and cut to each input's size: system calls were a
  // quarter of the target's time, and a memfd_create and a close per input test nothing. The
  // reader opens it afresh by its path, as sluiced opens a capture.
  static const int fd = memfd_create("fuzz.pcap", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  check(fd >= 0, "memfd_create failed");
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, data + done, size - done, off_t(done));
    check(n > 0, "pwrite failed");
    done += size_t(n);
  }
  check(ftruncate(fd, off_t(size)) == 0, "ftruncate failed");  // cuts the previous input's tail
  auto reader = PcapReader::open(path);
  if (reader) {
    PcapPacket pkt;
    for (uint64_t i = 0; i < 100000; ++i) {
      auto more = (*reader)->next(&pkt);
      if (!more) {
        check(!more.error().message.empty(), "an error without a message");
        break;
      }
      if (!*more) break;
      check(pkt.data.size() <= PcapWriter::kSnapLen, "a record longer than any snap length");
      check((*reader)->records_read() == i + 1, "records_read does not count records");
    }
  } else {
    check(!reader.error().message.empty(), "an open error without a message");
  }
  return 0;
}
