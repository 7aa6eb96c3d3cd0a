// memsim: how much GPU memory one training step needs, when the peak happens and what is
// alive then. Subcommands are registered from commands.h; all logic lives in lib/ and sim/.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "lib/util/check.h"
#include "sim/options/config_file.h"
#include "sim/options/parse_error.h"
#include "sim/version.h"
#include "tools/memsim/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"memsim: simulate the GPU memory of one training step"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("memsim ") + memsim::kMemsimVersion);
  memsim::cli::RegisterRunCommand(app);
  memsim::cli::RegisterSummaryCommand(app);
  memsim::cli::RegisterSweepCommand(app);
  memsim::cli::RegisterFitCommand(app);
  memsim::cli::RegisterAdviseCommand(app);
  memsim::cli::RegisterPlanCommand(app);
  memsim::cli::RegisterMergeCommand(app);
  memsim::cli::RegisterReplayCommand(app);
#ifdef MEMSIM_HAVE_ONNX
  memsim::cli::RegisterImportOnnxCommand(app);
#endif
  memsim::cli::GuardIntegerText(&app);
  // --config FILE: a DeepSpeed / Hugging Face / torchtitan config, as the options it means.
  std::vector<std::string> notes;
  memsim::Result<std::vector<std::string>> args =
      memsim::cli::ExpandConfigFiles(std::vector<std::string>(argv + 1, argv + argc), &notes);
  if (!args.ok()) {
    std::fprintf(stderr, "memsim: %s\n", args.status().message().c_str());
    return 2;
  }
  for (const std::string& n : notes) std::fprintf(stderr, "memsim: %s\n", n.c_str());
  std::vector<std::string> reversed(args->rbegin(), args->rend());  // CLI11 takes the vector reversed
  try {
    app.parse(reversed);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command that failed has said why
  } catch (const CLI::ParseError& e) {
    // Usage errors are one line naming the fix, exit 2, like other bad input.
    std::fprintf(stderr, "memsim: %s\n", memsim::cli::ParseErrorMessage(app, e).c_str());
    return 2;
  } catch (const memsim::InternalError& e) {  // a bug in memsim, not bad input: its own exit code
    std::fprintf(stderr, "memsim: %s\n", e.what());
    return memsim::kInternalErrorExit;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "memsim: out of host memory\n");
    return memsim::kInternalErrorExit;
  } catch (const std::exception& e) {  // input should have been refused with a message before this
    std::fprintf(stderr, "memsim: internal error: %s (a bug in memsim: please report it with the command)\n", e.what());
    return memsim::kInternalErrorExit;
  }
  return 0;
}
