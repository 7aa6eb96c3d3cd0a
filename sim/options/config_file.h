// Training configurations users already have, read into memsim's own options (`--config FILE`):
// a DeepSpeed JSON, Hugging Face TrainingArguments (JSON) or an accelerate config (YAML), a
// torchtitan TOML. Each format is one file (config_deepspeed.cc, config_hf.cc,
// config_torchtitan.cc) mapping keys to command-line options; every key the mapping does not
// use is named, with why. Note [Config files] in docs/cli.md.
#ifndef MEMSIM_SIM_OPTIONS_CONFIG_FILE_H_
#define MEMSIM_SIM_OPTIONS_CONFIG_FILE_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/util/status.h"

namespace memsim::cli {

/// What a configuration file means in memsim's options.
struct ConfigFile {
  std::string path;
  std::string format;  ///< "DeepSpeed", "TrainingArguments", "accelerate", "torchtitan"
  /// The options, in the order given: {"--zero", "2"}, {"--checkpoint", "@blocks"}, ...
  std::vector<std::pair<std::string, std::string>> options;
  /// Keys that change nothing memsim simulates ("/steps_per_print"), keys it does not model,
  /// each with why ("/zero_optimization/stage3_max_live_parameters (not modelled)"), and keys it
  /// does not know.
  std::vector<std::string> no_effect, not_modelled, unknown;
  /// The line --config prints: what the file was read as, the options, the keys ignored.
  std::string Describe() const;
};

/// Reads |path|: .json (DeepSpeed or TrainingArguments, told apart by their keys), .yaml/.yml
/// (accelerate), .toml (torchtitan). Errors are one line naming the file and the key (a JSON
/// pointer) and the fix.
/// |world|: the command line's --world (0: none), which a torchtitan config may need.
Result<ConfigFile> ReadConfigFile(const std::string& path, int64_t world = 0);

/// |args| (a command's arguments after its name, as the CLI or the Python module builds them)
/// with each `--config FILE` / `--config=FILE` replaced by the options FILE gives, except those
/// |args| give themselves (the command line wins). A --world the file turned into --mesh (the
/// GPUs torchtitan's data_parallel_shard_degree = -1 fills) is dropped. |notes| gets
/// ConfigFile::Describe() per file.
Result<std::vector<std::string>> ExpandConfigFiles(const std::vector<std::string>& args,
                                                   std::vector<std::string>* notes);

// ---- For the format readers (config_*.cc) ----

/// A parsed file as JSON (YAML and TOML converted), with the keys a reader has used.
class ConfigTree {
 public:
  ConfigTree(std::string path, nlohmann::json root) : path_(std::move(path)), root_(std::move(root)) {}
  const std::string& path() const { return path_; }
  const nlohmann::json& root() const { return root_; }
  /// The value at |pointer| ("/zero_optimization/stage"), marked used; null when absent, or when
  /// it is the string "auto" (Hugging Face's integration fills it: left to memsim's options).
  const nlohmann::json* Use(const std::string& pointer);
  /// Typed reads; absent: nullopt; a wrong type or a value out of [lo, hi]: an error naming the key.
  Result<std::optional<int64_t>> Int(const std::string& pointer, int64_t lo, int64_t hi);
  Result<std::optional<double>> Number(const std::string& pointer);
  Result<std::optional<bool>> Bool(const std::string& pointer);
  Result<std::optional<std::string>> String(const std::string& pointer);
  /// An error "FILE: POINTER: MESSAGE".
  Status Error(const std::string& pointer, const std::string& message) const;
  /// Lists in |out| each key under |pointer| (or |pointer| itself) that no reader used, and marks
  /// them used: the keys that change nothing.
  void Skip(const std::string& pointer, std::vector<std::string>* out);
  /// The leaf keys (JSON pointers) no reader used, in file order.
  std::vector<std::string> Unused() const;

 private:
  std::string path_;
  nlohmann::json root_;
  std::vector<std::string> used_;  ///< pointers used (a key's descendants count as used)
};

// One reader per format: fills |out|'s options and key lists from |tree|.
Status ReadDeepSpeed(ConfigTree* tree, ConfigFile* out);          // config_deepspeed.cc
Status ReadTrainingArguments(ConfigTree* tree, ConfigFile* out);  // config_hf.cc
Status ReadAccelerate(ConfigTree* tree, ConfigFile* out);         // config_hf.cc
/// |world|: the number of GPUs (--world), for data_parallel_shard_degree = -1; 0 = not given.
Status ReadTorchtitan(ConfigTree* tree, ConfigFile* out, int64_t world);  // config_torchtitan.cc

/// |key| as one JSON pointer token ("~" → "~0", "/" → "~1").
std::string EscapeKey(const std::string& key);

/// Parses |path| as JSON, YAML or TOML into JSON (one-line errors naming the file and line).
Result<nlohmann::json> ParseConfigText(const std::string& path, const std::string& text, const std::string& kind);

}  // namespace memsim::cli

#endif  // MEMSIM_SIM_OPTIONS_CONFIG_FILE_H_
