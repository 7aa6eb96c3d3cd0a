// `memsim replay FILE`: replays a real PyTorch memory snapshot through the allocator model.
#include "tools/memsim/commands.h"

namespace memsim::cli {

void RegisterReplayCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("replay", "replay a PyTorch memory snapshot (work in progress)");
  (void)cmd;
}

}  // namespace memsim::cli
