#include "tools/memsim/sweep_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "lib/util/atomic_file.h"
#include "lib/util/text_limits.h"

namespace memsim::cli {
namespace {

Status ErrnoError(const std::string& what, const std::string& path) {
  return Status::InvalidArgument(path + ": " + what + ": " + std::strerror(errno));
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The configuration index a row line starts with ("12,..." or {"index":12,...}); -1 if none.
int64_t RowIndex(const std::string& line, SweepFormat f) {
  size_t pos = 0;
  if (f == SweepFormat::kJsonl) {
    static const std::string kPrefix = "{\"index\":";
    if (line.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
    pos = kPrefix.size();
  }
  int64_t v = 0;
  size_t start = pos;
  while (pos < line.size() && line[pos] >= '0' && line[pos] <= '9' && pos - start < 18) v = v * 10 + (line[pos++] - '0');
  if (pos == start || pos >= line.size() || line[pos] != ',') return -1;
  return v;
}

/// The number of fields of CSV |line| (RFC 4180: quoted fields may hold commas and doubled
/// quotes); -1 when a quote is left open or stray.
int64_t CsvFieldCount(const std::string& line) {
  int64_t fields = 1;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c != '"') continue;
      if (i + 1 < line.size() && line[i + 1] == '"') ++i;
      else quoted = false;
    } else if (c == '"') {
      if (i > 0 && line[i - 1] != ',') return -1;
      quoted = true;
    } else if (c == ',') {
      ++fields;
    }
  }
  return quoted ? -1 : fields;
}

/// Whether |line| is a whole row as a sweep writes it: a CSV row with the header's |columns|
/// fields (an invalid configuration's: its axes and the error), or a JSON object (JSONL). A row
/// that is not is a file changed by something else.
bool WholeRow(const std::string& line, SweepFormat f, int64_t columns) {
  if (f == SweepFormat::kCsv) {
    const int64_t n = CsvFieldCount(line);
    if (n == columns) return true;
    const size_t last = line.rfind(",\"error: ");
    return n > 0 && n < columns && (last != std::string::npos || line.find(",error: ") != std::string::npos);
  }
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("index");
}

/// Takes an advisory lock on the open sweep file |fd| for this process's lifetime, so a second
/// `memsim sweep --out` (or --resume) of the same file fails at once instead of interleaving rows.
Status LockForWriting(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Status::OK();
  if (errno == EWOULDBLOCK)
    return Status::InvalidArgument(path + ": another memsim process is writing this file; wait for it or give "
                                          "another --out");
  if (errno == ENOLCK || errno == EINVAL || errno == ENOTSUP) return Status::OK();  // a file system without locks
  return ErrnoError("cannot lock", path);
}

/// Writes all of |data| to |fd|.
Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoError("cannot write", path);
    off += static_cast<size_t>(w);
  }
  return Status::OK();
}

/// Reads |path| line by line; a last line without its newline is reported as partial.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : in_(path, std::ios::binary) {}
  bool ok() const { return static_cast<bool>(in_); }
  /// false at the end; |complete| false for a last line cut short.
  bool Next(std::string* line, bool* complete) {
    if (!std::getline(in_, *line)) return false;
    *complete = !in_.eof();
    offset_ += line->size() + (*complete ? 1 : 0);
    return true;
  }
  uint64_t offset() const { return offset_; }

 private:
  std::ifstream in_;
  uint64_t offset_ = 0;
};

}  // namespace

Result<SweepFormat> FormatOfPath(const std::string& path) {
  if (EndsWith(path, ".csv")) return SweepFormat::kCsv;
  if (EndsWith(path, ".jsonl")) return SweepFormat::kJsonl;
  return Status::InvalidArgument(path + ": the file name must end in .csv or .jsonl (the format of the rows)");
}

