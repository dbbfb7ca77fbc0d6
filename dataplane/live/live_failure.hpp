// What kind of failure a live-mode step met; main() maps it to the exit code (SPEC §1), the
// same way replay does with ReplayFailure. Functions still return Result<T> (result.hpp) with
// the full message; this only says which exit code the message deserves.
#pragma once

#include <cstdint>

namespace sluice {

enum class LiveFailure : uint8_t {
  usage,    // bad EAL arguments, rules file, port set (none, odd count), options: exit 2
  runtime,  // the system refused: memory, queue set-up, device start, report write: exit 1
};

}  // namespace sluice
