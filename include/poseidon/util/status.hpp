// Error values for Poseidon. User mistakes (bad prototxt, wrong shapes, missing
// files) are reported by throwing a poseidon::Error subclass whose message names
// the file/line/field or the layer and shapes; tools catch it in main() and exit
// non-zero, Python sees an exception. Internal invariants use glog's CHECK.
// Status is for code that must not throw across threads (communication threads).
#ifndef POSEIDON_UTIL_STATUS_HPP_
#define POSEIDON_UTIL_STATUS_HPP_

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace poseidon {

// `text` with every byte that a terminal or a UTF-8 decoder could choke on
// written as an escape: control characters (newline included) as \n, \t,
// \r or \xNN, DEL and bytes that are not part of valid UTF-8 as \xNN, a
// backslash as \\. Printable ASCII and valid UTF-8 (non-Latin names) stay
// as they are. For quoting input (names, source lines) in messages.
std::string EscapeForMessage(const std::string& text);

// Note [Error messages are printable]
// Every Error's message goes through SanitizeErrorMessage: the same escaping
// as EscapeForMessage except that newlines and tabs, which messages use for
// layout, are kept. So a prototxt or weights file holding control bytes or
// invalid UTF-8 in a name can neither garble the terminal nor make the
// Python binding fail to decode the message; the escaping is exact for
// anything quoted with EscapeForMessage first.
std::string SanitizeErrorMessage(const std::string& message);

// Base of every user-facing error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what)
      : std::runtime_error(SanitizeErrorMessage(what)) {}
};

// A malformed or inconsistent model/solver description (prototxt, parameters).
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Incompatible blob shapes between layers or against stored weights.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A file or database that is missing, unreadable or corrupt.
class IOError : public Error {
 public:
  using Error::Error;
};

// Training diverged or produced non-finite values.
class NumericError : public Error {
 public:
  using Error::Error;
};

// Distributed runtime failures (a rank died, ranks disagree).
class DistributedError : public Error {
 public:
  using Error::Error;
};

// Out of memory on a device or in pinned host memory, naming what was asked
// for and what was held (util/caching_allocator.hpp).
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// Concatenates its arguments with operator<<.
template <typename... Args>
std::string StrCat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

// Rethrows the poseidon::Error being handled, as the same type, with
// "<context>: " before its message, so that an error raised deep in a loader
// ("stored blob ... holds 3 values") names the file or layer it came from.
// Call only inside a catch block for Error.
[[noreturn]] inline void RethrowWithContext(const std::string& context) {
  try {
    throw;
  } catch (const ConfigError& e) {
    throw ConfigError(context + ": " + e.what());
  } catch (const ShapeError& e) {
    throw ShapeError(context + ": " + e.what());
  } catch (const IOError& e) {
    throw IOError(context + ": " + e.what());
  } catch (const NumericError& e) {
    throw NumericError(context + ": " + e.what());
  } catch (const DistributedError& e) {
    throw DistributedError(context + ": " + e.what());
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(context + ": " + e.what());
  } catch (const Error& e) {
    throw Error(context + ": " + e.what());
  }
}

// Status: the non-throwing error value handed across threads.
class Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  static Status Failure(std::string message) {
    Status s;
    s.ok_ = false;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return ok_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
  std::string message_;
};

}  // namespace poseidon

// Throws ErrorType with the streamed arguments as message.
#define POSEIDON_THROW(ErrorType, ...) \
  throw ErrorType(::poseidon::StrCat(__VA_ARGS__))

// Checks a condition on user input; throws ErrorType naming what was wrong.
#define POSEIDON_REQUIRE(cond, ErrorType, ...) \
  do {                                         \
    if (!(cond)) {                             \
      POSEIDON_THROW(ErrorType, __VA_ARGS__);  \
    }                                          \
  } while (0)

#endif  // POSEIDON_UTIL_STATUS_HPP_
