// memsim's version, one place for the command line (`memsim --version`), the Python module
// (`memsim.__version__`) and the wheel's metadata (pyproject.toml reads it with a regex).
#ifndef MEMSIM_SIM_VERSION_H_
#define MEMSIM_SIM_VERSION_H_

namespace memsim {

inline constexpr char kMemsimVersion[] = "0.1";

}  // namespace memsim

#endif  // MEMSIM_SIM_VERSION_H_
