// ONNX → memsim graph (docs/onnx-import.md): maps an ONNX model's nodes to memsim ops, its
// weight initializers to parameters and buffers, appends the loss, and validates the result by
// parsing and binding it before returning. Pure functions; the only exceptions (protobuf, ONNX
// shape inference) are caught here.
#ifndef MEMSIM_LIB_ONNX_ONNX_IMPORT_H_
#define MEMSIM_LIB_ONNX_ONNX_IMPORT_H_

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/util/status.h"

namespace memsim {

struct OnnxImportOptions {
  std::string name;                      ///< graph name; empty = the ONNX graph's name or "model"
  std::string loss = "cross_entropy";    ///< cross_entropy, mse or none
  std::string batch_symbol = "batch";    ///< symbol for dim_params in the first dimension
  std::map<std::string, int64_t> sets;   ///< symbol defaults (--set sym=value); batch defaults to 32
  std::string provenance;                ///< empty = "imported from <file> by memsim import-onnx"
};

/// Converts serialized ONNX model bytes. |source| names the file in messages. Errors: a
/// malformed protobuf, every unsupported node at once (op type, name, index), or a graph that
/// memsim cannot bind.
Result<nlohmann::ordered_json> ImportOnnx(const std::string& bytes, const std::string& source,
                                          const OnnxImportOptions& opt);

/// Reads |path| and converts it.
Result<nlohmann::ordered_json> ImportOnnxFile(const std::string& path, const OnnxImportOptions& opt);

/// Graph-file text in the style of graphs/*.json: one top-level key per line, one input,
/// parameter, buffer or op per line.
std::string GraphJsonText(const nlohmann::ordered_json& g);

}  // namespace memsim

#endif  // MEMSIM_LIB_ONNX_ONNX_IMPORT_H_
