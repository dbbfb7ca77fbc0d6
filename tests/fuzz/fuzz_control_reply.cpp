// libFuzzer target: the control protocol v2's reply decoder (decode_reply, the client's
// side) on arbitrary bytes, framed (fuzz_control_frames.hpp). Never a crash; a reply that
// decodes re-encodes (encode_result / encode_error, the server's side) and decodes to the
// same reply.
#include <cstdint>
#include <string>

#include "control_messages.hpp"
#include "fuzz_control_frames.hpp"

using namespace sluice;
using namespace sluice::wire;
using sluice::fuzz::fail;

namespace {

constexpr const char* kTarget = "fuzz_control_reply";

std::string encode(const Reply& r) { return r.ok ? encode_result(r.id, r.result) : encode_error(r.error); }

void check_body(const std::string& body) {
  Result<Reply> decoded = decode_reply(body);
  if (!decoded.ok()) {
    if (decoded.error().message.empty()) fail(kTarget, "an error without a message", body);
    return;
  }
  const Reply& reply = decoded.value();
  if (!reply.ok && reply.error.id != reply.id) fail(kTarget, "an error reply's ids differ", body);
  const std::string encoded = encode(reply);
  Result<Reply> again = decode_reply(encoded);
  if (!again.ok()) fail(kTarget, "an encoded reply does not decode", encoded + "\n" + again.error().message);
  const Reply& back = again.value();
  if (back.id != reply.id || back.ok != reply.ok) fail(kTarget, "a reply's id or ok changes", encoded);
  if (reply.ok ? back.result != reply.result
               : back.error.kind != reply.error.kind || back.error.message != reply.error.message)
    fail(kTarget, "a reply decodes to another after encoding", body + "\n---\n" + encoded);
  if (encode(back) != encoded) fail(kTarget, "encoding a reply twice differs", encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  for (const std::string& body : fuzz::framed_bodies(kTarget, data, size)) check_body(body);
  return 0;
}
