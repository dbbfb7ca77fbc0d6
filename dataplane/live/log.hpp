// Operator messages of the live dataplane: one line each on stderr, prefixed "sluiced: ".
// Errors travel as Result values to main(); this is for what the operator should know while
// things work (queue fallbacks, link changes, shutdown accounting).
#pragma once

#include <cstdarg>
#include <cstdio>

namespace sluice {

__attribute__((format(printf, 1, 2))) inline void live_log(const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "sluiced: %s\n", line);
}

}  // namespace sluice
