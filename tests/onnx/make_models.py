"""Writes the tiny ONNX models tests/onnx/onnx_import_test.cc imports (onnx.helper, no torch).

Usage: /usr/bin/python3 tests/onnx/make_models.py OUT_DIR
Generated at test time: no ONNX binaries are committed.  Each model has input "x" with a
symbolic first dimension "N" (so the importer must turn it into `batch`).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def init(name, shape, dtype=np.float32, value=None):
    a = np.zeros(shape, dtype=dtype) if value is None else np.array(value, dtype=dtype)
    return numpy_helper.from_array(a, name)


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name="/" + name + "/Constant",
                            value=numpy_helper.from_array(np.array(value, dtype=dtype)))


def save(out, name, nodes, inits, in_shape, out_shape=None, extra_inputs=(), opset=OPSET, out_type=TensorProto.FLOAT):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)
    y = helper.make_tensor_value_info("y", out_type, out_shape)
    g = helper.make_graph(nodes, name, [x, *extra_inputs], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, os.path.join(out, name + ".onnx"))


def main(out):
    os.makedirs(out, exist_ok=True)
    N = "N"
    # CNN: Conv(+bias) → BN → Relu → MaxPool → Conv(group, dilation) → AveragePool → GlobalAveragePool → Flatten → Gemm.
    save(out, "cnn", [
        helper.make_node("Conv", ["x", "c1.weight", "c1.bias"], ["c1"], name="/c1/Conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[2, 2], dilations=[1, 1], group=1),
        helper.make_node("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["bn", "bn_m", "bn_v"], name="/bn/BatchNormalization", epsilon=1e-5, momentum=0.9),
        helper.make_node("Relu", ["bn"], ["r"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "c2.weight"], ["c2"], name="/c2/Conv", kernel_shape=[3, 3],
                         pads=[2, 2, 2, 2], dilations=[2, 2], group=2),
        helper.make_node("AveragePool", ["c2"], ["ap"], name="/ap/AveragePool", kernel_shape=[3, 3], strides=[1, 1],
                         pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("GlobalAveragePool", ["ap"], ["gap"], name="/avgpool/GlobalAveragePool"),
        helper.make_node("Flatten", ["gap"], ["f"], name="/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm", transB=1),
    ], [init("c1.weight", [8, 3, 3, 3]), init("c1.bias", [8]), init("bn.weight", [8]), init("bn.bias", [8]),
        init("bn.running_mean", [8]), init("bn.running_var", [8]), init("c2.weight", [8, 4, 3, 3]),
        init("fc.weight", [10, 8]), init("fc.bias", [10])], [N, 3, 16, 16], [N, 10])

    # MatMul with a [in,out] initializer + bias Add (→ linear), pointwise ops, scalar constants.
    save(out, "pointwise", [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="/lin/MatMul"),
        helper.make_node("Add", ["mm", "b"], ["lin"], name="/lin/Add"),
        helper.make_node("LeakyRelu", ["lin"], ["a1"], name="/act/LeakyRelu", alpha=0.2),
        helper.make_node("Sigmoid", ["a1"], ["a2"], name="/s/Sigmoid"),
        helper.make_node("Tanh", ["a2"], ["a3"], name="/t/Tanh"),
        helper.make_node("HardSwish", ["a3"], ["a4"], name="/hs/HardSwish"),
        helper.make_node("HardSigmoid", ["a4"], ["a5"], name="/hsig/HardSigmoid", alpha=1.0 / 6, beta=0.5),
        const("two", 2.0, np.float32),
        helper.make_node("Mul", ["a5", "two"], ["m"], name="/Mul"),
        const("one", 1.0, np.float32),
        helper.make_node("Sub", ["one", "m"], ["s"], name="/Sub"),
        helper.make_node("Clip", ["s", "zero", "six"], ["c"], name="/r6/Clip"),
        helper.make_node("Softmax", ["c"], ["sm"], name="/Softmax", axis=-1),
        helper.make_node("Dropout", ["sm", "ratio", "train"], ["y"], name="/drop/Dropout"),
    ], [init("w", [12, 6]), init("b", [6]), init("zero", [], value=0.0), init("six", [], value=6.0),
        init("ratio", [], value=0.25), init("train", [], np.bool_, True)], [N, 12], [N, 6])

    # Transformer-ish: Gather embedding, LayerNorm, Transpose(W)+MatMul, Reshape via a Shape chain, Split,
    # Transpose, MatMul, Softmax, Concat, Slice, Unsqueeze/Squeeze, ReduceMean, erf-GELU, Identity.
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [N, "seq"])
    x_unused = []
    nodes = [
        helper.make_node("Gather", ["emb.weight", "ids"], ["e"], name="/emb/Gather"),
        helper.make_node("LayerNormalization", ["e", "ln.weight", "ln.bias"], ["ln", "", ""], name="/ln/LayerNormalization",
                         axis=-1, epsilon=1e-5),
        helper.make_node("Transpose", ["qkv.weight"], ["wt"], name="/qkv/Transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["ln", "wt"], ["qkv_mm"], name="/qkv/MatMul"),
        helper.make_node("Add", ["qkv_mm", "qkv.bias"], ["qkv"], name="/qkv/Add"),
        helper.make_node("Split", ["qkv", "split"], ["q", "k", "v"], name="/Split", axis=-1),
        helper.make_node("Shape", ["q"], ["qs"], name="/Shape"),
        const("i0", 0), const("i1", 1),
        helper.make_node("Gather", ["qs", "i0"], ["b0"], name="/Gather_1", axis=0),
        helper.make_node("Gather", ["qs", "i1"], ["s0"], name="/Gather_2", axis=0),
        helper.make_node("Unsqueeze", ["b0", "ax0"], ["b1"], name="/Unsqueeze"),
        helper.make_node("Unsqueeze", ["s0", "ax0"], ["s1"], name="/Unsqueeze_1"),
        helper.make_node("Concat", ["b1", "s1", "heads", "hd"], ["shape"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["q", "shape"], ["q4"], name="/Reshape"),
        helper.make_node("Reshape", ["k", "shape"], ["k4"], name="/Reshape_1"),
        helper.make_node("Transpose", ["q4"], ["qt"], name="/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k4"], ["kt"], name="/Transpose_1", perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["att"], name="/MatMul"),
        helper.make_node("Softmax", ["att"], ["p"], name="/Softmax", axis=-1),
        helper.make_node("ReduceMean", ["p"], ["pm"], name="/ReduceMean", axes=[1], keepdims=0),
        helper.make_node("Unsqueeze", ["pm", "ax0"], ["pu"], name="/Unsqueeze_2"),
        helper.make_node("Squeeze", ["pu", "ax0"], ["ps"], name="/Squeeze"),
        helper.make_node("MatMul", ["ps", "v"], ["o"], name="/MatMul_1"),
        const("sqrt2", 1.4142135, np.float32),
        helper.make_node("Div", ["o", "sqrt2"], ["g1"], name="/act/Div"),
        helper.make_node("Erf", ["g1"], ["g2"], name="/act/Erf"),
        const("one", 1.0, np.float32),
        helper.make_node("Add", ["g2", "one"], ["g3"], name="/act/Add"),
        helper.make_node("Mul", ["o", "g3"], ["g4"], name="/act/Mul"),
        const("half", 0.5, np.float32),
        helper.make_node("Mul", ["g4", "half"], ["g"], name="/act/Mul_1"),
        helper.make_node("Identity", ["g"], ["gi"], name="/Identity"),
        helper.make_node("Concat", ["gi", "gi"], ["cat"], name="/Concat_1", axis=-1),
        helper.make_node("Slice", ["cat", "st", "en", "sax"], ["sl"], name="/Slice"),
        helper.make_node("Gather", ["sl", "i0"], ["cls"], name="/Gather_3", axis=1),
        helper.make_node("ReduceSum", ["cls", "ax1"], ["y"], name="/ReduceSum", keepdims=1),
    ]
    inits = [init("emb.weight", [50, 16]), init("ln.weight", [16]), init("ln.bias", [16]),
             init("qkv.weight", [48, 16]), init("qkv.bias", [48]), init("split", [3], np.int64, [16, 16, 16]),
             init("ax0", [1], np.int64, [0]), init("heads", [1], np.int64, [2]), init("hd", [1], np.int64, [8]),
             init("st", [1], np.int64, [0]), init("en", [1], np.int64, [9223372036854775807]),
             init("sax", [1], np.int64, [-1]), init("ax1", [1], np.int64, [1])]
    g = helper.make_graph(nodes, "transformer", [ids], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "transformer.onnx"))

    # Shape arithmetic torch.onnx emits for transformers: Range(0, seq, 1) → arange; a truncating
    # integer Div ((12 + 2) / 3 = 4, as for chunk(3)) giving Slice bounds ONNX cannot infer the
    # result shape of (the importer propagates it: Shape of the slice → 4); torchvision's
    # expand(n, -1, -1) as Where(Equal(shape, -1), ConstantOfShape(1), shape); Where(mask, -inf, t).
    x3 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, "seq", 12])
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"], name="/Shape"),
        const("c0", 0), const("c1", 1), const("c2", 2), const("c3", 3), const("m1", [-1]),
        helper.make_node("Gather", ["xs", "c1"], ["seq"], name="/Gather", axis=0),
        helper.make_node("Range", ["c0", "seq", "c1"], ["r"], name="/Range"),
        helper.make_node("Gather", ["pos.weight", "r"], ["pe"], name="/pos/Gather"),
        helper.make_node("Add", ["x", "pe"], ["h"], name="/Add"),
        helper.make_node("Gather", ["xs", "c2"], ["d"], name="/Gather_1", axis=0),
        helper.make_node("Add", ["d", "c2"], ["d2"], name="/Add_1"),
        helper.make_node("Div", ["d2", "c3"], ["q"], name="/Div"),
        helper.make_node("Unsqueeze", ["q", "ax0"], ["q1"], name="/Unsqueeze"),
        helper.make_node("Mul", ["q1", "c2"], ["q2"], name="/Mul"),
        helper.make_node("Slice", ["h", "q1", "q2", "m1"], ["s"], name="/Slice"),
        helper.make_node("Gather", ["xs", "c0"], ["n"], name="/Gather_2", axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="/Unsqueeze_1"),
        helper.make_node("Concat", ["n1", "m1", "m1"], ["es"], name="/Concat", axis=0),
        helper.make_node("Shape", ["es"], ["esh"], name="/Shape_1"),
        helper.make_node("ConstantOfShape", ["esh"], ["ones"], name="/ConstantOfShape",
                         value=numpy_helper.from_array(np.array([1], dtype=np.int64))),
        helper.make_node("Equal", ["es", "m1"], ["eq"], name="/Equal"),
        helper.make_node("Where", ["eq", "ones", "es"], ["esz"], name="/Where"),
        helper.make_node("Expand", ["cls", "esz"], ["cx"], name="/Expand"),
        helper.make_node("Concat", ["cx", "s"], ["cat"], name="/Concat_1", axis=1),
        const("ninf", -np.inf, np.float32),
        helper.make_node("Where", ["mask", "ninf", "cat"], ["mf"], name="/Where_1"),
        helper.make_node("Shape", ["s"], ["ss"], name="/Shape_2"),
        helper.make_node("Gather", ["ss", "c2"], ["w"], name="/Gather_3", axis=0),
        helper.make_node("Unsqueeze", ["w", "ax0"], ["w1"], name="/Unsqueeze_2"),
        helper.make_node("Concat", ["m1", "w1"], ["shp"], name="/Concat_2", axis=0),
        helper.make_node("Reshape", ["mf", "shp"], ["y"], name="/Reshape"),
    ]
    inits = [init("pos.weight", [16, 12]), init("ax0", [1], np.int64, [0]), init("cls", [1, 1, 4]),
             init("mask", [4], np.bool_, [True, False, False, True])]
    g = helper.make_graph(nodes, "shapes", [x3], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "shapes.onnx"))

    # Range other than (0, n, 1): an error.
    save(out, "range_start", [
        helper.make_node("Shape", ["x"], ["xs"], name="/Shape"),
        const("c0", 0), const("c1", 1),
        helper.make_node("Gather", ["xs", "c1"], ["n"], name="/Gather", axis=0),
        helper.make_node("Range", ["c1", "n", "c1"], ["r"], name="/Range"),
        helper.make_node("Gather", ["e", "r"], ["y"], name="/emb/Gather"),
    ], [init("e", [16, 4])], [N, 8], None)

    # Unsupported nodes (three of them), a good node between them.
    save(out, "unsupported", [
        helper.make_node("Relu", ["x"], ["r"], name="/relu/Relu"),
        helper.make_node("Erf", ["r"], ["e"], name="/erf/Erf"),
        helper.make_node("Relu", ["x"], ["r2"], name="/relu2/Relu"),
        helper.make_node("Conv", ["r2", "w"], ["c"], name="/conv/Conv", kernel_shape=[3, 3], pads=[0, 1, 1, 0]),
        helper.make_node("TopK", ["r2", "k"], ["y", "i"], name="/topk/TopK"),
    ], [init("w", [4, 3, 3, 3]), init("k", [1], np.int64, [1])], [N, 3, 8, 8], None)

    # Graph with an extra symbolic dim and a dim without a name.
    save(out, "symbols", [helper.make_node("Relu", ["x"], ["y"], name="/relu/Relu")], [], [None, "width"], None,
         out_type=TensorProto.FLOAT)

    # A valid model, written truncated by the test.
    with open(os.path.join(out, "cnn.onnx"), "rb") as f:
        data = f.read()
    with open(os.path.join(out, "truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(out, "garbage.onnx"), "wb") as f:
        f.write(b"\xff\xff\xff\xff not a protobuf at all \x00\x01")


if __name__ == "__main__":
    main(sys.argv[1])
