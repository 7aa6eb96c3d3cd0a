#include "sim/gpus.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "lib/util/nearest.h"

namespace memsim {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kCublasDefault = 8519680;  // :4096:2:16:8
constexpr int64_t kCublasHopper = 32 * kMiB;  // compute capability 9.0+
// SM counts and threads per SM: the CUDA C++ Programming Guide's compute-capability table and
// each product's datasheet (H100 SXM5: 132 SMs, the count torch.cuda.get_device_properties gave
// on the H100 of tests/data/gpu/h100_2_11).
constexpr GpuSpec kGpus[] = {
    {"T4", 15360 * kMiB, kCublasDefault, "turing", 75, 40, 1024},
    {"V100-16GB", 16160 * kMiB, kCublasDefault, "volta", 70, 80, 2048},
    {"V100-32GB", 32510 * kMiB, kCublasDefault, "volta", 70, 80, 2048},
    {"A10G", 23028 * kMiB, kCublasDefault, "ampere", 86, 80, 1536},
    {"L4", 23034 * kMiB, kCublasDefault, "ada", 89, 58, 1536},
    {"RTX3090", 24576 * kMiB, kCublasDefault, "ampere", 86, 82, 1536},
    {"RTX4090", 24564 * kMiB, kCublasDefault, "ada", 89, 128, 1536},
    {"A100-40GB", 40960 * kMiB, kCublasDefault, "ampere", 80, 108, 2048},
    {"A100-80GB", 81920 * kMiB, kCublasDefault, "ampere", 80, 108, 2048},
    {"H100-80GB", 81559 * kMiB, kCublasHopper, "hopper", 90, 132, 2048},
    {"H100", 81559 * kMiB, kCublasHopper, "hopper", 90, 132, 2048},
    // H200 SXM: 143771 MiB and 132 SMs as nvidia-smi and torch reported on the H200 of
    // tests/data/gpu/h200_2_11_ranks.
    {"H200", 143771 * kMiB, kCublasHopper, "hopper", 90, 132, 2048},
};

/// What torch.cuda.get_device_name() (and nvidia-smi) print for the catalog's GPUs.
constexpr struct {
  std::string_view device_name, gpu;
} kDeviceNames[] = {
    {"Tesla T4", "T4"},
    {"Tesla V100-SXM2-16GB", "V100-16GB"}, {"Tesla V100-PCIE-16GB", "V100-16GB"},
    {"Tesla V100-SXM2-32GB", "V100-32GB"}, {"Tesla V100-PCIE-32GB", "V100-32GB"},
    {"NVIDIA A10G", "A10G"}, {"NVIDIA L4", "L4"},
    {"NVIDIA GeForce RTX 3090", "RTX3090"}, {"NVIDIA GeForce RTX 4090", "RTX4090"},
    {"NVIDIA A100-SXM4-40GB", "A100-40GB"}, {"NVIDIA A100-PCIE-40GB", "A100-40GB"},
    {"NVIDIA A100-SXM4-80GB", "A100-80GB"}, {"NVIDIA A100 80GB PCIe", "A100-80GB"},
    {"NVIDIA H100 80GB HBM3", "H100-80GB"}, {"NVIDIA H100 PCIe", "H100-80GB"},
    {"NVIDIA H200", "H200"},
};

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::optional<GpuSpec> FindGpu(std::string_view name) {
  for (const auto& d : kDeviceNames)
    if (SameName(d.device_name, name)) name = d.gpu;
  for (const GpuSpec& g : kGpus)
    if (SameName(g.name, name)) return g;
  return std::nullopt;
}

std::string NearestGpuName(std::string_view name) {
  std::vector<std::string_view> names;
  for (const GpuSpec& g : kGpus) names.push_back(g.name);
  return NearestName(name, names, /*max_edits=*/3);
}

std::string GpuNames() {
  std::string s;
  for (const GpuSpec& g : kGpus) s += (s.empty() ? "" : ", ") + std::string(g.name);
  return s;
}

}  // namespace memsim
