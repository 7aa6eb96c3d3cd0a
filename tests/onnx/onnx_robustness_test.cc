// Hostile ONNX models are refused by the model check before ONNX shape inference runs (a Conv
// with strides [0, 0] divided by zero inside libonnx).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <functional>
#include <initializer_list>

#include "lib/onnx/const_value.h"
#include "lib/onnx/model_check.h"
#include "lib/onnx/onnx_import.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

// An opset-13 model whose graph has one float input x of |shape| (nodes to be added).
onnx::ModelProto ModelWithInput(std::initializer_list<int64_t> shape) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("x");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  return m;
}

// x[1,3,8,8] -> Conv(w[4,3,3,3]) -> y, with the given attributes.
onnx::ModelProto ConvModel(const std::vector<int64_t>& strides, int64_t group = 1) {
  onnx::ModelProto m = ModelWithInput({1, 3, 8, 8});
  onnx::GraphProto* g = m.mutable_graph();
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {4, 3, 3, 3}) w->add_dims(d);
  for (int k = 0; k < 108; ++k) w->add_float_data(0.0f);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Conv");
  n->set_name("conv");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  onnx::AttributeProto* s = n->add_attribute();
  s->set_name("strides");
  s->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : strides) s->add_ints(v);
  onnx::AttributeProto* gr = n->add_attribute();
  gr->set_name("group");
  gr->set_type(onnx::AttributeProto::INT);
  gr->set_i(group);
  g->add_output()->set_name("y");
  return m;
}

std::string ImportError(const onnx::ModelProto& m) {
  auto r = ImportOnnx(m.SerializeAsString(), "m.onnx", OnnxImportOptions{});
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

// The import error of tests/data/robustness/|name| (which must be refused).
std::string ImportFileError(const std::string& name) {
  auto r = ImportOnnxFile(test_data::TestDataPath("robustness/" + name), OnnxImportOptions{});
  EXPECT_FALSE(r.ok()) << name << " was accepted";
  return r.ok() ? "" : r.status().message();
}

TEST(OnnxRobustnessTest, ConvWithZeroStridesIsRefusedBeforeShapeInference) {
  const std::string m = ImportError(ConvModel({0, 0}));
  EXPECT_THAT(m, HasSubstr("m.onnx: node 0 Conv \"conv\" attribute strides: value 0"));
}

TEST(OnnxRobustnessTest, ConvWithZeroGroupIsRefused) {
  EXPECT_THAT(ImportError(ConvModel({1, 1}, 0)), HasSubstr("attribute group: must be in [1, 2^31]"));
}

TEST(OnnxRobustnessTest, InitializerWhoseDataDoesNotMatchItsDimsIsRefused) {
  onnx::ModelProto m = ConvModel({1, 1});
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, 400);
  EXPECT_THAT(ImportError(m), HasSubstr("initializer \"w\": holds 108 values, the dims need 10800"));
}

TEST(OnnxRobustnessTest, DimensionProductBeyond2To40IsRefused) {
  onnx::ModelProto m = ConvModel({1, 1});
  auto* t = m.mutable_graph()->mutable_initializer(0);
  for (int k = 0; k < 4; ++k) t->set_dims(k, int64_t{1} << 20);
  EXPECT_THAT(ImportError(m), HasSubstr("element count exceeds 2^40"));
}

TEST(OnnxRobustnessTest, NegativeInputDimensionIsRefused) {
  onnx::ModelProto m = ConvModel({1, 1});
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_value(-8);
  EXPECT_THAT(ImportError(m), HasSubstr("input \"x\": dimension 2 is -8"));
}

TEST(OnnxRobustnessTest, TheRegressionFileIsRefused) {
  const std::string m = ImportFileError("onnx_conv_zero_strides.onnx");
  EXPECT_THAT(m, HasSubstr("attribute strides: value 0"));
}

// Found by onnx_import_fuzz (the crash input itself): a node input renamed to a name nothing
// defines made libonnx's shape inference dereference a null type (SIGSEGV).
TEST(OnnxRobustnessTest, FuzzUndefinedNodeInputIsRefusedBeforeShapeInference) {
  const std::string m = ImportFileError("fuzz_onnx_undefined_node_input.onnx");
  EXPECT_THAT(m, HasSubstr("node 0 Gather"));
  EXPECT_THAT(m, HasSubstr("is not defined before the node"));
}

// Found by onnx_import_fuzz (the crash input itself): a Concat whose required `axis` attribute
// was renamed `xais` crashed libonnx's shape inference; attributes are checked against the op schema first.
TEST(OnnxRobustnessTest, FuzzMissingRequiredAttributeIsRefusedBeforeShapeInference) {
  const std::string m = ImportFileError("fuzz_onnx_missing_required_attribute.onnx");
  EXPECT_THAT(m, HasSubstr("node 18 Concat"));
  EXPECT_THAT(m, HasSubstr("required attribute 'axis' is missing"));
}

