#include "sim/allocator/alloc_config.h"

#include <bit>
#include <charconv>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "lib/util/text_limits.h"

namespace memsim {
namespace {

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int Log2Floor(uint64_t v) { return 63 - std::countl_zero(v); }

// Splits like PyTorch's lexArgs: ',', ':', '[' and ']' are tokens of their own; spaces around
// them vanish. A space *inside* a value ("[1:4 2:8]", read as "42" by a plain lexer) is refused.
Result<std::vector<std::string>> Lex(std::string_view conf) {
  std::vector<std::string> tokens;
  std::string buf;
  bool space_after_word = false;
  for (char c : conf) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!buf.empty()) tokens.push_back(std::move(buf));
      buf.clear();
      space_after_word = false;
      tokens.emplace_back(1, c);
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space_after_word = !buf.empty();
    } else {
      if (space_after_word)
        return Status::InvalidArgument("alloc-conf: unexpected space after '" + buf +
                                       "' (entries are separated by ',', e.g. [1:4,2:8])");
      buf.push_back(c);
    }
  }
  if (!buf.empty()) tokens.push_back(std::move(buf));
  return tokens;
}

class Parser {
 public:
  explicit Parser(std::vector<std::string> tokens) : t_(std::move(tokens)) {}

  Status Run(AllocatorConfig* c) {
    while (i_ < t_.size()) {
      const std::string key = t_[i_];
      if (key == ",") {  // tolerate empty entries ("a:1,,b:2"), as PyTorch does
        ++i_;
        continue;
      }
      if (key == ":" || key == "[" || key == "]") return Err("unexpected '" + key + "'");
      if (const size_t eq = key.find('='); eq != std::string::npos)  // PYTORCH_ALLOC_CONF takes key:value
        return Err("'" + key + "': write key:value, e.g. " + key.substr(0, eq) + ":" + key.substr(eq + 1));
      ++i_;
      MEMSIM_RETURN_IF_ERROR(Expect(key, ":"));
      if (key == "max_split_size_mb") {
        MEMSIM_ASSIGN_OR_RETURN(int64_t mb, Size(key));
        if (mb < kLargeBuffer / kMiB) return Bad(key, mb, "must be >= 20");
        c->max_split_size = mb > INT64_MAX / kMiB ? kUnlimitedSplitSize : mb * kMiB;
      } else if (key == "max_non_split_rounding_mb") {
        MEMSIM_ASSIGN_OR_RETURN(int64_t mb, Size(key));
        if (mb < kLargeBuffer / kMiB) return Bad(key, mb, "must be >= 20");
        if (mb > INT64_MAX / kMiB) return Bad(key, mb, "too large");
        c->max_non_split_rounding_size = mb * kMiB;
      } else if (key == "large_segment_size_mb") {
        MEMSIM_ASSIGN_OR_RETURN(int64_t mb, Size(key));
        if (mb <= kMinLargeAlloc / kMiB || mb > (int64_t{1} << 30))
          return Bad(key, mb, "must be > 10 (MiB)");
        c->large_segment_size = mb * kMiB;
      } else if (key == "garbage_collection_threshold") {
        MEMSIM_ASSIGN_OR_RETURN(double v, Double(key));
        if (!(v > 0.0 && v < 1.0))
          return Err(key + ": value '" + t_[i_ - 1] + "' must be in (0.0, 1.0)");
        c->garbage_collection_threshold = v;
      } else if (key == "per_process_memory_fraction") {
        MEMSIM_ASSIGN_OR_RETURN(double v, Double(key));
        if (!(v > 0.0 && v <= 1.0))
          return Err(key + ": value '" + t_[i_ - 1] + "' must be in (0.0, 1.0]");
        c->per_process_memory_fraction = v;
      } else if (key == "roundup_power2_divisions") {
        MEMSIM_RETURN_IF_ERROR(Roundup(c));
      } else if (key == "expandable_segments") {
        MEMSIM_ASSIGN_OR_RETURN(c->expandable_segments, Bool(key));
      } else if (key == "release_lock_on_cudamalloc") {
        MEMSIM_ASSIGN_OR_RETURN(c->release_lock_on_cudamalloc, Bool(key));
      } else if (key == "pinned_use_cuda_host_register") {
        MEMSIM_ASSIGN_OR_RETURN(c->pinned_use_cuda_host_register, Bool(key));
      } else if (key == "pinned_use_background_threads" ||
                 key == "graph_capture_record_stream_reuse") {
        MEMSIM_ASSIGN_OR_RETURN(bool ignored, Bool(key));
        (void)ignored;
      } else if (key == "pinned_num_register_threads") {
        MEMSIM_ASSIGN_OR_RETURN(int64_t n, Size(key));
        if (!IsPowerOfTwo(n) || n > 128) return Bad(key, n, "must be a power of two <= 128");
        c->pinned_num_register_threads = n;
      } else if (key == "backend") {
        MEMSIM_ASSIGN_OR_RETURN(std::string v, Word(key));
        if (v == "cudaMallocAsync")
          return Err("backend: 'cudaMallocAsync' is a different allocator and is not modelled");
        if (v != "native") return Err("backend: unknown value '" + v + "' (expected native)");
      } else {
        return Err("unknown option '" + key + "'");
      }
      if (i_ < t_.size()) {
        if (t_[i_] != ",") return Err(key + ": unexpected '" + t_[i_] + "' after the value");
        ++i_;
      }
    }
    return Status::OK();
  }

