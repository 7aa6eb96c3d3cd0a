#include "sim/options/config_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <toml++/toml.h>

namespace memsim::cli {
namespace {

using nlohmann::json;

constexpr int64_t kMaxConfigBytes = 1 << 20;  // a training config is a few KiB
constexpr int kMaxConfigDepth = 64;            // ... and nests a few levels

/// The deepest nesting of [ and { (in strings and comments too: a real config has no deep
/// brackets anywhere): the parsers and the converters recurse, so a hostile file nested a
/// million levels deep is refused before them.
int NestingDepth(const std::string& text) {
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

std::string Extension(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return "";
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

json FromYaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = FromYaml(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& v : n) j.push_back(FromYaml(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: a string whatever it looks like
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      if (s == "null" || s == "~") return nullptr;
      try {
        size_t end = 0;
        const long long v = std::stoll(s, &end);
        if (end == s.size()) return v;
        const double d = std::stod(s, &end);
        if (end == s.size() && std::isfinite(d)) return d;
      } catch (const std::exception&) {
      }
      return s;
    }
    default:
      return nullptr;
  }
}

json FromToml(const toml::node& n) {
  if (const toml::table* t = n.as_table()) {
    json j = json::object();
    for (const auto& [k, v] : *t) j[std::string(k.str())] = FromToml(v);
    return j;
  }
  if (const toml::array* a = n.as_array()) {
    json j = json::array();
    for (const toml::node& v : *a) j.push_back(FromToml(v));
    return j;
  }
  if (auto v = n.value<bool>(); n.is_boolean()) return *v;
  if (n.is_integer()) return *n.value<int64_t>();
  if (n.is_floating_point()) return *n.value<double>();
  if (n.is_string()) return *n.value<std::string>();
  return "(a TOML date or time)";  // no training option is one
}

}  // namespace

std::string EscapeKey(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}

namespace {

/// Every leaf of |j| as a JSON pointer, in file order (objects keep nlohmann's key order).
void Leaves(const json& j, const std::string& at, std::vector<std::string>* out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) Leaves(v, at + "/" + EscapeKey(k), out);
  } else {
    out->push_back(at);
  }
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

Result<json> ParseConfigText(const std::string& path, const std::string& text, const std::string& kind) {
  if (NestingDepth(text) > kMaxConfigDepth)
    return Status::InvalidArgument(path + ": nested more than " + std::to_string(kMaxConfigDepth) +
                                   " levels deep; is it a training configuration?");
  if (kind == "json") {
    try {
      return json::parse(text);
    } catch (const json::parse_error& e) {
      return Status::ParseError(path + ": not valid JSON (" + std::string(e.what()) + ")");
    }
  }
  if (kind == "yaml") {
    try {
      return FromYaml(YAML::Load(text));
    } catch (const YAML::Exception& e) {
      return Status::ParseError(path + ": line " + std::to_string(e.mark.line + 1) + ": not valid YAML (" + e.msg + ")");
    }
  }
  try {
    return FromToml(toml::parse(text, path));
  } catch (const toml::parse_error& e) {
    return Status::ParseError(path + ": line " + std::to_string(e.source().begin.line) + ": not valid TOML (" +
                              std::string(e.description()) + ")");
  }
}

const json* ConfigTree::Use(const std::string& pointer) {
  used_.push_back(pointer);
  const json::json_pointer p(pointer);
  if (!root_.contains(p)) return nullptr;
  const json& v = root_.at(p);
  if (v.is_null() || (v.is_string() && v.get<std::string>() == "auto")) return nullptr;
  return &v;
}

Status ConfigTree::Error(const std::string& pointer, const std::string& message) const {
  return Status::InvalidArgument(path_ + ": " + pointer + ": " + message);
}

Result<std::optional<int64_t>> ConfigTree::Int(const std::string& pointer, int64_t lo, int64_t hi) {
  const json* v = Use(pointer);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer()) return Error(pointer, "expected an integer, got " + v->dump());
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX} ? INT64_MAX : v->get<int64_t>();
  if (x < lo || x > hi)
    return Error(pointer, std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return std::optional<int64_t>(x);
}

Result<std::optional<double>> ConfigTree::Number(const std::string& pointer) {
  const json* v = Use(pointer);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number() || !std::isfinite(v->get<double>())) return Error(pointer, "expected a number, got " + v->dump());
  return std::optional<double>(v->get<double>());
}

Result<std::optional<bool>> ConfigTree::Bool(const std::string& pointer) {
  const json* v = Use(pointer);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return Error(pointer, "expected true or false, got " + v->dump());
  return std::optional<bool>(v->get<bool>());
}

Result<std::optional<std::string>> ConfigTree::String(const std::string& pointer) {
  const json* v = Use(pointer);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return Error(pointer, "expected a string, got " + v->dump());
  return std::optional<std::string>(v->get<std::string>());
}

