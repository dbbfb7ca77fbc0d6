// Shared by the control protocol targets: the input as a byte stream of frames
// (control_frame.hpp), fed to a FrameReader in pieces. The first byte picks the piece size
// (0: all at once), so bodies split anywhere are read too; the bodies must be the same as
// when the stream arrives whole, a stream refused either way, and each must frame and read back to itself.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "control_frame.hpp"

namespace sluice::fuzz {

[[noreturn]] inline void fail(const char* target, const char* what, std::string_view detail) {
  std::fprintf(stderr, "%s: %s\n%.*s\n", target, what, int(detail.size()), detail.data());
  std::abort();
}

struct Framed {
  std::vector<std::string> bodies;
  std::string error;
};

inline Framed read_frames(std::string_view stream, size_t piece) {
  wire::FrameReader reader;
  Framed out;
  for (size_t at = 0; at < stream.size();) {
    const size_t n = piece == 0 ? stream.size() : std::min(piece, stream.size() - at);
    reader.feed(stream.substr(at, n));
    at += n;
    while (auto body = reader.next()) out.bodies.push_back(std::move(*body));
  }
  out.error = reader.error();
  return out;
}

// The bodies in `data` (past its first byte), checked as the header says.
inline std::vector<std::string> framed_bodies(const char* target, const uint8_t* data, size_t size) {
  if (size == 0) return {};
  const size_t piece = data[0] % 17;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  Framed whole = read_frames(stream, 0);
  Framed pieces = read_frames(stream, piece);
  // The error's wording may differ (a non-digit seen before or after the ninth digit), not
  // whether there is one.
  if (whole.bodies != pieces.bodies || whole.error.empty() != pieces.error.empty())
    fail(target, "the frames differ when the stream arrives in pieces", stream);
  for (const std::string& body : whole.bodies) {
    Framed again = read_frames(wire::encode_frame(body), 0);
    if (!again.error.empty() || again.bodies.size() != 1 || again.bodies[0] != body)
      fail(target, "a body does not frame and read back to itself", body);
  }
  return whole.bodies;
}

}  // namespace sluice::fuzz