 private:
  static Status Err(const std::string& msg) {
    return Status::InvalidArgument("alloc-conf: " + Excerpt(msg, 300));
  }
  static Status Bad(const std::string& key, int64_t v, const std::string& why) {
    return Err(key + ": value '" + std::to_string(v) + "' " + why);
  }
  Status Expect(const std::string& key, const char* tok) {
    if (i_ >= t_.size() || t_[i_] != tok)
      return Err(key + ": expected '" + tok + "'" +
                 (i_ < t_.size() ? " but found '" + t_[i_] + "'" : " at end"));
    ++i_;
    return Status::OK();
  }
  Result<std::string> Word(const std::string& key) {
    if (i_ >= t_.size()) return Err(key + ": missing value");
    const std::string& w = t_[i_];
    if (w == "," || w == ":" || w == "[" || w == "]")
      return Err(key + ": missing value before '" + w + "'");
    ++i_;
    return w;
  }
  Result<int64_t> Size(const std::string& key) {
    MEMSIM_ASSIGN_OR_RETURN(std::string w, Word(key));
    return ParseSize(key, w);
  }
  static Result<int64_t> ParseSize(const std::string& key, const std::string& w) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc() || p != w.data() + w.size() || v < 0)
      return Err(key + ": value '" + w + "' is not a non-negative integer");
    return v;
  }
  Result<double> Double(const std::string& key) {
    MEMSIM_ASSIGN_OR_RETURN(std::string w, Word(key));
    char* end = nullptr;
    double v = std::strtod(w.c_str(), &end);
    if (end != w.c_str() + w.size()) return Err(key + ": value '" + w + "' is not a number");
    return v;
  }
  Result<bool> Bool(const std::string& key) {
    MEMSIM_ASSIGN_OR_RETURN(std::string w, Word(key));
    if (w == "True" || w == "true") return true;
    if (w == "False" || w == "false") return false;
    return Err(key + ": value '" + w + "' must be True or False");
  }
  Status Roundup(AllocatorConfig* c) {
    const std::string key = "roundup_power2_divisions";
    auto& div = c->roundup_power2_divisions;
    if (i_ < t_.size() && t_[i_] == "[") {
      ++i_;
      bool first = true;
      int last_index = -1;
      while (true) {
        if (i_ >= t_.size()) return Err(key + ": missing ']'");
        if (t_[i_] == "]") {
          ++i_;
          break;
        }
        if (t_[i_] == ",") {
          ++i_;
          continue;
        }
        const std::string bound = t_[i_++];
        MEMSIM_RETURN_IF_ERROR(Expect(key, ":"));
        MEMSIM_ASSIGN_OR_RETURN(int64_t value, Size(key));
        if (value != 0 && !IsPowerOfTwo(value))
          return Err(key + ": divisions '" + std::to_string(value) +
                     "' must be a power of 2 (or 0)");
        if (bound == ">") {
          for (int k = last_index + 1; k < kRoundupIntervals; ++k) div[k] = value;
        } else {
          MEMSIM_ASSIGN_OR_RETURN(int64_t mb, ParseSize(key, bound));
          if (!IsPowerOfTwo(mb))
            return Err(key + ": interval '" + bound + "' must be a power of 2 (MiB)");
          int index = std::min(Log2Floor(static_cast<uint64_t>(mb)), kRoundupIntervals - 1);
          if (first) {
            for (int k = 0; k < index; ++k) div[k] = value;
            first = false;
          }
          div[index] = value;
          last_index = index;
        }
      }
    } else {
      MEMSIM_ASSIGN_OR_RETURN(int64_t value, Size(key));
      if (value != 0 && !IsPowerOfTwo(value))
        return Err(key + ": divisions '" + std::to_string(value) + "' must be a power of 2 (or 0)");
      div.fill(value);
    }
    return Status::OK();
  }

  std::vector<std::string> t_;
  size_t i_ = 0;
};

}  // namespace