// Found by onnx_import_fuzz (the crash input itself): op types with no ONNX schema
// ("Constajt", "Goncat") left their outputs untyped and crashed libonnx's shape inference.
TEST(OnnxRobustnessTest, FuzzUnknownOpTypeIsRefusedBeforeShapeInference) {
  const std::string m = ImportFileError("fuzz_onnx_unknown_op_type.onnx");
  EXPECT_THAT(m, HasSubstr("node 5 Constajt"));
  EXPECT_THAT(m, HasSubstr("unknown ONNX op"));
}

// Found by onnx_import_fuzz (the crash input itself, once open in fuzz/findings): a structurally
// valid model on which libonnx 1.12's data propagation dereferences null (SIGSEGV). Shape
// inference runs in a child process (Note [Contained ONNX shape inference]): the fault stays in
// the child, inference is redone without data propagation, and the model gets a clear answer.
TEST(OnnxRobustnessTest, FuzzDataPropagationFaultStaysInTheChild) {
  const std::string m = ImportFileError("onnx_data_propagation_slice_segv.onnx");
  EXPECT_THAT(m, HasSubstr("node 10 Gather"));
  EXPECT_THAT(m, HasSubstr("index out of range"));
}

// The inference worker that died on that model is replaced: the next import infers shapes (a
// valid Conv gets its output shape), and so does the one after (the new worker is kept).
TEST(OnnxRobustnessTest, AfterAFaultInsideLibonnxTheNextImportsStillInferShapes) {
  ImportFileError("onnx_data_propagation_slice_segv.onnx");
  for (int k = 0; k < 2; ++k) {
    auto r = ImportOnnx(ConvModel({2, 2}).SerializeAsString(), "m.onnx", OnnxImportOptions{});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_THAT(r->dump(), HasSubstr("conv"));
  }
}

// The pids of the live child processes of |parent| (from /proc/*/stat).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> kids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat) || stat.rfind(')') == std::string::npos) continue;
    // "pid (comm) state ppid ...": the command may hold spaces and parentheses.
    std::istringstream rest(stat.substr(stat.rfind(')') + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent && state != "Z") kids.push_back(std::stoi(name));
  }
  return kids;
}

// Note [Contained ONNX shape inference]: memsim forks one supervisor, once; the workers that
// fault are replaced by forks of the supervisor, never of memsim (whose heap may be large).
TEST(OnnxRobustnessTest, AFaultingWorkerIsReplacedByTheSupervisorNotByMemsim) {
  ImportFileError("onnx_data_propagation_slice_segv.onnx");
  const std::vector<pid_t> supervisor = ChildrenOf(getpid());
  ASSERT_EQ(supervisor.size(), 1u);
  for (int k = 0; k < 3; ++k) {
    ImportFileError("onnx_data_propagation_slice_segv.onnx");
    EXPECT_EQ(ChildrenOf(getpid()), supervisor);
  }
  auto r = ImportOnnx(ConvModel({2, 2}).SerializeAsString(), "m.onnx", OnnxImportOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(ChildrenOf(getpid()), supervisor);
  EXPECT_EQ(ChildrenOf(supervisor[0]).size(), 1u);  // the worker, kept for the next import
}

// x[1,4] -> |op|(attributes) -> y: a one-node model.
onnx::ModelProto OneNodeModel(const std::string& op,
                              const std::function<void(onnx::NodeProto*, onnx::GraphProto*)>& build) {
  onnx::ModelProto m = ModelWithInput({1, 4});
  onnx::GraphProto* g = m.mutable_graph();
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  n->add_input("x");
  n->add_output("y");
  build(n, g);
  g->add_output()->set_name("y");
  return m;
}

// onnx_import_fuzz (UBSan): a float attribute of 4.3e27 was converted to int64 to test whether it
// is whole before its size was checked. It is written as the float it is.
TEST(OnnxRobustnessTest, FuzzHugeFloatAttributeIsWrittenAsAFloat) {
  auto m = OneNodeModel("LeakyRelu", [](onnx::NodeProto* n, onnx::GraphProto*) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("alpha");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(4.321787613889555e+27f);
  });
  auto r = ImportOnnx(m.SerializeAsString(), "m.onnx", OnnxImportOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string text = GraphJsonText(*r);
  EXPECT_THAT(text, HasSubstr("e+27"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("9223372036854775808")));
}

// The same conversion in a constant Cast from float to int64: a value beyond int64 is refused.
TEST(OnnxRobustnessTest, CastOfAFloatConstantBeyondInt64IsRefused) {
  auto m = OneNodeModel("Reshape", [](onnx::NodeProto* n, onnx::GraphProto* g) {
    onnx::TensorProto* c = g->add_initializer();
    c->set_name("shape_f");
    c->set_data_type(onnx::TensorProto::INT64);
    c->add_dims(2);
    c->add_int64_data(1);
    c->add_int64_data(4);
    onnx::NodeProto* tof = g->add_node();
    tof->set_op_type("Cast");
    tof->add_input("shape_f");
    tof->add_output("shape_float");
    onnx::AttributeProto* to = tof->add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::FLOAT);
    onnx::NodeProto* mul = g->add_node();
    mul->set_op_type("Mul");
    mul->add_input("shape_float");
    mul->add_input("huge");
    mul->add_output("shape_big");
    onnx::TensorProto* h = g->add_initializer();
    h->set_name("huge");
    h->set_data_type(onnx::TensorProto::FLOAT);
    h->add_float_data(1e30f);
    onnx::NodeProto* back = g->add_node();
    back->set_op_type("Cast");
    back->add_input("shape_big");
    back->add_output("shape");
    onnx::AttributeProto* to2 = back->add_attribute();
    to2->set_name("to");
    to2->set_type(onnx::AttributeProto::INT);
    to2->set_i(onnx::TensorProto::INT64);
    n->add_input("shape");
  });
  // Nodes must be in topological order: the Reshape (added first) goes last.
  auto* nodes = m.mutable_graph()->mutable_node();
  std::rotate(nodes->begin(), nodes->begin() + 1, nodes->end());
  auto r = ImportOnnx(m.SerializeAsString(), "m.onnx", OnnxImportOptions{});
  if (r.ok()) {
    ADD_FAILURE() << "accepted: " << GraphJsonText(*r);
    return;
  }
  EXPECT_THAT(r.status().message(), HasSubstr("beyond the int64 range"));
}

