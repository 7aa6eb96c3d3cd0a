// libFuzzer target: the ONNX importer (protobuf parsing, model validation, shape inference,
// node rules, and the graph check of the result).
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  memsim::OnnxImportOptions opt;
  (void)memsim::ImportOnnx(bytes, "fuzz.onnx", opt);
  return 0;
}
