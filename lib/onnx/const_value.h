// Compile-time values of an ONNX graph for the importer: small initializers, Constant nodes and
// the Shape/Gather/Concat/… chains torch.onnx emits to compute reshape sizes. Integers are
// symbolic (coeff × Π symbols), so a batch dimension read by Shape stays the symbol `batch`.
// Pure value types; no ONNX state is kept.
#ifndef MEMSIM_LIB_ONNX_CONST_VALUE_H_
#define MEMSIM_LIB_ONNX_CONST_VALUE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "lib/util/status.h"

namespace memsim::onnx_import {

/// coeff × Π syms (syms sorted, may repeat). A plain integer has no symbols.
struct SymInt {
  int64_t coeff = 0;
  std::vector<std::string> syms;

  static SymInt Const(int64_t v) { return SymInt{v, {}}; }
  bool is_const() const { return syms.empty(); }
  bool operator==(const SymInt& o) const { return coeff == o.coeff && syms == o.syms; }
  /// JSON as the graph format writes sizes: 12, "batch", "batch*12".
  nlohmann::ordered_json ToJson() const;
  std::string ToString() const;
};

std::optional<SymInt> Mul(const SymInt& a, const SymInt& b);  ///< nullopt on overflow
/// a / b when exact (b's symbols divide a's and the coefficient divides), else nullopt.
std::optional<SymInt> Div(const SymInt& a, const SymInt& b);
/// a ± b when both have the same symbols, else nullopt.
std::optional<SymInt> AddSub(const SymInt& a, const SymInt& b, bool sub);

/// A small constant tensor: integers (possibly symbolic) or floating-point numbers.
struct ConstValue {
  int32_t elem_type = 0;          ///< onnx::TensorProto_DataType
  std::vector<int64_t> shape;
  bool is_float = false;
  std::vector<SymInt> ints;       ///< when !is_float
  std::vector<double> floats;     ///< when is_float

  size_t numel() const { return is_float ? floats.size() : ints.size(); }
  bool is_scalar_like() const { return numel() == 1; }
  /// The single element as a double (symbolic integers → nullopt).
  std::optional<double> Scalar() const;
  /// All elements as plain integers, or nullopt if one is symbolic or the value is float.
  std::optional<std::vector<int64_t>> ConstInts() const;
};

/// Reads |t| when it holds at most |max_elems| elements stored inline (raw_data or typed
/// fields). Returns nullopt for larger tensors, external data and unsupported element types.
std::optional<ConstValue> ReadTensor(const onnx::TensorProto& t, size_t max_elems);

/// The number of elements of a tensor of |dims|.
int64_t NumElements(const std::vector<int64_t>& dims);

/// memsim dtype name of an ONNX element type ("float32", …), or nullopt if memsim has none.
std::optional<std::string> DtypeName(int32_t elem_type);

}  // namespace memsim::onnx_import

#endif  // MEMSIM_LIB_ONNX_CONST_VALUE_H_
