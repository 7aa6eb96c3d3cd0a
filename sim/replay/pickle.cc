#include "sim/replay/pickle.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "lib/util/text_limits.h"

namespace memsim {

const PyValue* PyValue::Get(std::string_view key) const {
  if (kind_ != Kind::kDict) return nullptr;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->first->kind_ == Kind::kStr && it->first->str_ == key) return it->second;
  }
  return nullptr;
}

std::string_view PyValue::TypeName() const {
  switch (kind_) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
    case Kind::kBigInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
  }
  return "?";
}

namespace {

const char* RefusedOpcodeName(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

}  // namespace

class PickleParser {
 public:
  PickleParser(std::string_view data, const PickleLimits& limits)
      : d_(data),
        limits_(limits),
        max_values_(static_cast<int64_t>(data.size()) / std::max<int64_t>(limits.bytes_per_value, 1) +
                    4096) {}

  Result<PickleDocument> Run() {
    if (static_cast<int64_t>(d_.size()) > limits_.max_bytes)
      return Status::ParseError("pickle too large (" + std::to_string(d_.size()) + " bytes)");
    while (true) {
      if (pos_ >= d_.size()) return Err(pos_, "truncated pickle: no STOP opcode");
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(d_[pos_++]);
      if (op == '.') {  // STOP
        if (stack_.size() != 1 || !marks_.empty())
          return Err(at, "STOP with " + std::to_string(stack_.size()) + " values on the stack");
        doc_.root_ = stack_.back();
        MEMSIM_RETURN_IF_ERROR(CheckDepth());
        return std::move(doc_);
      }
      Status st = Step(op, at);
      if (!st.ok()) return st;
      if (static_cast<int64_t>(doc_.values_.size()) > max_values_)
        return Err(at, "more values than a pickle of " + std::to_string(d_.size()) +
                           " bytes may hold (" + std::to_string(max_values_) + ")");
    }
  }

 private:
  using Kind = PyValue::Kind;