Result<SweepFileWriter> SweepFileWriter::Open(const std::string& path, const SweepMeta& meta, const std::string& header,
                                              bool resume) {
  MEMSIM_ASSIGN_OR_RETURN(SweepFormat f, FormatOfPath(path));
  const std::string meta_line = SweepMetaLine(meta, f);
  struct stat st;
  MEMSIM_ASSIGN_OR_RETURN(const std::string target, OutputTarget(path));
  int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot open for writing", path);
  SweepFileWriter w(path, fd, 0);  // closes |fd| on every error below
  MEMSIM_RETURN_IF_ERROR(LockForWriting(fd, path));  // before reading: the rows are ours alone
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (resume && regular && st.st_size > 0) {
    LineReader in(target);
    if (!in.ok()) return ErrnoError("cannot read", path);
    std::string line;
    bool complete = false;
    uint64_t keep = 0;  // bytes of the file that stay: the metadata, the header, complete rows
    const int64_t header_columns = header.empty() ? 0 : CsvFieldCount(header.substr(0, header.size() - 1));
    size_t done = 0;
    bool started = in.Next(&line, &complete) && complete;
    if (started) {
      if (line + "\n" != meta_line) {
        auto theirs = ParseSweepMetaLine(line, f);
        const std::string why = theirs.ok() ? SweepMetaMismatch(*theirs, meta) : theirs.status().message();
        return Status::InvalidArgument(path + " holds the rows of another sweep or shard (" +
                                       (why.empty() ? Excerpt(line) : why) + "); remove it or run without --resume");
      }
      if (!header.empty()) {
        started = in.Next(&line, &complete) && complete;
        if (started && line + "\n" != header)
          return Status::InvalidArgument(path + ": its column header differs from this sweep's");
      }
    }
    if (started) {
      keep = in.offset();
      while (in.Next(&line, &complete) && complete) {
        const int64_t want = static_cast<int64_t>(meta.shard - 1 + done * meta.shards);
        if (RowIndex(line, f) != want || !WholeRow(line, f, header_columns))
          return Status::InvalidArgument(path + ": line " + std::to_string(done + (header.empty() ? 2 : 3)) +
                                         " is not the row of configuration " + std::to_string(want) +
                                         " (the file was changed); remove it or run without --resume");
        ++done;
        keep = in.offset();
      }
    }
    if (started) {
      if (::ftruncate(fd, static_cast<off_t>(keep)) != 0) return ErrnoError("cannot drop the partial last row", path);
      w.done_ = done;
      return w;
    }
  }
  if (regular && ::ftruncate(fd, 0) != 0) return ErrnoError("cannot truncate", path);
  MEMSIM_RETURN_IF_ERROR(w.Append(meta_line + header));
  return w;
}

SweepFileWriter::~SweepFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status SweepFileWriter::Append(const std::string& lines) { return WriteAll(fd_, lines, path_); }

Status SweepFileWriter::Close() {
  if (fd_ < 0) return Status::OK();
  int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 && errno != EINVAL) {
    ::close(fd);
    return ErrnoError("cannot sync", path_);
  }
  if (::close(fd) != 0) return ErrnoError("cannot close", path_);
  return Status::OK();
}

