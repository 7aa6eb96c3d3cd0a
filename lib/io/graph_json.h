// Reading and writing graph files (docs/graph-format.md). The nlohmann boundary: JSON exceptions
// are caught here and become a Status naming the file and the JSON pointer of the bad value.
#ifndef MEMSIM_LIB_IO_GRAPH_JSON_H_
#define MEMSIM_LIB_IO_GRAPH_JSON_H_

#include <string>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

/// Parses graph-file text. |source| names the file in messages ("graphs/mlp.json").
/// The result is validated: names unique and defined, op kinds and dtypes known, dimensions
/// non-negative and in range, no cycle; ops are in execution order.
Result<Graph> ParseGraph(const std::string& text, const std::string& source);

/// Reads and parses the file at |path|.
Result<Graph> LoadGraph(const std::string& path);

}  // namespace memsim

#endif  // MEMSIM_LIB_IO_GRAPH_JSON_H_
