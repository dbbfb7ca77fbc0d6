#include "pcap_io.hpp"

#include <pcap/pcap.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

namespace sluice {

namespace {

constexpr uint64_t kNsPerSec = 1000000000ull;

Error file_error(const std::string& path, const std::string& what,
                 ErrorKind kind = ErrorKind::runtime) {
  return make_error(path + ": " + what, kind);
}
// A capture that cannot be read as one: the input's fault (exit 2).
Error input_error(const std::string& path, const std::string& what) {
  return file_error(path, what, ErrorKind::invalid_input);
}

// Turns libpcap's open error into what the user needs to hear. libpcap prefixes some
// messages with the path (ours already does), and says "unknown file format" for anything
// that is neither pcap nor pcapng.
std::string describe_open_failure(const std::string& path, const char* errbuf) {
  std::string e = errbuf;
  if (e.compare(0, path.size() + 2, path + ": ") == 0) e.erase(0, path.size() + 2);
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
    return "empty file, not a pcap or pcapng capture";
  if (e.find("unknown file format") != std::string::npos ||
      e.find("bad dump file format") != std::string::npos)
    return "not a pcap or pcapng file (" + e + ")";
  if (e.empty()) return "cannot open capture file";
  return e;
}

// What the file itself says about its format: libpcap hides both the link type number (it
// maps LINKTYPE_ values to its platform's DLT_ ones: LINKTYPE_RAW 101 becomes DLT_RAW 12)
// and the resolution of a classic pcap (it scales microseconds to the nanoseconds we ask for).
struct FileHeader {
  std::optional<uint32_t> link_type;  // LINKTYPE_ value: classic pcap, or pcapng's first IDB
  bool microseconds = false;          // classic pcap with microsecond timestamps
};

uint32_t load32(const unsigned char* p, bool swapped) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return swapped ? __builtin_bswap32(v) : v;
}

// From the file libpcap has open (pread: its stream's position stays where it is), not by
// opening the path again: one open per capture, and a FIFO's bytes are not taken from libpcap.
// A stream that cannot pread (a pipe) says nothing about its header.
FileHeader read_file_header(pcap_t* h) {
  FileHeader hdr;
  FILE* f = pcap_file(h);
  if (f == nullptr) return hdr;
  const int fd = fileno(f);
  auto read_at = [fd](unsigned char* out, size_t n, off_t at) {
    size_t got = 0;
    while (got < n) {
      const ssize_t k = ::pread(fd, out + got, n - got, at + off_t(got));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      got += size_t(k);
    }
    return got;
  };
  unsigned char b[64] = {};
  const size_t got = read_at(b, sizeof b, 0);
  if (got < 24) return hdr;
  const uint32_t magic = load32(b, false);
  if (magic == 0xa1b2c3d4 || magic == 0xd4c3b2a1 || magic == 0xa1b23c4d || magic == 0x4d3cb2a1) {
    const bool swapped = magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1;
    hdr.microseconds = magic == 0xa1b2c3d4 || magic == 0xd4c3b2a1;
    hdr.link_type = load32(b + 20, swapped) & 0x0fffffff;  // the top bits are FCS flags
  } else if (magic == 0x0a0d0d0a) {
    // Section header block (its byte-order magic at 8), then the first interface block.
    const bool swapped = load32(b + 8, false) == 0x4d3c2b1a;
    const uint32_t shb_len = load32(b + 4, swapped);
    if (shb_len < 28 || shb_len % 4 != 0) return hdr;
    unsigned char idb[12] = {};
    if (read_at(idb, sizeof idb, off_t(shb_len)) == sizeof idb && load32(idb, swapped) == 1) {
      uint16_t lt;
      std::memcpy(&lt, idb + 8, 2);
      hdr.link_type = swapped ? __builtin_bswap16(lt) : lt;
    }
  }
  return hdr;
}

}  // namespace

// ---------------------------------------------------------------- reader

Result<std::unique_ptr<PcapReader>> PcapReader::open(const std::string& path) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  // Asking for nanosecond precision makes libpcap scale microsecond files up, so ts.tv_usec
  // always holds nanoseconds whatever the file's own resolution.
  pcap_t* h =
      pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (h == nullptr) return input_error(path, describe_open_failure(path, errbuf));
  const FileHeader header = read_file_header(h);
  int link = pcap_datalink(h);
  if (link != DLT_EN10MB) {
    const char* name = pcap_datalink_val_to_name(link);
    pcap_close(h);
    // The number the file says (what tcpdump and wireshark show), with libpcap's name.
    const uint32_t number = header.link_type.value_or(uint32_t(link));
    return input_error(path, "link type " + std::to_string(number) + " (" +
                                (name ? name : "unknown") +
                                ") is not supported; only Ethernet (EN10MB, 1) captures are");
  }
  auto reader = std::unique_ptr<PcapReader>(new PcapReader(path, h));
  reader->microseconds_ = header.microseconds;
  return reader;
}

