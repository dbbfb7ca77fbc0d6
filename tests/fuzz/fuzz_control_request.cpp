// libFuzzer target: the control protocol v2's request decoder (control_messages.hpp) on
// arbitrary bytes, framed (fuzz_control_frames.hpp). Never a crash; a request that decodes
// re-encodes and decodes to the same request; a refused one gets an error reply that the
// client's decode_reply reads back as the same error.
#include <cstdint>
#include <string>
#include <variant>

#include "control_messages.hpp"
#include "fuzz_control_frames.hpp"

using namespace sluice;
using namespace sluice::wire;
using sluice::fuzz::fail;

namespace {

constexpr const char* kTarget = "fuzz_control_request";

bool same(const Request& a, const Request& b) {
  return a.id == b.id && a.op == b.op && a.text == b.text && a.filename == b.filename &&
         a.name == b.name && a.before == b.before && a.fields == b.fields &&
         a.expect_generation == b.expect_generation && a.top.count == b.top.count &&
         a.top.rule == b.top.rule && a.top.by_bytes == b.top.by_bytes;
}

void check_body(const std::string& body) {
  auto decoded = decode_request(body);
  if (auto* request = std::get_if<Request>(&decoded)) {
    const std::string encoded = encode_request(*request);
    auto again = decode_request(encoded);
    auto* back = std::get_if<Request>(&again);
    if (back == nullptr) fail(kTarget, "an encoded request does not decode", encoded + "\n" + std::get<ErrorReply>(again).message);
    if (!same(*request, *back)) fail(kTarget, "a request decodes to another after encoding", body + "\n---\n" + encoded);
    if (encode_request(*back) != encoded) fail(kTarget, "encoding a request twice differs", encoded);
    return;
  }
  const ErrorReply& error = std::get<ErrorReply>(decoded);
  if (error.message.empty()) fail(kTarget, "an error reply without a message", body);
  const std::string encoded = encode_error(error);
  Result<Reply> reply = decode_reply(encoded);
  if (!reply.ok()) fail(kTarget, "an error reply does not decode", encoded + "\n" + reply.error().message);
  if (reply->ok || reply->id != error.id || reply->error.id != error.id || reply->error.kind != error.kind)
    fail(kTarget, "an error reply decodes to another", encoded);
  // Invalid UTF-8 in the message (a cut field) is replaced on encoding: compare encodings.
  if (encode_error(reply->error) != encoded) fail(kTarget, "an error reply's message changes on the way", encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  for (const std::string& body : fuzz::framed_bodies(kTarget, data, size)) check_body(body);
  return 0;
}