  static Status Err(size_t at, const std::string& msg) {
    // Messages quote bytes of the file (a text opcode's line): at most an excerpt of them.
    return Status::ParseError("offset " + std::to_string(at) + ": " + Excerpt(msg, 200));
  }
  PyValue* New(Kind k) {
    doc_.values_.emplace_back();
    doc_.values_.back().kind_ = k;
    return &doc_.values_.back();
  }
  Status Need(size_t n, size_t at) {
    if (d_.size() - pos_ < n) return Err(at, "truncated pickle: opcode argument runs past the end");
    return Status::OK();
  }
  uint64_t ReadLE(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(d_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  Result<std::string_view> ReadLine(size_t at) {
    const size_t nl = d_.find('\n', pos_);
    if (nl == std::string_view::npos) return Err(at, "truncated pickle: missing newline");
    std::string_view line = d_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return line;
  }
  Result<PyValue*> Pop(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return Err(at, "stack underflow");
    PyValue* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Result<PyValue*> Top(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return Err(at, "stack underflow");
    return stack_.back();
  }
  // Pops everything above the last MARK.
  Result<std::vector<PyValue*>> PopMark(size_t at) {
    if (marks_.empty()) return Err(at, "no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyValue*> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  Status PushString(Kind k, size_t n, size_t at) {
    MEMSIM_RETURN_IF_ERROR(Need(n, at));  // never allocate more than the file holds
    PyValue* v = New(k);
    v->str_.assign(d_.data() + pos_, n);
    pos_ += n;
    stack_.push_back(v);
    return Status::OK();
  }
  Status PushInt(int64_t i, Kind k = Kind::kInt) {
    PyValue* v = New(k);
    v->int_ = i;
    stack_.push_back(v);
    return Status::OK();
  }
  Status PushLong(size_t n, size_t at) {
    MEMSIM_RETURN_IF_ERROR(Need(n, at));
    if (n <= 8) {
      uint64_t u = ReadLE(n);
      if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);  // sign-extend
      return PushInt(static_cast<int64_t>(u));
    }
    return PushString(Kind::kBigInt, n, at);
  }
  Status AddToDict(PyValue* dict, const std::vector<PyValue*>& kv, size_t at) {
    if (dict->kind_ != Kind::kDict)
      return Err(at, "SETITEM(S) on a " + std::string(dict->TypeName()));
    if (kv.size() % 2 != 0) return Err(at, "SETITEMS with an odd number of values");
    for (size_t k = 0; k < kv.size(); k += 2) {
      const Kind kk = kv[k]->kind_;
      if (kk == Kind::kList || kk == Kind::kDict || kk == Kind::kSet)
        return Err(at,
                   std::string("unhashable dict key of type ") + std::string(kv[k]->TypeName()));
      dict->entries_.emplace_back(kv[k], kv[k + 1]);
    }
    return Status::OK();
  }
  Status AddToSeq(PyValue* seq, const std::vector<PyValue*>& items, size_t at, bool set) {
    if (set ? seq->kind_ != Kind::kSet : seq->kind_ != Kind::kList)
      return Err(at, std::string(set ? "ADDITEMS" : "APPEND(S)") + " on a " +
                         std::string(seq->TypeName()));
    seq->items_.insert(seq->items_.end(), items.begin(), items.end());
    return Status::OK();
  }
  Status Memo(uint64_t idx, size_t at) {
    MEMSIM_ASSIGN_OR_RETURN(PyValue * v, Top(at));
    memo_[idx] = v;
    return Status::OK();
  }
  Status Fetch(uint64_t idx, size_t at) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) return Err(at, "memo key " + std::to_string(idx) + " not found");
    stack_.push_back(it->second);
    return Status::OK();
  }
  Result<int64_t> ParseDecimal(std::string_view s, size_t at) {
    std::string t(s);
    if (!t.empty() && t.back() == 'L') t.pop_back();
    if (t.empty()) return Err(at, "empty integer");
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (end != t.c_str() + t.size() || errno != 0) return Err(at, "bad integer '" + Excerpt(t) + "'");
    return static_cast<int64_t>(v);
  }

  Status Step(uint8_t op, size_t at) {
    if (const char* name = RefusedOpcodeName(op)) {
      return Err(at, std::string("opcode ") + name +
                         " would import or call Python code; only plain data is accepted");
    }
    switch (op) {
      case 0x80: {  // PROTO
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        const uint64_t proto = ReadLE(1);
        if (proto > 5) return Err(at, "unsupported pickle protocol " + std::to_string(proto));
        return Status::OK();
      }
      case 0x95: {  // FRAME: a hint only
        MEMSIM_RETURN_IF_ERROR(Need(8, at));
        const uint64_t n = ReadLE(8);
        if (n > d_.size() - pos_)
          return Err(at, "FRAME length " + std::to_string(n) + " exceeds the file");
        return Status::OK();
      }
      case '(':
        marks_.push_back(stack_.size());
        return Status::OK();
      case '0':
        return Pop(at).status();
      case '1':
        return PopMark(at).status();
      case '2': {
        MEMSIM_ASSIGN_OR_RETURN(PyValue * v, Top(at));
        stack_.push_back(v);
        return Status::OK();
      }
      case 'N':
        stack_.push_back(New(Kind::kNone));
        return Status::OK();
      case 0x88:
        return PushInt(1, Kind::kBool);
      case 0x89:
        return PushInt(0, Kind::kBool);
      case 'J':
        MEMSIM_RETURN_IF_ERROR(Need(4, at));
        return PushInt(static_cast<int32_t>(ReadLE(4)));
      case 'K':
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        return PushInt(static_cast<int64_t>(ReadLE(1)));
      case 'M':
        MEMSIM_RETURN_IF_ERROR(Need(2, at));
        return PushInt(static_cast<int64_t>(ReadLE(2)));
      case 0x8a:
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        return PushLong(ReadLE(1), at);
      case 0x8b: {
        MEMSIM_RETURN_IF_ERROR(Need(4, at));
        const int32_t n = static_cast<int32_t>(ReadLE(4));
        if (n < 0) return Err(at, "LONG4 with negative length");
        return PushLong(static_cast<size_t>(n), at);
      }
      case 'I':
      case 'L': {  // text ints (protocol 0); "I00"/"I01" are False/True
        MEMSIM_ASSIGN_OR_RETURN(std::string_view line, ReadLine(at));
        if (op == 'I' && (line == "00" || line == "01")) return PushInt(line == "01", Kind::kBool);
        MEMSIM_ASSIGN_OR_RETURN(int64_t v, ParseDecimal(line, at));
        return PushInt(v);
      }
      case 'F': {
        MEMSIM_ASSIGN_OR_RETURN(std::string_view line, ReadLine(at));
        std::string t(line);
        char* end = nullptr;
        const double v = std::strtod(t.c_str(), &end);
        if (t.empty() || end != t.c_str() + t.size()) return Err(at, "bad float '" + Excerpt(t) + "'");
        PyValue* f = New(Kind::kFloat);
        f->float_ = v;
        stack_.push_back(f);
        return Status::OK();
      }
      case 'G': {
        MEMSIM_RETURN_IF_ERROR(Need(8, at));
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k)
          bits = (bits << 8) | static_cast<uint8_t>(d_[pos_ + k]);  // big-endian
        pos_ += 8;
        PyValue* f = New(Kind::kFloat);
        std::memcpy(&f->float_, &bits, sizeof bits);
        stack_.push_back(f);
        return Status::OK();
      }
      case 0x8c:
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        return PushString(Kind::kStr, ReadLE(1), at);
      case 'X':
        MEMSIM_RETURN_IF_ERROR(Need(4, at));
        return PushString(Kind::kStr, ReadLE(4), at);
      case 0x8d:
        MEMSIM_RETURN_IF_ERROR(Need(8, at));
        return PushString(Kind::kStr, ReadLE(8), at);
      case 'C':
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        return PushString(Kind::kBytes, ReadLE(1), at);
      case 'B':
        MEMSIM_RETURN_IF_ERROR(Need(4, at));
        return PushString(Kind::kBytes, ReadLE(4), at);
      case 0x8e:
      case 0x96:
        MEMSIM_RETURN_IF_ERROR(Need(8, at));
        return PushString(Kind::kBytes, ReadLE(8), at);
      case 'U':
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        return PushString(Kind::kBytes, ReadLE(1), at);
      case 'T': {
        MEMSIM_RETURN_IF_ERROR(Need(4, at));
        const int32_t n = static_cast<int32_t>(ReadLE(4));
        if (n < 0) return Err(at, "BINSTRING with negative length");
        return PushString(Kind::kBytes, static_cast<size_t>(n), at);
      }
      case ']':
        stack_.push_back(New(Kind::kList));
        return Status::OK();
      case ')':
        stack_.push_back(New(Kind::kTuple));
        return Status::OK();
      case '}':
        stack_.push_back(New(Kind::kDict));
        return Status::OK();
      case 0x8f:
        stack_.push_back(New(Kind::kSet));
        return Status::OK();
      case 'l':
      case 't':
      case 0x91: {  // LIST, TUPLE, FROZENSET from MARK
        MEMSIM_ASSIGN_OR_RETURN(std::vector<PyValue*> items, PopMark(at));
        PyValue* v = New(op == 'l' ? Kind::kList : op == 't' ? Kind::kTuple : Kind::kSet);
        v->items_.assign(items.begin(), items.end());
        stack_.push_back(v);
        return Status::OK();
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84;
        std::vector<PyValue*> items(n);
        for (size_t k = n; k-- > 0;) {
          MEMSIM_ASSIGN_OR_RETURN(items[k], Pop(at));
        }
        PyValue* v = New(Kind::kTuple);
        v->items_.assign(items.begin(), items.end());
        stack_.push_back(v);
        return Status::OK();
      }
      case 'd': {
        MEMSIM_ASSIGN_OR_RETURN(std::vector<PyValue*> kv, PopMark(at));
        PyValue* v = New(Kind::kDict);
        MEMSIM_RETURN_IF_ERROR(AddToDict(v, kv, at));
        stack_.push_back(v);
        return Status::OK();
      }
      case 'a': {
        MEMSIM_ASSIGN_OR_RETURN(PyValue * item, Pop(at));
        MEMSIM_ASSIGN_OR_RETURN(PyValue * list, Top(at));
        return AddToSeq(list, {item}, at, false);
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        MEMSIM_ASSIGN_OR_RETURN(std::vector<PyValue*> items, PopMark(at));
        MEMSIM_ASSIGN_OR_RETURN(PyValue * seq, Top(at));
        return AddToSeq(seq, items, at, op == 0x90);
      }
      case 's': {
        MEMSIM_ASSIGN_OR_RETURN(PyValue * value, Pop(at));
        MEMSIM_ASSIGN_OR_RETURN(PyValue * key, Pop(at));
        MEMSIM_ASSIGN_OR_RETURN(PyValue * dict, Top(at));
        return AddToDict(dict, {key, value}, at);
      }
      case 'u': {
        MEMSIM_ASSIGN_OR_RETURN(std::vector<PyValue*> kv, PopMark(at));
        MEMSIM_ASSIGN_OR_RETURN(PyValue * dict, Top(at));
        return AddToDict(dict, kv, at);
      }
      case 0x94:
        return Memo(memo_.size(), at);  // MEMOIZE
      case 'q':
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        return Memo(ReadLE(1), at);
      case 'r':
        MEMSIM_RETURN_IF_ERROR(Need(4, at));
        return Memo(ReadLE(4), at);
      case 'h':
        MEMSIM_RETURN_IF_ERROR(Need(1, at));
        return Fetch(ReadLE(1), at);
      case 'j':
        MEMSIM_RETURN_IF_ERROR(Need(4, at));
        return Fetch(ReadLE(4), at);
      case 'p':
      case 'g': {
        MEMSIM_ASSIGN_OR_RETURN(std::string_view line, ReadLine(at));
        MEMSIM_ASSIGN_OR_RETURN(int64_t idx, ParseDecimal(line, at));
        if (idx < 0) return Err(at, "negative memo key");
        return op == 'p' ? Memo(static_cast<uint64_t>(idx), at)
                         : Fetch(static_cast<uint64_t>(idx), at);
      }
      case 'S':
      case 'V':
        return Err(at, "text string opcodes of protocol 0 are not supported");
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02x", op);
        return Err(at, std::string("unknown opcode ") + buf);
      }
    }
  }

