// memsim import-onnx: convert an ONNX model (forward pass) into a memsim graph file with the loss
// appended; the conversion lives in lib/onnx/ (docs/onnx-import.md).
#include <memory>

#include "lib/onnx/onnx_import.h"
#include "lib/util/atomic_file.h"
#include "lib/util/option_check.h"
#include "lib/util/text_limits.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct ImportArgs {
  std::string model;
  std::string out = "-";
  OnnxImportOptions opt;
  std::vector<std::string> sets;
};

void Import(ImportArgs& a) {
  for (const std::string& s : a.sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      Fail(Status::InvalidArgument("--set \"" + Excerpt(s) + "\": expected SYMBOL=non-negative integer"));
    a.opt.sets[s.substr(0, eq)] = ValueOrFail(ParseIntOption("--set " + Excerpt(s.substr(0, eq)), s.substr(eq + 1), 0, int64_t{1} << 40));
  }
  auto g = ImportOnnxFile(a.model, a.opt);
  if (!g.ok()) Fail(g.status());
  const std::string text = GraphJsonText(*g);
  OkOrFail(a.out == "-" ? WriteStdout(text) : WriteFileAtomic(a.out, text));
}

}  // namespace

void RegisterImportOnnxCommand(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand("import-onnx", "convert an ONNX model into a memsim graph file (JSON)");
  cmd->add_option("model", args->model, "ONNX model file (.onnx)")->required();
  cmd->add_option("-o,--output", args->out, "graph file to write (- = stdout)")->capture_default_str();
  cmd->add_option("--name", args->opt.name, "graph name (default: the ONNX graph's name)");
  cmd->add_option("--loss", args->opt.loss, "loss appended to the model output")
      ->check(CLI::IsMember({"cross_entropy", "mse", "none"}))
      ->capture_default_str();
  cmd->add_option("--batch-symbol", args->opt.batch_symbol, "symbol for named first dimensions of the inputs")
      ->capture_default_str();
  cmd->add_option("--set", args->sets, "default value of a symbol: --set batch=64 (repeatable)");
  cmd->callback([args] { Import(*args); });
}

}  // namespace memsim::cli
