#!/usr/bin/env python3
"""Writes the hostile and broken inputs of docs/robustness.md into this directory (committed; run
again only to change them). One file per class of bad input; the name says what it exercises.
Large inputs (10 MB of empty lists) are built by the tests themselves instead."""
import json, os, pickle, sys

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def put(name, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(HERE, name), mode) as f:
        f.write(data)


def graph(inputs, ops=None, loss=None, **extra):
    g = {"format": "memsim-graph", "version": 1, "name": "bad", "inputs": inputs,
         "ops": ops or [{"op": "relu", "inputs": [inputs[0]["name"]], "outputs": ["y"]}]}
    if loss is not None:
        g["loss"] = loss
    g.update(extra)
    return json.dumps(g)


def seg(addr, size, blocks):
    return {"device": 0, "address": addr, "total_size": size, "stream": 0, "segment_type": "large",
            "blocks": blocks}


def snapshot(segments, trace, settings=None):
    d = {"segments": segments, "device_traces": [trace]}
    if settings is not None:
        d["allocator_settings"] = settings
    return pickle.dumps(d, protocol=4)


BASE = 0x7F0000000000
ONE = [seg(BASE, 20 * MiB, [{"address": BASE, "size": 20 * MiB, "state": "inactive"}])]

# graph files
depth = 100000
put("graph_deep_nesting.json", graph([{"name": "x", "shape": [4], "dtype": "[" * depth + "]" * depth}])
    .replace('"' + "[" * depth + "]" * depth + '"', "[" * depth + "]" * depth))
put("graph_dim_product_wraps.json", graph([{"name": "x", "shape": ["4294967296*4294967296"]}]))
put("graph_int_beyond_64_bits.json", graph([{"name": "x", "shape": [4]}]).replace("[4]", "[123456789012345678901234567890]"))
put("graph_unsigned_attr_wraps.json", graph([{"name": "x", "shape": [4, 4]}],
    [{"op": "sum", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": [18446744073709551615]}}]))
put("graph_loss_is_input.json", graph([{"name": "x", "shape": [4]}], loss="x"))
put("graph_loss_not_scalar.json", graph([{"name": "x", "shape": ["batch", 4]}],
    [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}], loss="y"))
put("graph_huge_tensor.json", graph([{"name": "x", "shape": [1099511627776, 1048576]}]))
put("graph_long_name_excerpt.json", graph([{"name": "x", "shape": [4], "dtype": "f" * 100000}]))

# snapshots
put("snapshot_int_beyond_64_bits.pickle",
    snapshot([seg(1 << 70, 20 * MiB, [{"size": 20 * MiB, "state": "inactive"}])], []))
put("snapshot_overlapping_segments.pickle", snapshot(ONE + [seg(BASE + 2 * MiB, 20 * MiB, [
    {"address": BASE + 2 * MiB, "size": 20 * MiB, "state": "inactive"}])], []))
blk = {"size": 512, "state": "inactive"}
rep = seg(BASE, 512 * 10000, [blk] * 10000)  # pickle memoizes: one segment, referenced 10,000 x
put("snapshot_repeated_segment_memo.pickle", pickle.dumps({"segments": [rep] * 10000, "device_traces": [[]]}, protocol=4))
put("snapshot_bad_settings.pickle", snapshot(ONE, [], {"garbage_collection_threshold": 5.0}))
put("snapshot_size_near_2_63.pickle", snapshot(ONE, [{"action": "alloc", "addr": BASE, "size": (1 << 63) - 1, "stream": 0}]))
put("snapshot_free_unknown_address.pickle", snapshot(ONE, [{"action": "free_completed", "addr": BASE + 64 * MiB, "size": 4096, "stream": 0}]))
put("snapshot_block_outside_segment.pickle", snapshot([seg(BASE, 2 * MiB, [
    {"address": BASE, "size": 4 * MiB, "state": "inactive"}])], []))
put("alloc_data_v20_elements.json", json.dumps({"actions": [0, 1, 1, 0], "elements": [
    {"size": 4096, "info": "a"}, {"size": 7, "info": "b"}], "initially_allocated": []}))
put("alloc_data_size_near_2_63.json", json.dumps({"actions": [0], "elements_size": [(1 << 63) - 1]}))

# ONNX: a Conv with strides [0, 0] (SIGFPE inside libonnx shape inference before validation)
try:
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 0], kernel_shape=[3, 3])
    m = helper.make_model(helper.make_graph([node], "g", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 13)])
    put("onnx_conv_zero_strides.onnx", m.SerializeToString())
except ImportError:
    sys.exit("python3-onnx is needed for the ONNX input")

# PyTorch >= 2.1 trace_plot / segment_plot HTML: the snapshot pickle embedded as base64 (valid).
import base64
buf = pickle.dumps({"segments": ONE, "device_traces": [[
    {"action": "alloc", "addr": BASE, "size": 4096, "stream": 0},
    {"action": "free_completed", "addr": BASE, "size": 4096, "stream": 0}]]})
buf += b"\x00" * (3 - len(buf) % 3)
files = json.dumps([{"name": "snapshot.pickle", "base64": base64.b64encode(buf).decode("utf-8")}])
put("trace_plot_v21_embedded_pickle.html", "<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n"
    "<script type=\"module\">\nimport {add_local_files} from \"MemoryViz.js\"\n"
    "const local_files = " + files + "\nadd_local_files(local_files, 'Active Memory Timeline')\n"
    "</script>\n</body>\n")
