// lib/onnx: the ONNX importer on tiny models that tests/onnx/make_models.py writes at test time
// with Debian's python3-onnx (no ONNX binaries are committed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "lib/io/graph_json.h"
#include "lib/onnx/onnx_import.h"

namespace memsim {
namespace {

using Json = nlohmann::ordered_json;

class OnnxImportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One directory per test process: ctest runs the cases of this suite in parallel processes,
    // and a shared directory let one rewrite a model while another read it.
    dir_ = std::string(MEMSIM_BINARY_DIR) + "/onnx_test_models/" + std::to_string(getpid());
    std::string cmd = "/usr/bin/python3 " + std::string(MEMSIM_SOURCE_DIR) + "/tests/onnx/make_models.py " + dir_;
    ok_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  void SetUp() override {
    // python3-onnx is in the Makefile's packages: a missing one fails, it does not skip.
    ASSERT_TRUE(ok_) << "tests/onnx/make_models.py failed (is python3-onnx installed?)";
  }
  static std::string Path(const std::string& name) { return dir_ + "/" + name + ".onnx"; }
  static Json Import(const std::string& name, OnnxImportOptions opt = {}) {
    auto g = ImportOnnxFile(Path(name), opt);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return g.ok() ? *g : Json();
  }
  static std::vector<std::string> Ops(const Json& g) {
    std::vector<std::string> ops;
    for (const auto& op : g["ops"]) ops.push_back(op["op"]);
    return ops;
  }
  static const Json& Op(const Json& g, const std::string& kind) {
    for (const auto& op : g["ops"])
      if (op["op"] == kind) return op;
    static const Json kNull;
    ADD_FAILURE() << "no op " << kind;
    return kNull;
  }
  static std::vector<std::string> Names(const Json& list) {
    std::vector<std::string> v;
    for (const auto& t : list) v.push_back(t["name"]);
    return v;
  }
  static inline std::string dir_;
  static inline bool ok_ = false;
};

TEST_F(OnnxImportTest, CnnOpsParametersBuffersAndSymbolicBatch) {
  Json g = Import("cnn");
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"conv2d", "batch_norm", "relu", "max_pool2d", "conv2d", "avg_pool2d",
                                              "adaptive_avg_pool2d", "flatten", "linear", "cross_entropy"}));
  EXPECT_EQ(g["inputs"][0]["shape"], Json::parse(R"(["batch", 3, 16, 16])"));
  EXPECT_EQ(g["inputs"][1]["name"], "target");
  EXPECT_EQ(g["symbols"]["batch"], 32);
  EXPECT_EQ(Names(g["parameters"]),
            (std::vector<std::string>{"c1.weight", "c1.bias", "bn.weight", "bn.bias", "c2.weight", "fc.weight", "fc.bias"}));
  EXPECT_EQ(Names(g["buffers"]), (std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}));
  EXPECT_EQ(g["ops"][0]["attrs"]["stride"], Json::parse("[2, 2]"));
  EXPECT_EQ(g["ops"][0]["attrs"]["padding"], Json::parse("[1, 1]"));
  EXPECT_EQ(g["ops"][0]["module"], "c1");
  EXPECT_EQ(g["ops"][1]["attrs"]["momentum"], 0.1);
  EXPECT_EQ(g["ops"][1]["attrs"]["training"], true);
  EXPECT_EQ(g["ops"][4]["attrs"]["groups"], 2);
  EXPECT_EQ(g["ops"][4]["attrs"]["dilation"], Json::parse("[2, 2]"));
  EXPECT_EQ(g["ops"][5]["attrs"]["count_include_pad"], true);
  EXPECT_EQ(g["ops"][6]["attrs"]["output_size"], Json::parse("[1, 1]"));
  EXPECT_EQ(g["outputs"], Json::parse(R"(["y"])"));
  EXPECT_EQ(g["loss"], "loss");
  // The text loads in memsim.
  EXPECT_TRUE(ParseGraph(GraphJsonText(g), "cnn").ok());
}

TEST_F(OnnxImportTest, PointwiseOpsAndMatMulWeightTransposed) {
  Json g = Import("pointwise");
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"linear", "leaky_relu", "sigmoid", "tanh", "hardswish", "hardsigmoid",
                                              "mul", "sub", "relu6", "softmax", "dropout", "cross_entropy"}));
  // MatMul's [in=12, out=6] initializer becomes the linear weight [out, in]; the Add is its bias.
  EXPECT_EQ(g["parameters"][0]["name"], "w");
  EXPECT_EQ(g["parameters"][0]["shape"], Json::parse("[6, 12]"));
  EXPECT_EQ(Op(g, "linear")["inputs"], Json::parse(R"(["x", "w", "b"])"));
  EXPECT_EQ(Op(g, "leaky_relu")["attrs"]["negative_slope"], 0.2);
  EXPECT_EQ(Op(g, "mul")["attrs"]["scalar"], 2.0);
  EXPECT_EQ(Op(g, "sub")["attrs"]["reverse"], true);
  EXPECT_EQ(Op(g, "dropout")["attrs"]["p"], 0.25);
  EXPECT_EQ(Op(g, "dropout")["attrs"]["training"], true);
}

