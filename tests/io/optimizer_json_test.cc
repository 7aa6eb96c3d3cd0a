// The "optimizer" value of a graph file: a recorded optimizer (Note [Recorded optimizers]).
#include "lib/io/optimizer_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

json Step(json body, json end = json::array(), json resident = json::array(), json before = json::array()) {
  return {{"resident", resident}, {"before", before}, {"body", body}, {"end", end}};
}

json Program(json first, json steady) {
  return {{"name", "MyOpt"}, {"source", "test"}, {"first_step", first}, {"steady_step", steady}};
}

std::string ErrorOf(const json& v) {
  auto p = ParseOptimizerProgram(v, "g.json", "/optimizer");
  EXPECT_FALSE(p.ok());
  return p.ok() ? "" : p.status().message();
}

TEST(OptimizerJsonTest, ReadsSizesRefsAndWhichObjectsSurvive) {
  // t0: state (never freed), t1: freed in its own iteration, t2: carried to the next parameter.
  json first = Step({"alloc 1", "alloc 1/2", "alloc 8B", "free t1", "free prev t2"}, {"free t2"});
  json steady = Step({"alloc 1", "free prev s0"}, {"free s0"}, {"1"}, {"alloc 4B", "free g0"});
  auto p = ParseOptimizerProgram(Program(first, steady), "g.json", "/optimizer");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->name, "MyOpt");
  ASSERT_EQ(p->first.body.size(), 5u);
  EXPECT_EQ(p->first.body[1].size.Of(1000), 500);
  EXPECT_EQ(p->first.body[2].size.Of(1000), 8);
  EXPECT_EQ(p->first.body[4].ref.owner, OptRef::Owner::kPrevious);
  EXPECT_EQ(p->first.survives, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(p->steady.resident.size(), 1u);
  EXPECT_TRUE(p->steady.body[1].ref.state);
  EXPECT_EQ(p->steady.before[1].ref.owner, OptRef::Owner::kGlobal);
}

TEST(OptimizerJsonTest, RefusesAnObjectThatDoesNotExistYet) {
  EXPECT_THAT(ErrorOf(Program(Step({"free t0", "alloc 1"}), Step(json::array()))),
              HasSubstr("/optimizer/first_step/body/0: frees t0, which does not exist there"));
}

TEST(OptimizerJsonTest, RefusesADoubleFree) {
  EXPECT_THAT(ErrorOf(Program(Step({"alloc 1", "free t0", "free t0"}), Step(json::array()))), HasSubstr("t0 is freed twice"));
}

TEST(OptimizerJsonTest, ACarriedObjectMustAlsoBeFreedAfterTheLastParameter) {
  EXPECT_THAT(ErrorOf(Program(Step({"alloc 1", "free prev t0"}), Step(json::array()))),
              HasSubstr("/optimizer/first_step/end: the objects freed after the last parameter"));
}

TEST(OptimizerJsonTest, RefusesBadTextWithItsPointer) {
  EXPECT_THAT(ErrorOf(Program(Step({"alloc 0"}), Step(json::array()))), HasSubstr("/optimizer/first_step/body/0: bad size"));
  EXPECT_THAT(ErrorOf(Program(Step({"grow 1"}), Step(json::array()))), HasSubstr("expected \"alloc SIZE\" or \"free REF\""));
  EXPECT_THAT(ErrorOf(Program(Step({"free prev g0"}), Step(json::array()))), HasSubstr("\"prev\" applies to tK and sK only"));
  EXPECT_THAT(ErrorOf(Program(Step(json::array()), json::object())), HasSubstr("/optimizer/steady_step/resident"));
  EXPECT_THAT(ErrorOf({{"name", "x"}}), HasSubstr("/optimizer/source"));
}

// Note [Recorded optimizers]: each program is checked on its own and against the steady step,
// so a later step can never free a state that is not there (a double free several steps later).
TEST(OptimizerJsonTest, RefusesASteadyStepThatFreesStateItNeverRecreates) {
  EXPECT_THAT(ErrorOf(Program(Step({"alloc 1"}), Step({"free s0"}, json::array(), {"1"}))),
              HasSubstr("/optimizer/steady_step: the step frees its 1 state tensors and makes none to replace them"));
}

TEST(OptimizerJsonTest, RefusesAStepThatReplacesPartOfItsState) {
  EXPECT_THAT(ErrorOf(Program(Step({"alloc 1", "alloc 1"}), Step({"alloc 1", "free s0"}, json::array(), {"1", "1"}))),
              HasSubstr("/optimizer/steady_step: the step frees 1 of its 2 state tensors"));
}

TEST(OptimizerJsonTest, FirstStepSurvivorsMustBeTheSteadyStepsResidentState) {
  EXPECT_THAT(ErrorOf(Program(Step({"alloc 1/2"}), Step(json::array(), json::array(), {"1"}))),
              HasSubstr("/optimizer/first_step: the state after the step, [1/2], differs from the steady step's "
                        "resident state [1]"));
  EXPECT_THAT(ErrorOf(Program(Step(json::array()), Step({"alloc 1"}, json::array(), {"1"}))),
              HasSubstr("/optimizer/first_step: the state after the step, [], differs"));
}

TEST(OptimizerJsonTest, InPlaceStateKeptByBothStepsIsAccepted) {
  // Adam-like: the constructor's state (first step resident) updated in place, no survivors.
  auto p = ParseOptimizerProgram(Program(Step({"alloc 1", "free t0"}, json::array(), {"1", "1"}),
                                         Step({"alloc 1", "free t0"}, json::array(), {"1", "1"})),
                                 "g.json", "/optimizer");
  EXPECT_TRUE(p.ok()) << p.status().message();
}

}  // namespace
}  // namespace memsim
