// Status and Result<T>: how every fallible memsim function reports failure.
// A Status is OK or carries a code and a one-line message that already names the offending input
// (file, JSON pointer, option). Exceptions never cross a module boundary; tools/ prints and exits.
#ifndef MEMSIM_LIB_UTIL_STATUS_H_
#define MEMSIM_LIB_UTIL_STATUS_H_

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace memsim {

class Status {
 public:
  enum class Code { kOk, kInvalidArgument, kParseError, kNotFound, kUnsupported, kInternal };

  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status ParseError(std::string msg) { return Status(Code::kParseError, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Unsupported(std::string msg) { return Status(Code::kUnsupported, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const { return ok() ? "OK" : message_; }

  /// Returns a copy whose message is prefixed with "|prefix|: ".
  Status WithPrefix(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + ": " + message_);
  }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

/// Holds a T or a non-OK Status (the shape of absl::StatusOr).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}     // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace memsim

/// Returns early with the status of |expr| when it is not OK.
#define MEMSIM_RETURN_IF_ERROR(expr)         \
  do {                                       \
    ::memsim::Status _st = (expr);           \
    if (!_st.ok()) return _st;               \
  } while (0)

#define MEMSIM_CONCAT_INNER_(a, b) a##b
#define MEMSIM_CONCAT_(a, b) MEMSIM_CONCAT_INNER_(a, b)
/// `MEMSIM_ASSIGN_OR_RETURN(auto x, F())`: binds the value or returns the error.
#define MEMSIM_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto MEMSIM_CONCAT_(_res_, __LINE__) = (expr);                            \
  if (!MEMSIM_CONCAT_(_res_, __LINE__).ok())                                \
    return MEMSIM_CONCAT_(_res_, __LINE__).status();                        \
  lhs = std::move(MEMSIM_CONCAT_(_res_, __LINE__)).value()

#endif  // MEMSIM_LIB_UTIL_STATUS_H_