std::string AllocatorConfig::ToString() const {
  std::ostringstream out;
  const char* sep = "";
  auto put = [&](const std::string& s) {
    out << sep << s;
    sep = ",";
  };
  if (expandable_segments) put("expandable_segments:True");
  if (max_split_size != kUnlimitedSplitSize)
    put("max_split_size_mb:" + std::to_string(max_split_size / kMiB));
  if (max_non_split_rounding_size != kLargeBuffer)
    put("max_non_split_rounding_mb:" + std::to_string(max_non_split_rounding_size / kMiB));
  if (large_segment_size != kLargeBuffer)
    put("large_segment_size_mb:" + std::to_string(large_segment_size / kMiB));
  bool any_div = false;
  for (int64_t d : roundup_power2_divisions) any_div |= d != 0;
  if (any_div) {
    std::string s = "roundup_power2_divisions:[";
    for (int k = 0; k < kRoundupIntervals; ++k) {
      if (k) s += ",";
      s += std::to_string(int64_t{1} << k) + ":" + std::to_string(roundup_power2_divisions[k]);
    }
    put(s + "]");
  }
  if (garbage_collection_threshold > 0) {
    std::ostringstream g;
    g << garbage_collection_threshold;
    put("garbage_collection_threshold:" + g.str());
  }
  if (per_process_memory_fraction < 1.0) {
    std::ostringstream g;
    g << per_process_memory_fraction;
    put("per_process_memory_fraction:" + g.str());
  }
  return out.str();
}

Result<AllocatorConfig> ParseAllocConf(std::string_view conf) {
  AllocatorConfig c;
  MEMSIM_ASSIGN_OR_RETURN(std::vector<std::string> tokens, Lex(conf));
  Parser p(std::move(tokens));
  MEMSIM_RETURN_IF_ERROR(p.Run(&c));
  return c;
}

int64_t RoundSizeByDivisions(int64_t size, int64_t divisions) {
  // See Note [Caching allocator rounding]: the next of |divisions| steps of size's power-of-two
  // interval.
  if (IsPowerOfTwo(size)) return size;
  const int64_t floor2 = int64_t{1} << Log2Floor(static_cast<uint64_t>(size));
  const int64_t step = floor2 >> Log2Floor(static_cast<uint64_t>(divisions));
  if (step == 0) return floor2 << 1;
  const int64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

int64_t SegmentSizeFor(int64_t rounded, const AllocatorConfig& config) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return config.large_segment_size;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace memsim