void ConfigTree::Skip(const std::string& pointer, std::vector<std::string>* out) {
  for (const std::string& leaf : Unused())
    if (leaf == pointer || (leaf.size() > pointer.size() && leaf.compare(0, pointer.size() + 1, pointer + "/") == 0))
      out->push_back(leaf);
  used_.push_back(pointer);
}

std::vector<std::string> ConfigTree::Unused() const {
  std::vector<std::string> leaves, out;
  Leaves(root_, "", &leaves);
  for (const std::string& leaf : leaves) {
    const bool used = std::any_of(used_.begin(), used_.end(), [&](const std::string& u) {
      return leaf == u || (leaf.size() > u.size() && leaf.compare(0, u.size() + 1, u + "/") == 0);
    });
    if (!used && !leaf.empty()) out.push_back(leaf);
  }
  return out;
}

std::string ConfigFile::Describe() const {
  std::string args;
  for (const auto& [flag, value] : options) args += " " + flag + (value.empty() ? "" : " " + value);
  const bool vowel = !format.empty() && std::string("AEIOUaeiou").find(format[0]) != std::string::npos;
  std::string out = path + ": read as " + (vowel ? "an " : "a ") + format + " config:" + (args.empty() ? " no memsim option" : args);
  if (!not_modelled.empty()) out += "; not modelled: " + Join(not_modelled);
  if (!unknown.empty()) out += "; unknown keys, ignored: " + Join(unknown);
  if (!no_effect.empty()) out += "; no effect on a step's memory: " + Join(no_effect);
  return out;
}

Result<ConfigFile> ReadConfigFile(const std::string& path, int64_t world) {
  const std::string ext = Extension(path);
  const std::string kind = ext == "json" ? "json" : ext == "yaml" || ext == "yml" ? "yaml" : ext == "toml" ? "toml" : "";
  if (kind.empty())
    return Status::InvalidArgument(path + ": --config takes a .json (DeepSpeed, TrainingArguments), .yaml (accelerate) "
                                   "or .toml (torchtitan) file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open file");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxConfigBytes)
      return Status::InvalidArgument(path + ": larger than 1 MiB; is it a training configuration?");
  }
  MEMSIM_ASSIGN_OR_RETURN(json root, ParseConfigText(path, text, kind));
  if (!root.is_object()) return Status::InvalidArgument(path + ": expected a table of keys at the top, got " + std::string(root.type_name()));
  ConfigTree tree(path, std::move(root));
  ConfigFile out;
  out.path = path;
  if (kind == "toml") {
    MEMSIM_RETURN_IF_ERROR(ReadTorchtitan(&tree, &out, world));
  } else if (kind == "yaml") {
    MEMSIM_RETURN_IF_ERROR(ReadAccelerate(&tree, &out));
  } else if (tree.root().contains("per_device_train_batch_size") || tree.root().contains("output_dir")) {
    MEMSIM_RETURN_IF_ERROR(ReadTrainingArguments(&tree, &out));
  } else {
    MEMSIM_RETURN_IF_ERROR(ReadDeepSpeed(&tree, &out));
  }
  out.unknown = tree.Unused();
  return out;
}

Result<std::vector<std::string>> ExpandConfigFiles(const std::vector<std::string>& args,
                                                   std::vector<std::string>* notes) {
  auto gives = [&](const std::string& flag) {
    return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
      return a == flag || a.rfind(flag + "=", 0) == 0;
    });
  };
  int64_t world = 0;  // --world N (one value): the GPUs, for a torchtitan config
  for (size_t i = 0; i < args.size(); ++i) {
    std::string w = args[i] == "--world" && i + 1 < args.size() ? args[i + 1]
                    : args[i].rfind("--world=", 0) == 0   ? args[i].substr(8) : "";
    if (!w.empty() && w.size() < 8 && w.find_first_not_of("0123456789") == std::string::npos) world = std::stoll(w);
  }
  bool drop_world = false;
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return Status::InvalidArgument("--config needs a file: --config ds_config.json");
      path = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
    } else {
      out.push_back(args[i]);
      continue;
    }
    MEMSIM_ASSIGN_OR_RETURN(ConfigFile file, ReadConfigFile(path, world));
    drop_world |= file.format == "torchtitan" && world > 0;
    std::vector<std::string> overridden;
    for (const auto& [flag, value] : file.options) {
      if (gives(flag)) {
        if (std::find(overridden.begin(), overridden.end(), flag) == overridden.end()) overridden.push_back(flag);
        continue;
      }
      out.push_back(flag);
      if (!value.empty()) out.push_back(value);
    }
    std::string note = file.Describe();
    if (!overridden.empty()) note += "; the command line's own " + Join(overridden) + " kept";
    notes->push_back(note);
  }
  if (drop_world) {  // the GPUs are in --mesh now
    std::vector<std::string> kept;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == "--world") { ++i; continue; }
      if (out[i].rfind("--world=", 0) != 0) kept.push_back(out[i]);
    }
    out = kept;
  }
  return out;
}

}  // namespace memsim::cli