PcapReader::~PcapReader() {
  if (handle_ != nullptr) pcap_close(handle_);
}

Result<bool> PcapReader::next(PcapPacket* out) {
  pcap_pkthdr* hdr = nullptr;
  const u_char* bytes = nullptr;
  int rc = pcap_next_ex(handle_, &hdr, &bytes);
  if (rc == PCAP_ERROR_BREAK) return false;  // end of file
  if (rc != 1) {
    return input_error(path_, "record " + std::to_string(records_ + 1) + ": " +
                                 (rc == PCAP_ERROR ? pcap_geterr(handle_) : "read failed"));
  }
  ++records_;
  // tv_usec holds nanoseconds (libpcap scaled a microsecond file's by 1000): a fraction of a
  // second must stay below one second, or the timestamp means nothing.
  if (uint64_t(hdr->ts.tv_usec) >= kNsPerSec) {
    const std::string field = microseconds_
                                  ? "microsecond field " + std::to_string(hdr->ts.tv_usec / 1000) +
                                        " is not below 1000000"
                                  : "nanosecond field " + std::to_string(hdr->ts.tv_usec) +
                                        " is not below 1000000000";
    return input_error(path_, "record " + std::to_string(records_) + ": timestamp " + field +
                                 " (not a valid capture)");
  }
  out->ts_ns = uint64_t(hdr->ts.tv_sec) * kNsPerSec + uint64_t(hdr->ts.tv_usec);
  out->wire_len = hdr->len;
  out->data.assign(bytes, bytes + hdr->caplen);
  return true;
}

// ---------------------------------------------------------------- writer

Result<std::unique_ptr<PcapWriter>> PcapWriter::create(const std::string& path) {
  pcap_t* dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, int(kSnapLen),
                                                      PCAP_TSTAMP_PRECISION_NANO);
  if (dead == nullptr) return file_error(path, "cannot set up a pcap writer");
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  if (d == nullptr) {
    std::string why = pcap_geterr(dead);
    pcap_close(dead);
    if (why.compare(0, path.size() + 2, path + ": ") == 0) why.erase(0, path.size() + 2);
    return file_error(path, "cannot create: " + why);
  }
  return std::unique_ptr<PcapWriter>(new PcapWriter(path, dead, d));
}

Result<std::unique_ptr<PcapWriter>> PcapWriter::create(FILE* stream, const std::string& name) {
  pcap_t* dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, int(kSnapLen),
                                                      PCAP_TSTAMP_PRECISION_NANO);
  if (dead == nullptr) {
    std::fclose(stream);
    return file_error(name, "cannot set up a pcap writer");
  }
  pcap_dumper_t* d = pcap_dump_fopen(dead, stream);
  if (d == nullptr) {
    std::string why = pcap_geterr(dead);
    pcap_close(dead);
    std::fclose(stream);
    return file_error(name, "cannot write: " + why);
  }
  return std::unique_ptr<PcapWriter>(new PcapWriter(name, dead, d));
}

PcapWriter::~PcapWriter() {
  if (dumper_ != nullptr) pcap_dump_close(dumper_);
  if (dead_ != nullptr) pcap_close(dead_);
}

Status PcapWriter::write(uint64_t ts_ns, const uint8_t* data, uint32_t len, uint32_t wire_len) {
  if (dumper_ == nullptr) return file_error(path_, "write after close");
  pcap_pkthdr hdr{};
  hdr.ts.tv_sec = time_t(ts_ns / kNsPerSec);
  hdr.ts.tv_usec = suseconds_t(ts_ns % kNsPerSec);  // nanoseconds: the file says so
  hdr.caplen = len;
  hdr.len = wire_len == 0 ? len : wire_len;
  pcap_dump(reinterpret_cast<u_char*>(dumper_), &hdr, data);
  ++records_;
  return Ok{};
}

Status PcapWriter::close() {
  if (dumper_ == nullptr) return Ok{};
  FILE* f = pcap_dump_file(dumper_);
  bool failed = pcap_dump_flush(dumper_) != 0 || std::ferror(f) != 0;
  int saved_errno = errno;
  pcap_dump_close(dumper_);  // fclose()s the file
  dumper_ = nullptr;
  if (failed) return file_error(path_, std::string("write failed: ") + std::strerror(saved_errno));
  return Ok{};
}

}  // namespace sluice
