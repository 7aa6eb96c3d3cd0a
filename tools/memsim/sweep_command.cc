// memsim sweep: the cartesian product of configuration lists, simulated in parallel.
// memsim fit: the largest batch that fits a device. memsim advise: single changes ranked.
// memsim merge: the shard files of one sweep joined (tools/memsim/sweep_files.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>

#include "lib/util/atomic_file.h"
#include "lib/util/option_check.h"
#include "sim/advise.h"
#include "sim/report/sweep_report.h"
#include "sim/fit.h"
#include "sim/sweep.h"
#include "sim/options/options.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"
#include "tools/memsim/sweep_files.h"

namespace memsim::cli {
namespace {

struct SweepArgs {
  ConfigOptions config;
  int threads = 0;
  int64_t max_batch = 65536;
  std::string search = "batch";  ///< fit: the symbol searched
  bool json = false;
  bool csv = false;
  bool jsonl = false;
  std::string out;     ///< --out FILE (.csv or .jsonl): rows with their index, resumable
  bool resume = false;
  std::string shard;   ///< --shard K/N
};

constexpr size_t kMaxConfigurations = 1000000;             // a whole JSON document in memory
constexpr size_t kMaxStreamedConfigurations = size_t{1} << 48;  // rows streamed as they complete

Result<SweepSlice> ParseShard(const std::string& s) {
  SweepSlice slice;
  if (s.empty()) return slice;
  MEMSIM_ASSIGN_OR_RETURN(auto kn, ParseShardOption("--shard", s));
  slice.shard = static_cast<size_t>(kn.first);
  slice.shards = static_cast<size_t>(kn.second);
  return slice;
}

/// "\r12,345/40,000 (30 %)  2,310 configurations/s  ETA 0:12" on a terminal's stderr.
class Progress {
 public:
  Progress(size_t total, size_t start) : total_(total), start_(start), on_(::isatty(STDERR_FILENO) != 0) {}
  void Update(size_t done, bool last = false) {
    if (!on_) return;
    auto now = std::chrono::steady_clock::now();
    if (!last && now - shown_ < std::chrono::milliseconds(100)) return;
    shown_ = now;
    const double secs = std::chrono::duration<double>(now - t0_).count();
    const double rate = secs > 0 ? static_cast<double>(done - start_) / secs : 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
    std::fprintf(stderr, "\r%zu/%zu (%.0f %%)  %.0f configurations/s  ETA %d:%02d   ", done, total_,
                 total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate,
                 static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
    if (last) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  size_t total_, start_;
  bool on_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now(), shown_{};
};

/// The bytes of the graph file |path| (already loaded once, so readable and of bounded size).
std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Sweep(const SweepArgs& a, const CLI::App& cmd) {
  Graph g = LoadConfigGraph(a.config);
  SweepSpec spec = ValueOrFail(a.config.Spec());
  SweepSlice slice = ValueOrFail(ParseShard(a.shard));
  OkOrFail(CheckThreads(a.threads));
  if (a.resume && a.out.empty()) Fail(Status::InvalidArgument("--resume needs --out FILE"));
  if (!a.out.empty() && (a.json || a.csv || a.jsonl))
    Fail(Status::InvalidArgument("--out FILE picks the format by its extension (.csv or .jsonl): drop --json, --csv and --jsonl"));
  if (a.json && slice.shards > 1) Fail(Status::InvalidArgument("--shard writes rows (--out FILE, --csv or --jsonl), not one --json document"));
  const size_t n = ValueOrFail(spec.Count(a.json ? kMaxConfigurations : kMaxStreamedConfigurations));
  SweepRow first_error;
  bool any_ok = false, any = false;
  auto note = [&](const SweepRow& r) {
    if (!any) first_error = r;
    any = true;
    any_ok = any_ok || r.status.ok();
  };
  if (a.json) {  // one JSON document: every row in memory
    SweepTable table{g.name, &spec, {}};
    table.rows.reserve(n);
    OkOrFail(StreamSweep(g, spec, n, slice, a.threads, [&](size_t, const SweepRow& r) {
      note(r);
      table.rows.push_back(r);
      return Status::OK();
    }));
    if (any && !any_ok) Fail(first_error.status);
    OkOrFail(WriteStdout(ToJson(table).dump(2) + "\n"));
    return;
  }
  const SweepFormat f = !a.out.empty() ? ValueOrFail(FormatOfPath(a.out))
                        : a.csv        ? SweepFormat::kCsv
                        : a.jsonl      ? SweepFormat::kJsonl
                                       : SweepFormat::kText;
  const bool index = !a.out.empty() || slice.shards > 1;  // rows that can be resumed and merged
  std::optional<SweepFileWriter> file;
  if (!a.out.empty()) {
    const std::string options = a.config.Canonical(cmd);
    SweepMeta meta{g.name, n, SweepFingerprint(FileBytes(a.config.graph), options), slice.shard, slice.shards, options};
    file.emplace(ValueOrFail(SweepFileWriter::Open(a.out, meta, SweepHeaderLine(spec, f, index), a.resume)));
    slice.skip = file->rows_done();
  } else {
    OkOrFail(WriteStdout(SweepHeaderLine(spec, f, index)));
  }
  const size_t total = slice.Size(n);
  Progress progress(total, slice.skip);
  std::string pending;
  auto flush = [&]() -> Status {
    Status st = file ? file->Append(pending) : WriteStdout(pending);
    pending.clear();
    return st;
  };
  Status written;
  OkOrFail(StreamSweep(
      g, spec, n, slice, a.threads,
      [&](size_t i, const SweepRow& r) {
        note(r);
        pending += SweepRowLine(spec, i, r, f, index);
        return written;
      },
      [&](size_t done) {
        if (written.ok()) written = flush();  // every batch of rows, in order, as soon as it is complete
        progress.Update(done);
      }));
  OkOrFail(written);
  OkOrFail(flush());
  progress.Update(total, /*last=*/true);
  if (file) OkOrFail(file->Close());
  // A sweep where no configuration is valid is a usage error, as `run` would say.
  if (any && !any_ok) Fail(first_error.status);
}

void Merge(const std::string& out, const std::vector<std::string>& parts) { OkOrFail(MergeSweepFiles(out, parts)); }

void Fit(const SweepArgs& a) {
  Graph g = LoadConfigGraph(a.config);
  RunConfig base = ValueOrFail(a.config.Single("fit"));
  FitAnswer fit = ValueOrFail(FitWithProposals(g, base, a.search, a.max_batch, a.threads));
  FitReport report{g.name, base.device.gpu, base.alloc.capacity_bytes, a.max_batch, std::move(fit.fit),
                   std::move(fit.proposals)};
  OkOrFail(WriteStdout(a.json ? ToJson(report).dump(2) + "\n" : ToText(report)));
}

void AdviseCommand(const SweepArgs& a) {
  Graph g = LoadConfigGraph(a.config);
  RunConfig base = ValueOrFail(a.config.Single("advise"));
  AdviseReport report = ValueOrFail(Advise(g, base, a.threads, a.max_batch));
  OkOrFail(WriteStdout(a.json ? ToJson(report).dump(2) + "\n" : ToText(report)));
}

void AddCommon(CLI::App* cmd, SweepArgs* a, bool lists) {
  a->config.Bind(cmd, lists);
  cmd->add_flag("--json", a->json, "JSON output");
}

}  // namespace

void RegisterAdviseCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("advise", "which single change (in-place, expandable segments, batch, ...) saves the most memory");
  AddCommon(cmd, args.get(), false);
  cmd->add_option("--max-batch", args->max_batch, "upper end of the fit search")->capture_default_str();
  cmd->callback([args] { AdviseCommand(*args); });
}

void RegisterSweepCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "simulate every combination of the given options, in parallel");
  AddCommon(cmd, args.get(), true);
  cmd->add_flag("--csv", args->csv, "CSV output (bytes as integers)");
  cmd->add_flag("--jsonl", args->jsonl, "JSON Lines output: one object per configuration");
  cmd->add_option("--out", args->out,
                  "write the rows to FILE (.csv or .jsonl) as they complete, each with its configuration index");
  cmd->add_flag("--resume", args->resume,
                "continue the --out FILE of an interrupted run of the same sweep (rows already there are kept)");
  cmd->add_option("--shard", args->shard,
                  "run shard K of N (K/N): configurations K-1, K-1+N, K-1+2N, ...; join the parts with memsim merge");
  cmd->add_option("--threads", args->threads, "worker threads (0 = all cores); output does not depend on it");
  cmd->callback([args, cmd] { Sweep(*args, *cmd); });
}

void RegisterMergeCommand(CLI::App& app) {
  auto out = std::make_shared<std::string>();
  auto parts = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("merge", "join the --shard K/N files of one sweep into the file the whole sweep writes");
  cmd->add_option("OUT", *out, "merged file (.csv or .jsonl, as the parts)")->required();
  cmd->add_option("PARTS", *parts, "the shard files, one per shard, in any order")->required();
  cmd->callback([out, parts] { Merge(*out, *parts); });
}

void RegisterFitCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("fit", "the largest batch (or --search SYMBOL) that fits a device (--gpu or --capacity)");
  AddCommon(cmd, args.get(), false);
  cmd->add_option("--max-batch", args->max_batch, "upper end of the search")->capture_default_str();
  cmd->add_option("--search", args->search, "the symbol to maximize, e.g. seq (the other symbols as --batch/--set give them)")
      ->capture_default_str();
  cmd->callback([args] { Fit(*args); });
}

}  // namespace memsim::cli
