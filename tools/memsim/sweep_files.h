// Sweep files: the rows of a sweep written as they complete (CSV or JSONL, picked by the file's
// extension), resumable after a kill at any moment, and shards of one sweep merged into the file
// the unsharded sweep writes (Note [Sweep files] in docs/sweeps.md).
//
// A file is a metadata line (which sweep, how many configurations, which shard), the CSV column
// header, then one line per configuration in increasing index order, each starting with its
// index. Rows are appended a batch at a time with one write(2) each; a kill can only leave a
// partial last line, which --resume drops before it continues after the last complete row.
#ifndef MEMSIM_TOOLS_MEMSIM_SWEEP_FILES_H_
#define MEMSIM_TOOLS_MEMSIM_SWEEP_FILES_H_

#include <string>
#include <vector>

#include "lib/util/status.h"
#include "sim/report/sweep_report.h"

namespace memsim::cli {

/// CSV for "*.csv", JSONL for "*.jsonl"; error naming |path| otherwise.
Result<SweepFormat> FormatOfPath(const std::string& path);

/// An open sweep file, appended to row by row.
class SweepFileWriter {
 public:
  /// Opens |path| for the rows of |meta|. |resume|: keep the complete rows of an existing file
  /// of the same sweep and shard (rows_done() of them); else start it afresh.
  static Result<SweepFileWriter> Open(const std::string& path, const SweepMeta& meta, const std::string& header,
                                      bool resume);
  SweepFileWriter(SweepFileWriter&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), done_(o.done_) { o.fd_ = -1; }
  SweepFileWriter(const SweepFileWriter&) = delete;
  ~SweepFileWriter();

  size_t rows_done() const { return done_; }
  /// Appends |lines| (complete lines) with one write.
  Status Append(const std::string& lines);
  /// Flushes to the disk and closes.
  Status Close();

 private:
  SweepFileWriter(std::string path, int fd, size_t done) : path_(std::move(path)), fd_(fd), done_(done) {}
  std::string path_;
  int fd_ = -1;
  size_t done_ = 0;
};

/// `memsim merge`: joins the shard files |parts| of one sweep into |out| (the bytes the unsharded
/// sweep writes). Error: parts of different sweeps or formats, a missing or duplicated shard or
/// configuration.
Status MergeSweepFiles(const std::string& out, const std::vector<std::string>& parts);

}  // namespace memsim::cli

#endif  // MEMSIM_TOOLS_MEMSIM_SWEEP_FILES_H_