TEST_F(OnnxImportTest, TransformerOpsAndShapeChains) {
  OnnxImportOptions opt;
  opt.sets["seq"] = 9;
  Json g = Import("transformer", opt);
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"embedding", "layer_norm", "linear", "split", "reshape", "reshape",
                                              "permute", "permute", "matmul", "softmax", "mean", "unsqueeze", "squeeze",
                                              "matmul", "gelu", "cat", "slice", "select", "sum", "cross_entropy"}));
  EXPECT_EQ(g["symbols"], Json::parse(R"({"batch": 32, "seq": 9})"));
  // Shape → Gather → Unsqueeze → Concat evaluated symbolically.
  EXPECT_EQ(Op(g, "reshape")["attrs"]["shape"], Json::parse(R"(["batch", "seq", 2, 8])"));
  // Transpose(W) feeding MatMul: W is the linear weight as stored.
  EXPECT_EQ(g["parameters"][3]["shape"], Json::parse("[48, 16]"));
  EXPECT_EQ(Op(g, "split")["attrs"]["sections"], Json::parse("[16, 16, 16]"));
  EXPECT_EQ(Op(g, "slice")["attrs"]["end"], Json());
  EXPECT_EQ(Op(g, "select")["attrs"]["index"], 0);
  EXPECT_EQ(Op(g, "layer_norm")["attrs"]["normalized_shape"], Json::parse("[16]"));
}

TEST_F(OnnxImportTest, RangeTruncatingDivAndPropagatedShapes) {
  OnnxImportOptions opt;
  opt.sets["seq"] = 5;
  opt.loss = "none";
  Json g = Import("shapes", opt);
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"arange", "embedding", "add", "slice", "expand", "cat", "masked_fill",
                                              "reshape"}));
  // Range(0, Shape(x)[1], 1) → arange to the symbol.
  EXPECT_EQ(Op(g, "arange")["attrs"]["end"], "seq");
  EXPECT_EQ(Op(g, "arange")["attrs"]["dtype"], "int64");
  // (12 + 2) / 3 truncates to 4: slice [4, 8) of the last dim.
  EXPECT_EQ(Op(g, "slice")["attrs"], Json::parse(R"({"dim": -1, "start": 4, "end": 8, "step": 1})"));
  // Shape of that slice comes from the importer's own propagation: 4.
  EXPECT_EQ(Op(g, "reshape")["attrs"]["shape"], Json::parse("[-1, 4]"));
  // Where(Equal(shape, -1), ConstantOfShape(1), shape) folded: [batch, 1, 1]; the 1 over cls's 4 → -1.
  EXPECT_EQ(Op(g, "expand")["attrs"]["sizes"], Json::parse(R"(["batch", 1, -1])"));
  EXPECT_EQ(Op(g, "masked_fill")["attrs"]["value"], "-inf");
  EXPECT_EQ(Names(g["buffers"]), (std::vector<std::string>{"mask"}));
}

TEST_F(OnnxImportTest, RangeOtherThanZeroToNByOneIsAnError) {
  auto g = ImportOnnxFile(Path("range_start"), {});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("Range \"/Range\": only Range(0, n, 1)"), std::string::npos)
      << g.status().message();
}

TEST_F(OnnxImportTest, ListsEveryUnsupportedNode) {
  auto g = ImportOnnxFile(Path("unsupported"), {});
  ASSERT_FALSE(g.ok());
  const std::string& m = g.status().message();
  EXPECT_NE(m.find("3 unsupported ONNX nodes"), std::string::npos) << m;
  EXPECT_NE(m.find("node 1 Erf \"/erf/Erf\""), std::string::npos) << m;
  EXPECT_NE(m.find("node 3 Conv \"/conv/Conv\": asymmetric pads"), std::string::npos) << m;
  EXPECT_NE(m.find("node 4 TopK \"/topk/TopK\""), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST_F(OnnxImportTest, OtherSymbolsNeedADefault) {
  auto g = ImportOnnxFile(Path("symbols"), {});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("--set width=N"), std::string::npos) << g.status().message();
  OnnxImportOptions opt;
  opt.sets["width"] = 7;
  opt.loss = "mse";
  Json j = Import("symbols", opt);
  EXPECT_EQ(j["inputs"][0]["shape"], Json::parse(R"(["batch", "width"])"));  // unnamed first dim → batch
  EXPECT_EQ(Op(j, "mse_loss")["inputs"][1], "target");
  opt.sets["nope"] = 1;
  EXPECT_FALSE(ImportOnnxFile(Path("symbols"), opt).ok());
}

TEST_F(OnnxImportTest, TruncatedOrGarbageFilesAreErrors) {
  for (const char* name : {"truncated", "garbage"}) {
    auto g = ImportOnnxFile(Path(name), {});
    ASSERT_FALSE(g.ok()) << name;
    EXPECT_NE(g.status().message().find(Path(name)), std::string::npos);
    EXPECT_NE(g.status().message().find("not a valid ONNX model"), std::string::npos) << g.status().message();
  }
  EXPECT_FALSE(ImportOnnxFile(dir_ + "/missing.onnx", {}).ok());
}

TEST_F(OnnxImportTest, LossNoneAndName) {
  OnnxImportOptions opt;
  opt.loss = "none";
  opt.name = "tiny";
  Json g = Import("cnn", opt);
  EXPECT_EQ(g["name"], "tiny");
  EXPECT_FALSE(g.contains("loss"));
  EXPECT_EQ(g["inputs"].size(), 1u);
}

}  // namespace
}  // namespace memsim
