// The "optimizer" value of a graph file (lib/ir/optimizer_program.h; docs/graph-format.md):
// a recorded optimizer's steps as lines such as "alloc 1", "alloc 8B", "free prev t3".
#ifndef MEMSIM_LIB_IO_OPTIMIZER_JSON_H_
#define MEMSIM_LIB_IO_OPTIMIZER_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "lib/ir/optimizer_program.h"
#include "lib/util/status.h"

namespace memsim {

/// Parses and checks |v| (at JSON pointer |ptr| of |source|): every free names an object that
/// exists and is freed once; an object carried to the next parameter is also freed after the
/// last one. Errors name the file and the pointer.
Result<OptimizerProgram> ParseOptimizerProgram(const nlohmann::json& v, const std::string& source,
                                               const std::string& ptr);

}  // namespace memsim

#endif  // MEMSIM_LIB_IO_OPTIMIZER_JSON_H_
