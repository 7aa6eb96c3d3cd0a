// A small MLP used by the autodiff tests: x [8, 32] -> l1 (64) -> relu -> l2 (10) -> cross_entropy.
#ifndef MEMSIM_TESTS_AUTODIFF_MLP_FIXTURE_H_
#define MEMSIM_TESTS_AUTODIFF_MLP_FIXTURE_H_

#include <string>

namespace memsim::testing {

inline constexpr int64_t kW1 = 64 * 32 * 4, kB1 = 64 * 4, kW2 = 10 * 64 * 4, kB2 = 10 * 4;
inline constexpr int64_t kParamBytes = kW1 + kB1 + kW2 + kB2;

inline std::string MlpBody(const std::string& extra = "") {
  return R"("inputs": [{"name": "x", "shape": [8, 32]}, {"name": "t", "shape": [8], "dtype": "int64"}],
    "parameters": [{"name": "l1.weight", "shape": [64, 32]}, {"name": "l1.bias", "shape": [64]},
                   {"name": "l2.weight", "shape": [10, 64]}, {"name": "l2.bias", "shape": [10]}],
    "ops": [{"op": "linear", "module": "l1", "inputs": ["x", "l1.weight", "l1.bias"], "outputs": ["h"]},
            {"op": "relu", "module": "act", "inputs": ["h"], "outputs": ["r"]},
            {"op": "linear", "module": "l2", "inputs": ["r", "l2.weight", "l2.bias"], "outputs": ["logits"]},
            {"op": "cross_entropy", "module": "loss", "inputs": ["logits", "t"], "outputs": ["loss"]}],
    "loss": "loss")" + extra;
}

}  // namespace memsim::testing

#endif  // MEMSIM_TESTS_AUTODIFF_MLP_FIXTURE_H_