  // Rejects cycles and nesting deeper than the limit (longest path in the value DAG).
  Status CheckDepth() {
    struct Frame {
      const PyValue* v;
      size_t next;
    };
    std::vector<Frame> path;
    auto children = [](const PyValue* v, size_t k) -> const PyValue* {
      if (v->kind_ == Kind::kDict) {
        return k < 2 * v->entries_.size()
                   ? (k % 2 ? v->entries_[k / 2].second : v->entries_[k / 2].first)
                   : nullptr;
      }
      return k < v->items_.size() ? v->items_[k] : nullptr;
    };
    auto is_container = [](const PyValue* v) {
      return v->kind_ == Kind::kList || v->kind_ == Kind::kTuple || v->kind_ == Kind::kDict ||
             v->kind_ == Kind::kSet;
    };
    if (!is_container(doc_.root_)) return Status::OK();
    doc_.root_->depth_ = -1;
    path.push_back({doc_.root_, 0});
    while (!path.empty()) {
      Frame& f = path.back();
      const PyValue* c = children(f.v, f.next++);
      if (c == nullptr) {
        int d = 1;
        // Depth = 1 + deepest child; children are all finished now.
        for (size_t k = 0;; ++k) {
          const PyValue* ch = children(f.v, k);
          if (!ch) break;
          if (is_container(ch)) d = std::max(d, 1 + ch->depth_);
        }
        if (d > limits_.max_depth)
          return Status::ParseError("pickle nesting deeper than " +
                                    std::to_string(limits_.max_depth));
        f.v->depth_ = d;
        path.pop_back();
        continue;
      }
      if (!is_container(c)) continue;
      if (c->depth_ != 0) {
        if (c->depth_ < 0)
          return Status::ParseError("pickle holds a recursive (self-containing) structure");
        continue;
      }
      if (static_cast<int>(path.size()) >= limits_.max_depth)
        return Status::ParseError("pickle nesting deeper than " +
                                  std::to_string(limits_.max_depth));
      c->depth_ = -1;
      path.push_back({c, 0});
    }
    return Status::OK();
  }

  std::string_view d_;
  PickleLimits limits_;
  int64_t max_values_;
  size_t pos_ = 0;
  PickleDocument doc_;
  std::vector<PyValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyValue*> memo_;
};

Result<PickleDocument> ParsePickle(std::string_view data, const PickleLimits& limits) {
  PickleParser p(data, limits);
  return p.Run();
}

}  // namespace memsim
