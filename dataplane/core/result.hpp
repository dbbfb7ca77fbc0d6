// One error model for the whole code base, written down here once:
//  - A function that can fail returns Result<T> (Status for no value). Nothing in the core
//    or the live dataplane throws; a type whose construction can fail has a static
//    `create(...) -> Result<...>` factory instead of a throwing constructor, and allocation
//    of big tables is checked and reported with the memory asked for. Third-party APIs that
//    throw (CLI11, nlohmann::json) are caught where they are called and turned into a Result.
//  - An Error carries the complete message the user sees (already prefixed with file:line
//    where one applies) and its kind: whose fault it is.
//  - Only main() turns an error into an exit code, with exit_code() below (SPEC §1:
//    0 success, 1 runtime failure, 2 bad usage or invalid input).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace sluice {

enum class ErrorKind : uint8_t {
  runtime,        // the system refused: memory, I/O, a device, a peer: exit 1
  invalid_input,  // bad usage, a malformed rules file, capture or request: exit 2
};

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::runtime;
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitInvalidInput = 2;

// The one mapping from an error to a process exit code.
constexpr int exit_code(ErrorKind kind) {
  return kind == ErrorKind::invalid_input ? kExitInvalidInput : kExitRuntime;
}
inline int exit_code(const Error& error) { return exit_code(error.kind); }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result of an operation with no value.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(std::string message, ErrorKind kind = ErrorKind::runtime) {
  return Error{std::move(message), kind};
}
inline Error invalid_input(std::string message) {
  return Error{std::move(message), ErrorKind::invalid_input};
}
// The same error, classed as `kind`: for a step whose every failure is of one kind whatever
// the callee said (e.g. a rules file that would not load is the file's fault).
inline Error with_kind(Error error, ErrorKind kind) {
  error.kind = kind;
  return error;
}

}  // namespace sluice
