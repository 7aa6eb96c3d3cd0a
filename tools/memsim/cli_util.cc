#include "tools/memsim/cli_util.h"

#include <cstdio>
#include <cstdlib>

#include "lib/io/graph_json.h"
#include "lib/util/text_limits.h"

namespace memsim::cli {

void Fail(const Status& s, int code) {
  // One line of bounded length whatever the message quotes (Note [Error messages]).
  std::fprintf(stderr, "memsim: %s\n", EscapeControl(Excerpt(s.message(), 1000)).c_str());
  std::fflush(stdout);
  std::exit(code);
}

Graph LoadOrFail(const std::string& path) {
  auto g = LoadGraph(path);
  if (!g.ok()) Fail(g.status());
  return std::move(g).value();
}

Graph LoadConfigGraph(const ConfigOptions& options) {
  Graph g = LoadOrFail(options.graph);
  return ValueOrFail(options.Adapt(std::move(g)));
}

}  // namespace memsim::cli
