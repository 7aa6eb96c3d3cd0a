// Validation of an ONNX model before anything interprets it: ONNX's own shape inference and
// memsim's node rules assume well-formed attributes and tensors (a Conv with strides [0, 0]
// divides by zero inside libonnx), so every value they compute with is checked here first.
#ifndef MEMSIM_LIB_ONNX_MODEL_CHECK_H_
#define MEMSIM_LIB_ONNX_MODEL_CHECK_H_

#include <onnx/onnx_pb.h>

#include <string>

#include "lib/util/status.h"

namespace memsim::onnx_import {

/// Largest dimension or element count accepted in a model (the graph reader's limit).
inline constexpr int64_t kMaxOnnxDim = int64_t{1} << 40;

/// Checks |model| (|source| names it in messages): node and tensor counts, every initializer's
/// and Constant's dims and data size, input and output dims, and the attributes shape inference
/// divides or indexes by (strides, dilations, kernel_shape, pads, group, perm, axes ...).
/// Errors are InvalidArgument naming the node (index, op type, name) and the attribute.
Status CheckOnnxModel(const onnx::ModelProto& model, const std::string& source);

}  // namespace memsim::onnx_import

#endif  // MEMSIM_LIB_ONNX_MODEL_CHECK_H_
