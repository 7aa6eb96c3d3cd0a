// libFuzzer target: the PYTORCH_CUDA_ALLOC_CONF parser. An accepted config must round-trip
// through its canonical string, and rounding any size with it must not overflow.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "sim/allocator/alloc_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view conf(reinterpret_cast<const char*>(data), size);
  memsim::Result<memsim::AllocatorConfig> c = memsim::ParseAllocConf(conf);
  if (!c.ok()) return 0;
  memsim::Result<memsim::AllocatorConfig> again = memsim::ParseAllocConf(c->ToString());
  if (!again.ok() || again->ToString() != c->ToString()) __builtin_trap();
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{513}, int64_t{3} << 20, int64_t{77} << 30,
                    memsim::kMaxRequestBytes}) {
    const int64_t r = memsim::RoundSize(n, *c);
    if (r < n || memsim::SegmentSizeFor(r, *c) < r) __builtin_trap();
  }
  return 0;
}