// onnx_import_fuzz (UBSan): an Unsqueeze axis of -3e8 on a constant (a Shape's result) indexed
// before the start of the shape vector. An axis outside [-out_rank, out_rank) is refused.
TEST(OnnxRobustnessTest, FuzzUnsqueezeAxisOutOfRangeIsRefused) {
  auto m = OneNodeModel("Shape", [](onnx::NodeProto* n, onnx::GraphProto* g) {
    n->set_output(0, "s");
    onnx::TensorProto* axes = g->add_initializer();
    axes->set_name("axes");
    axes->set_data_type(onnx::TensorProto::INT64);
    axes->add_dims(1);
    axes->add_int64_data(-300000000);
    onnx::NodeProto* u = g->add_node();
    u->set_op_type("Unsqueeze");
    u->add_input("s");
    u->add_input("axes");
    u->add_output("y");
  });
  auto r = ImportOnnx(m.SerializeAsString(), "m.onnx", OnnxImportOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("Unsqueeze axis out of range"));
}

// onnx_import_fuzz (UBSan, and libprotobuf's CHECK in a release build): an Add with no output,
// fused into the MatMul before it, had its output(0) read. Input and output counts are checked
// against the op's schema before anything reads them.
TEST(OnnxRobustnessTest, FuzzNodeWithoutItsOutputIsRefused) {
  const std::string m = ImportFileError("fuzz_onnx_node_without_output.onnx");
  EXPECT_THAT(m, HasSubstr("Add \"/lin/Add\": 0 outputs; the op makes 1 to 1"));
}

// Shape arithmetic on constants from the model is checked: overflow and INT64_MIN / -1 give
// "unknown", never undefined behaviour or SIGFPE.
TEST(OnnxRobustnessTest, ConstantShapeArithmeticCannotOverflow) {
  using onnx_import::SymInt;
  const SymInt big = SymInt::Const(int64_t{1} << 40), min = SymInt::Const(INT64_MIN);
  EXPECT_FALSE(onnx_import::Mul(big, big).has_value());
  EXPECT_EQ(onnx_import::Mul(big, SymInt::Const(2))->coeff, int64_t{1} << 41);
  EXPECT_FALSE(onnx_import::Div(min, SymInt::Const(-1)).has_value());
  EXPECT_FALSE(onnx_import::AddSub(min, SymInt::Const(1), /*sub=*/true).has_value());
  EXPECT_FALSE(onnx_import::AddSub(SymInt::Const(INT64_MAX), SymInt::Const(1), false).has_value());
}

TEST(OnnxRobustnessTest, ValidConvPassesTheCheck) {
  EXPECT_TRUE(onnx_import::CheckOnnxModel(ConvModel({2, 2}), "m.onnx").ok());
}

}  // namespace
}  // namespace memsim
