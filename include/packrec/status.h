// Error values for the whole library: every fallible call returns a Status or a Result<T>.
// Expected data errors (a corrupt record, a missing file, a bad option) are values, never
// exceptions; programming errors are asserts.
#ifndef PACKREC_STATUS_H_
#define PACKREC_STATUS_H_

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace packrec {

// Stable codes; the CLI maps each to a documented exit code (docs/cli.md).
enum class StatusCode : unsigned char {
  kOk = 0,
  kInvalidArgument,  // a bad option or flag value; the message names it
  kNotFound,         // an input path or record that does not exist, or no images found
  kAlreadyExists,    // an output that exists and may not be replaced
  kInvalidInput,     // an input file that is not a usable image (convert time)
  kCorruption,       // stored data fails a check: checksum, bad magic, impossible index entry
  kTruncated,        // stored data is shorter than its metadata says
  kNotSupported,     // a newer format version, or an unsupported feature
  kIOError,          // the operating system refused: permission, disk full, ...
  kOutOfRange,       // a record index past the end
  kInternal,         // a bug or an unexpected library failure
};

std::string_view StatusCodeName(StatusCode code);

// What the caller can do about an error, as data: the message says what is wrong, and the CLI and
// the Python package each word this in their own terms ("pass --overwrite", "overwrite=True").
enum class Remedy : unsigned char {
  kNone = 0,
  kOverwriteToReplace,  // replace what is at the output (WriterOptions::overwrite)
  kOverwriteToRestart,  // start the conversion again from nothing (WriterOptions::overwrite)
  kResumeOrOverwrite,   // continue the interrupted conversion (ConvertOptions::resume), or restart
  kResumeOnceFixed,     // the records so far are kept: fix the cause, then resume the conversion
  kSkipBadInput,        // leave the bad input out (ConvertOptions::on_error = OnBadRecord::kSkip)
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return {}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status InvalidInput(std::string m) { return {StatusCode::kInvalidInput, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status Truncated(std::string m) { return {StatusCode::kTruncated, std::move(m)}; }
  static Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: <message>", or "OK".
  std::string ToString() const;
  // The same status with "<context>: " in front of the message; OK stays OK. Keeps the fields.
  Status WithContext(std::string_view context) const;
  // The same status with `suffix` after the message; OK stays OK. Keeps the fields.
  Status WithSuffix(std::string_view suffix) const;

  // Where the error is, as data beside the message (which says it in words too), so that callers
  // need not parse text: the file, the record's global index in its dataset (or its input's
  // position in a conversion), and the byte offset in the file. Empty / nullopt when unknown.
  const std::string& path() const { return path_; }
  std::optional<std::uint64_t> record_index() const { return record_index_; }
  std::optional<std::uint64_t> byte_offset() const { return byte_offset_; }
  Remedy remedy() const { return remedy_; }
  // The same status with a field set (replacing an earlier value); OK stays OK.
  Status WithPath(std::string path) const;
  Status WithRecordIndex(std::uint64_t index) const;
  Status WithByteOffset(std::uint64_t offset) const;
  Status WithRemedy(Remedy remedy) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string path_;
  std::optional<std::uint64_t> record_index_;
  std::optional<std::uint64_t> byte_offset_;
  Remedy remedy_ = Remedy::kNone;
};

// Prints `status` to stderr, saying that the value of a Result holding it was asked for, and
// aborts: what Result::value() does on an error in every build, asserts on or off.
[[noreturn]] void DieOnValueOfError(const Status& status);

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "a Result built from a Status must carry an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok(). On an error it prints the error and aborts, in every build: reading the value
  // that is not there would be undefined behaviour (a crash far from the cause, or garbage).
  T& value() & {
    CheckHasValue();
    return *value_;
  }
  const T& value() const& {
    CheckHasValue();
    return *value_;
  }
  T&& value() && {
    CheckHasValue();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckHasValue() const {
    if (!value_.has_value()) [[unlikely]] {
      DieOnValueOfError(status_);
    }
  }

  std::optional<T> value_;
  Status status_;
};

}  // namespace packrec

#define PACKREC_CONCAT_INNER_(a, b) a##b
#define PACKREC_CONCAT_(a, b) PACKREC_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define PACKREC_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::packrec::Status packrec_status_ = (expr);        \
    if (!packrec_status_.ok()) return packrec_status_; \
  } while (false)

// `lhs = value of expr`, or returns the error of the Result from the enclosing function.
#define PACKREC_ASSIGN_OR_RETURN(lhs, expr) \
  PACKREC_ASSIGN_OR_RETURN_IMPL_(PACKREC_CONCAT_(packrec_result_, __LINE__), lhs, expr)
#define PACKREC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // PACKREC_STATUS_H_
