// A safe reader for Python pickles that hold plain data only (dict, list, tuple, set, str,
// bytes, int, float, bool, None), as written by torch.cuda.memory._dump_snapshot(). Any opcode
// that would import or call (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*,
// PERSID, ...) is refused. Robust to hostile input: truncation, bad opcodes, huge length
// claims and deep or cyclic nesting give a Status, never a crash; memory stays O(file size).
// A PickleDocument owns every value; values are immutable after parsing. Thread-compatible.
#ifndef MEMSIM_SIM_REPLAY_PICKLE_H_
#define MEMSIM_SIM_REPLAY_PICKLE_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/util/status.h"

namespace memsim {

class PyValue {
 public:
  enum class Kind : uint8_t {
    kNone,
    kBool,
    kInt,
    kBigInt,
    kFloat,
    kStr,
    kBytes,
    kList,
    kTuple,
    kDict,
    kSet
  };

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_str() const { return kind_ == Kind::kStr; }
  bool is_sequence() const {
    return kind_ == Kind::kList || kind_ == Kind::kTuple || kind_ == Kind::kSet;
  }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  ///< kInt / kBool
  double as_float() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& as_str() const { return str_; }  ///< kStr (UTF-8), kBytes, kBigInt (LE bytes)
  const std::vector<const PyValue*>& items() const { return items_; }  ///< list / tuple / set
  const std::vector<std::pair<const PyValue*, const PyValue*>>& entries() const { return entries_; }

  /// Dict lookup by str key (the last duplicate wins, as in Python); nullptr if absent.
  const PyValue* Get(std::string_view key) const;
  /// Python type name ("dict", "int", ...), for error messages.
  std::string_view TypeName() const;

 private:
  friend class PickleParser;
  Kind kind_ = Kind::kNone;
  mutable int32_t depth_ = 0;  ///< nesting depth, filled by the parser's check (-1 = visiting)
  int64_t int_ = 0;
  double float_ = 0.0;
  std::string str_;
  std::vector<const PyValue*> items_;
  std::vector<std::pair<const PyValue*, const PyValue*>> entries_;
};

struct PickleLimits {
  int max_depth = 100;                     ///< container nesting
  int64_t max_bytes = int64_t{512} << 20;  ///< input size; memory use is linear in it
  /// Values created per input byte are bounded: at most size / bytes_per_value + 4096 values
  /// (real snapshots create one per 12-25 bytes), so 10 MB of ']' cannot take gigabytes.
  int64_t bytes_per_value = 4;
};

/// Owns the values of one parsed pickle.
class PickleDocument {
 public:
  const PyValue& root() const { return *root_; }

 private:
  friend class PickleParser;
  std::deque<PyValue> values_;
  const PyValue* root_ = nullptr;
};

/// Parses |data|. Errors are ParseError("offset N: ...").
Result<PickleDocument> ParsePickle(std::string_view data, const PickleLimits& limits = {});

}  // namespace memsim

#endif  // MEMSIM_SIM_REPLAY_PICKLE_H_
