// The single main() of memsim_bench (bench/CMakeLists.txt globs every bench/*.cc into it).
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
