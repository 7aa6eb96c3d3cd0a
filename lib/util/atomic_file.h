// Output files that are complete or absent: AtomicFileWriter writes to a temporary file in the
// destination's directory and renames it over the destination only on Commit(), after checking
// every write, the flush and the close; a write error (full disk, closed pipe) is a Status, never
// a silent exit 0. WriteStdout does the same checks for standard output. Not thread-safe.
//
//   MEMSIM_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open("timeline.json"));
//   MEMSIM_RETURN_IF_ERROR(w.Write(row));   // stream rows; nothing is held in memory
//   MEMSIM_RETURN_IF_ERROR(w.Commit());     // else the destructor removes the temporary
#ifndef MEMSIM_LIB_UTIL_ATOMIC_FILE_H_
#define MEMSIM_LIB_UTIL_ATOMIC_FILE_H_

#include <cstdio>
#include <string>
#include <string_view>

#include "lib/util/status.h"

namespace memsim {

/// The file to write for the output path |path|, by the one rule every output follows (merge,
/// --timeline, --events, sweep --out, plan --html; Note [Output destinations]): a symbolic link
/// is followed (the file it names is replaced, the link kept), a FIFO or device, or a path under
/// /dev or /proc (/dev/stdout), is written in place, a directory is refused; a missing file is
/// created.
Result<std::string> OutputTarget(const std::string& path);

class AtomicFileWriter {
 public:
  /// Creates "<target>.tmp-<pid>-<n>" next to OutputTarget(|path|), or writes a FIFO or device
  /// in place. Error: the directory is not writable, |path| is a directory.
  static Result<AtomicFileWriter> Open(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  /// Removes the temporary file unless Commit() succeeded.
  ~AtomicFileWriter();

  /// Appends |data|; the first failure is remembered and returned by every later call.
  Status Write(std::string_view data);
  /// Flushes, syncs and closes the temporary file, then renames it to the destination.
  Status Commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  AtomicFileWriter(std::string path, std::string temp, std::FILE* f, std::string target = "")
      : path_(std::move(path)), temp_(std::move(temp)), target_(std::move(target)), f_(f) {}
  Status Fail(const std::string& what);
  void Abandon();

  std::string path_;
  std::string temp_;    ///< empty: written in place (a FIFO or device)
  std::string target_;  ///< what the temporary is renamed to: |path_| with its symlinks followed
  std::FILE* f_ = nullptr;
  Status error_;
};

/// Writes |content| to |path| through an AtomicFileWriter.
Status WriteFileAtomic(const std::string& path, std::string_view content);

/// Writes |content| to |stream| (stdout by default) and flushes it; an error names
/// "standard output" and the errno text (ENOSPC, EPIPE ...).
Status WriteStdout(std::string_view content, std::FILE* stream = stdout);

}  // namespace memsim

#endif  // MEMSIM_LIB_UTIL_ATOMIC_FILE_H_
