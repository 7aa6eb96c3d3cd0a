#include "lib/onnx/const_value.h"

#include <algorithm>
#include <cstring>

#include "lib/util/checked.h"

namespace memsim::onnx_import {

std::string SymInt::ToString() const {
  std::string s;
  for (const std::string& sym : syms) s += (s.empty() ? "" : "*") + sym;
  if (s.empty()) return std::to_string(coeff);
  if (coeff != 1) s += "*" + std::to_string(coeff);
  return s;
}

nlohmann::ordered_json SymInt::ToJson() const {
  if (is_const()) return coeff;
  return ToString();
}

std::optional<SymInt> Mul(const SymInt& a, const SymInt& b) {
  std::optional<int64_t> c = CheckedMul(a.coeff, b.coeff);  // a hostile model may overflow
  if (!c) return std::nullopt;
  SymInt r{*c, a.syms};
  r.syms.insert(r.syms.end(), b.syms.begin(), b.syms.end());
  std::sort(r.syms.begin(), r.syms.end());
  return r;
}

std::optional<SymInt> Div(const SymInt& a, const SymInt& b) {
  if (b.coeff == 0 || (b.coeff == -1 && a.coeff == INT64_MIN) || a.coeff % b.coeff != 0)
    return std::nullopt;
  SymInt r{a.coeff / b.coeff, a.syms};
  for (const std::string& s : b.syms) {
    auto it = std::find(r.syms.begin(), r.syms.end(), s);
    if (it == r.syms.end()) return std::nullopt;
    r.syms.erase(it);
  }
  return r;
}

std::optional<SymInt> AddSub(const SymInt& a, const SymInt& b, bool sub) {
  if (a.syms != b.syms) return std::nullopt;
  int64_t c = 0;
  if (sub ? __builtin_sub_overflow(a.coeff, b.coeff, &c) : __builtin_add_overflow(a.coeff, b.coeff, &c))
    return std::nullopt;
  return SymInt{c, a.syms};
}

std::optional<double> ConstValue::Scalar() const {
  if (numel() != 1) return std::nullopt;
  if (is_float) return floats[0];
  if (!ints[0].is_const()) return std::nullopt;
  return static_cast<double>(ints[0].coeff);
}

std::optional<std::vector<int64_t>> ConstValue::ConstInts() const {
  if (is_float) return std::nullopt;
  std::vector<int64_t> out;
  for (const SymInt& v : ints) {
    if (!v.is_const()) return std::nullopt;
    out.push_back(v.coeff);
  }
  return out;
}

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::optional<std::string> DtypeName(int32_t elem_type) {
  using TP = onnx::TensorProto;
  switch (elem_type) {
    case TP::FLOAT: return "float32";
    case TP::FLOAT16: return "float16";
    case TP::BFLOAT16: return "bfloat16";
    case TP::DOUBLE: return "float64";
    case TP::INT64: return "int64";
    case TP::INT32: return "int32";
    case TP::UINT8: return "uint8";
    case TP::BOOL: return "bool";
    default: return std::nullopt;
  }
}

namespace {

template <typename T>
bool ReadRaw(const std::string& raw, size_t n, std::vector<T>* out) {
  if (raw.size() != n * sizeof(T)) return false;
  out->resize(n);
  if (n > 0) std::memcpy(out->data(), raw.data(), raw.size());
  return true;
}

}  // namespace

std::optional<ConstValue> ReadTensor(const onnx::TensorProto& t, size_t max_elems) {
  using TP = onnx::TensorProto;
  if (t.data_location() == TP::EXTERNAL) return std::nullopt;
  ConstValue v;
  v.elem_type = t.data_type();
  for (int64_t d : t.dims()) {
    if (d < 0) return std::nullopt;
    v.shape.push_back(d);
  }
  int64_t n64 = NumElements(v.shape);
  if (n64 < 0 || static_cast<uint64_t>(n64) > max_elems) return std::nullopt;
  size_t n = static_cast<size_t>(n64);
  const bool raw = t.has_raw_data();
  auto put_ints = [&](const auto& src) {
    if (static_cast<size_t>(src.size()) != n) return false;
    for (auto x : src) v.ints.push_back(SymInt::Const(static_cast<int64_t>(x)));
    return true;
  };
  auto put_floats = [&](const auto& src) {
    if (static_cast<size_t>(src.size()) != n) return false;
    v.is_float = true;
    for (auto x : src) v.floats.push_back(static_cast<double>(x));
    return true;
  };
  bool ok = false;
  switch (t.data_type()) {
    case TP::FLOAT: {
      std::vector<float> f;
      ok = raw ? ReadRaw(t.raw_data(), n, &f) && put_floats(f) : put_floats(t.float_data());
      break;
    }
    case TP::DOUBLE: {
      std::vector<double> f;
      ok = raw ? ReadRaw(t.raw_data(), n, &f) && put_floats(f) : put_floats(t.double_data());
      break;
    }
    case TP::INT64: {
      std::vector<int64_t> i;
      ok = raw ? ReadRaw(t.raw_data(), n, &i) && put_ints(i) : put_ints(t.int64_data());
      break;
    }
    case TP::INT32: {
      std::vector<int32_t> i;
      ok = raw ? ReadRaw(t.raw_data(), n, &i) && put_ints(i) : put_ints(t.int32_data());
      break;
    }
    case TP::BOOL:
    case TP::UINT8:
    case TP::INT8: {
      std::vector<uint8_t> i;
      if (raw) {
        ok = ReadRaw(t.raw_data(), n, &i) && put_ints(i);
        if (ok && t.data_type() == TP::INT8)
          for (SymInt& s : v.ints) s.coeff = static_cast<int8_t>(static_cast<uint8_t>(s.coeff));
      } else {
        ok = put_ints(t.int32_data());
      }
      break;
    }
    default:
      return std::nullopt;
  }
  if (!ok) return std::nullopt;
  return v;
}

}  // namespace memsim::onnx_import