Status MergeSweepFiles(const std::string& out, const std::vector<std::string>& parts) {
  MEMSIM_ASSIGN_OR_RETURN(SweepFormat f, FormatOfPath(out));
  if (parts.empty()) return Status::InvalidArgument("merge: no part files given");
  struct Part {
    std::string path;
    std::unique_ptr<LineReader> in;
    SweepMeta meta;
  };
  std::vector<Part> all;
  std::string header;
  for (const std::string& p : parts) {
    MEMSIM_ASSIGN_OR_RETURN(SweepFormat pf, FormatOfPath(p));
    if (pf != f) return Status::InvalidArgument(p + ": not the format of " + out);
    Part part{p, std::make_unique<LineReader>(p), {}};
    if (!part.in->ok()) return ErrnoError("cannot read", p);
    std::string line;
    bool complete = false;
    if (!part.in->Next(&line, &complete) || !complete) return Status::InvalidArgument(p + ": empty or cut short");
    auto meta = ParseSweepMetaLine(line, f);
    if (!meta.ok()) return Status::InvalidArgument(p + ": " + meta.status().message());
    part.meta = *meta;
    if (f == SweepFormat::kCsv) {
      if (!part.in->Next(&line, &complete) || !complete) return Status::InvalidArgument(p + ": no column header");
      if (!header.empty() && line + "\n" != header) return Status::InvalidArgument(p + ": its columns differ from " + all[0].path + "'s");
      header = line + "\n";
    }
    if (!all.empty()) {
      const SweepMeta& a = all[0].meta;
      if (a.model != part.meta.model || a.configurations != part.meta.configurations || a.fingerprint != part.meta.fingerprint) {
        SweepMeta as_first = part.meta;  // compared as a shard of the first part's sweep
        as_first.shard = a.shard;
        as_first.shards = part.meta.shards;
        return Status::InvalidArgument(p + " is a part of another sweep than " + all[0].path + " (" +
                                       SweepMetaMismatch(part.meta, SweepMeta{a.model, a.configurations, a.fingerprint,
                                                                              part.meta.shard, part.meta.shards, a.options}) +
                                       ")");
      }
      if (a.shards != part.meta.shards)
        return Status::InvalidArgument(p + " is a shard of " + std::to_string(part.meta.shards) + ", " + all[0].path +
                                       " of " + std::to_string(a.shards));
    }
    all.push_back(std::move(part));
  }
  const size_t shards = all[0].meta.shards, n = all[0].meta.configurations;
  std::vector<Part*> by_shard(shards, nullptr);
  for (Part& p : all) {
    Part*& slot = by_shard[p.meta.shard - 1];
    if (slot) return Status::InvalidArgument("shard " + std::to_string(p.meta.shard) + "/" + std::to_string(shards) +
                                             " given twice (" + slot->path + " and " + p.path + ")");
    slot = &p;
  }
  for (size_t k = 0; k < shards && k < std::max<size_t>(n, 1); ++k)
    if (!by_shard[k]) return Status::InvalidArgument("shard " + std::to_string(k + 1) + "/" + std::to_string(shards) + " is missing");
  const int64_t columns = header.empty() ? 0 : CsvFieldCount(header.substr(0, header.size() - 1));
  SweepMeta merged = all[0].meta;
  merged.shard = merged.shards = 1;
  MEMSIM_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open(out));
  MEMSIM_RETURN_IF_ERROR(w.Write(SweepMetaLine(merged, f) + header));
  std::string line;
  bool complete = false;
  for (size_t i = 0; i < n; ++i) {
    Part& p = *by_shard[i % shards];
    if (!p.in->Next(&line, &complete) || !complete)
      return Status::InvalidArgument("configuration " + std::to_string(i) + " is missing (" + p.path + " ends before it)");
    const int64_t got = RowIndex(line, f);
    if (got < 0 || !WholeRow(line, f, columns))
      return Status::InvalidArgument(p.path + ": a row that is not one a sweep writes (configuration " +
                                     std::to_string(i) + "; the file was changed)");
    if (static_cast<size_t>(got) < i) return Status::InvalidArgument("configuration " + std::to_string(got) + " is duplicated in " + p.path);
    if (static_cast<size_t>(got) != i)
      return Status::InvalidArgument("configuration " + std::to_string(i) + " is missing from " + p.path);
    line += '\n';
    MEMSIM_RETURN_IF_ERROR(w.Write(line));
  }
  for (Part& p : all)
    if (p.in->Next(&line, &complete)) {
      const int64_t got = RowIndex(line, f);
      return Status::InvalidArgument(p.path + ": " +
                                     (got >= 0 && static_cast<size_t>(got) < n ? "configuration " + std::to_string(got) + " is duplicated"
                                                                               : std::string("rows beyond the sweep's configurations")));
    }
  return w.Commit();
}

}  // namespace memsim::cli
