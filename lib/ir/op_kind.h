// The op vocabulary of graph files (docs/graph-format.md). Each kind has one row of rules in
// lib/ops/ (shape inference and memory behaviour).
#ifndef MEMSIM_LIB_IR_OP_KIND_H_
#define MEMSIM_LIB_IR_OP_KIND_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace memsim {

// X(enumerator, graph-file name)
#define MEMSIM_OP_KINDS(X)                                                                  \
  X(kConv1d, "conv1d") X(kConv2d, "conv2d") X(kLinear, "linear") X(kMatmul, "matmul")       \
  X(kMm, "mm") X(kBmm, "bmm") X(kBaddbmm, "baddbmm") X(kEmbedding, "embedding")             \
  X(kRelu, "relu") X(kRelu6, "relu6") X(kLeakyRelu, "leaky_relu") X(kGelu, "gelu")          \
  X(kSilu, "silu") X(kSigmoid, "sigmoid") X(kTanh, "tanh") X(kHardswish, "hardswish")       \
  X(kHardsigmoid, "hardsigmoid") X(kSoftmax, "softmax") X(kLogSoftmax, "log_softmax")       \
  X(kDropout, "dropout") X(kBatchNorm, "batch_norm") X(kLayerNorm, "layer_norm")            \
  X(kGroupNorm, "group_norm") X(kRmsNorm, "rms_norm") X(kMaxPool2d, "max_pool2d")           \
  X(kAvgPool2d, "avg_pool2d") X(kAdaptiveAvgPool2d, "adaptive_avg_pool2d")                  \
  X(kConv3d, "conv3d") X(kMaxPool3d, "max_pool3d") X(kAvgPool3d, "avg_pool3d")             \
  X(kAdaptiveAvgPool3d, "adaptive_avg_pool3d")                                               \
  X(kConvTranspose1d, "conv_transpose1d") X(kConvTranspose2d, "conv_transpose2d")           \
  X(kConvTranspose3d, "conv_transpose3d")                                                   \
  X(kAdd, "add") X(kSub, "sub") X(kMul, "mul") X(kDiv, "div") X(kCat, "cat")                \
  X(kStack, "stack") X(kSplit, "split") X(kChunk, "chunk") X(kSlice, "slice")               \
  X(kSelect, "select") X(kIndexSelect, "index_select") X(kView, "view")                     \
  X(kReshape, "reshape") X(kFlatten, "flatten") X(kTranspose, "transpose")                  \
  X(kPermute, "permute") X(kExpand, "expand") X(kUnsqueeze, "unsqueeze")                    \
  X(kSqueeze, "squeeze") X(kContiguous, "contiguous") X(kMean, "mean") X(kSum, "sum")       \
  X(kSdpa, "scaled_dot_product_attention") X(kCrossEntropy, "cross_entropy")                \
  X(kNllLoss, "nll_loss") X(kMseLoss, "mse_loss") X(kArange, "arange")             \
  X(kMaskedFill, "masked_fill") X(kStochasticDepth, "stochastic_depth")               \
  X(kEq, "eq") X(kNe, "ne") X(kLt, "lt") X(kLe, "le") X(kGt, "gt") X(kGe, "ge")             \
  X(kWhere, "where") X(kExp, "exp") X(kLog, "log") X(kPow, "pow") X(kRsqrt, "rsqrt")        \
  X(kSqrt, "sqrt") X(kNeg, "neg") X(kMax, "max") X(kMin, "min") X(kAmax, "amax")            \
  X(kLogsumexp, "logsumexp") X(kGather, "gather") X(kScatter, "scatter")                    \
  X(kIndex, "index") X(kUnbind, "unbind") X(kTril, "tril") X(kTriu, "triu")                 \
  X(kCumsum, "cumsum") X(kTopk, "topk") X(kRepeatInterleave, "repeat_interleave")          \
  X(kElu, "elu") X(kSoftplus, "softplus") X(kMish, "mish") X(kHardtanh, "hardtanh")         \
  X(kClamp, "clamp") X(kAbs, "abs") X(kLogSigmoid, "log_sigmoid") X(kGlu, "glu")            \
  X(kHardshrink, "hardshrink") X(kSoftshrink, "softshrink") X(kPrelu, "prelu")              \
  X(kPad, "pad") X(kUpsample, "upsample") X(kRoll, "roll") X(kRepeat, "repeat")             \
  X(kToDtype, "to_dtype") X(kDetach, "detach") X(kCos, "cos") X(kSin, "sin")               \
  X(kFull, "full") X(kVectorNorm, "vector_norm") X(kRrelu, "rrelu")                                           \
  X(kBceWithLogits, "binary_cross_entropy_with_logits") X(kSmoothL1Loss, "smooth_l1_loss")  \
  X(kHuberLoss, "huber_loss") X(kBinaryCrossEntropy, "binary_cross_entropy") X(kLinear4bit, "linear_4bit") X(kLinear8bit, "linear_8bit") X(kFp8Linear, "fp8_linear") \
  X(kAllReduce, "all_reduce") X(kGradAllReduce, "grad_all_reduce") X(kAllGather, "all_gather")             \
  X(kReduceScatter, "reduce_scatter") X(kTpEmbedding, "tp_embedding") X(kTpCrossEntropy, "tp_cross_entropy") X(kCompiled, "compiled") X(kViewWrite, "view_write")   \
  X(kIm2col, "im2col") X(kCol2im, "col2im") X(kUnfold, "unfold") X(kAffineGrid, "affine_grid")                     \
  X(kGridSample, "grid_sample") X(kRecorded, "recorded") X(kBincount, "bincount") X(kSort, "sort")      \
  X(kFloorDivide, "floor_divide") X(kEpDispatch, "ep_dispatch") X(kEpCombine, "ep_combine")     \
  X(kHistc, "histc") X(kGroupedMm, "grouped_mm")                                                   \
  X(kAdaptiveMaxPool2d, "adaptive_max_pool2d") X(kAdaptiveMaxPool3d, "adaptive_max_pool3d")             \
  X(kMkldnnRnnLayer, "mkldnn_rnn_layer") X(kSoftMarginLoss, "soft_margin_loss") \
  X(kEmbeddingBag, "embedding_bag") X(kMaxUnpool2d, "max_unpool2d") X(kMaxUnpool3d, "max_unpool3d") \
  X(kFractionalMaxPool2d, "fractional_max_pool2d") X(kFractionalMaxPool3d, "fractional_max_pool3d") \
  X(kSign, "sign") X(kThreshold, "threshold") X(kMaximum, "maximum") X(kMinimum, "minimum")       \
  X(kVar, "var") X(kFlip, "flip") X(kPixelShuffle, "pixel_shuffle") X(kPixelUnshuffle, "pixel_unshuffle") \
  X(kMultiMarginLoss, "multi_margin_loss") X(kMultilabelMarginLoss, "multilabel_margin_loss") X(kBilinear, "bilinear")       \
  X(kChannelShuffle, "channel_shuffle") X(kCrossMapLrn2d, "cross_map_lrn2d") X(kXlogy, "xlogy") X(kAny, "any")     \
  X(kBitwiseAnd, "bitwise_and") X(kBitwiseNot, "bitwise_not") X(kBitwiseOr, "bitwise_or") X(kLog2, "log2") \
  X(kRound, "round") X(kFloor, "floor") X(kCeil, "ceil") X(kTrunc, "trunc")

enum class OpKind : uint8_t {
#define MEMSIM_OP_ENUM_(e, n) e,
  MEMSIM_OP_KINDS(MEMSIM_OP_ENUM_)
#undef MEMSIM_OP_ENUM_
};

/// How many kinds the vocabulary has (derived from the list itself).
inline constexpr size_t kNumOpKinds = 0
#define MEMSIM_OP_COUNT_(e, n) + 1
    MEMSIM_OP_KINDS(MEMSIM_OP_COUNT_);
#undef MEMSIM_OP_COUNT_

std::string_view OpKindName(OpKind k);
std::optional<OpKind> ParseOpKind(std::string_view name);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_OP_KIND_H_
