#include "lib/io/optimizer_json.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "lib/util/text_limits.h"

namespace memsim {
namespace {

using nlohmann::json;

constexpr size_t kMaxOps = 100000;  // a recorded step is tens of ops per parameter

class ProgramReader {
 public:
  ProgramReader(const std::string& source) : source_(source) {}

  Status Err(const std::string& ptr, const std::string& msg) const {
    return Status::ParseError(source_ + ": " + Excerpt(ptr, 160) + ": " + Excerpt(msg, 400));
  }

  Result<std::string> Str(const json& o, const char* key, const std::string& ptr) const {
    auto it = o.find(key);
    if (it == o.end() || !it->is_string()) return Err(ptr + "/" + key, "expected a string");
    return it->get<std::string>();
  }

  /// "1", "1/2", "2" (× the parameter's bytes) or "8B".
  Result<OptSize> Size(const std::string& s, const std::string& ptr) const {
    OptSize z;
    std::istringstream in(s);
    int64_t a = 0, b = 1;
    char c = 0;
    if (!(in >> a) || a <= 0 || a > (int64_t{1} << 40)) return Err(ptr, "bad size \"" + s + "\"");
    if (in >> c) {
      if (c == 'B' && !(in >> c)) return OptSize{0, 1, a};
      if (c != '/' || !(in >> b) || b <= 0 || b > 1024 || (in >> c)) return Err(ptr, "bad size \"" + s + "\"");
    }
    z.num = a;
    z.den = b;
    return z;
  }

  /// "alloc SIZE" or "free [prev ](t|s|g)K".
  Result<OptOp> Op(const json& v, const std::string& ptr) const {
    if (!v.is_string()) return Err(ptr, "expected \"alloc SIZE\" or \"free REF\"");
    std::istringstream in(v.get<std::string>());
    std::string verb, w;
    in >> verb >> w;
    OptOp op;
    if (verb == "alloc") {
      op.alloc = true;
      MEMSIM_ASSIGN_OR_RETURN(op.size, Size(w, ptr));
    } else if (verb == "free") {
      if (w == "prev") {
        op.ref.owner = OptRef::Owner::kPrevious;
        in >> w;
      }
      if (w.size() < 2 || (w[0] != 't' && w[0] != 's' && w[0] != 'g') ||
          w.find_first_not_of("0123456789", 1) != std::string::npos || w.size() > 7)
        return Err(ptr, "bad object \"" + w + "\" (expected tK, sK, gK or prev tK / prev sK)");
      if (w[0] == 'g') {
        if (op.ref.owner == OptRef::Owner::kPrevious) return Err(ptr, "\"prev\" applies to tK and sK only");
        op.ref.owner = OptRef::Owner::kGlobal;
      }
      op.ref.state = w[0] == 's';
      op.ref.index = static_cast<uint32_t>(std::stoul(w.substr(1)));
    } else {
      return Err(ptr, "expected \"alloc SIZE\" or \"free REF\", got \"" + v.get<std::string>() + "\"");
    }
    std::string extra;
    if (in >> extra) return Err(ptr, "unexpected \"" + extra + "\"");
    return op;
  }

  Status Ops(const json& o, const char* key, const std::string& ptr, std::vector<OptOp>* out) const {
    auto it = o.find(key);
    if (it == o.end() || !it->is_array()) return Err(ptr + "/" + key, "expected an array");
    if (it->size() > kMaxOps) return Err(ptr + "/" + key, "more than 100000 ops");
    for (size_t i = 0; i < it->size(); ++i) {
      MEMSIM_ASSIGN_OR_RETURN(OptOp op, Op((*it)[i], ptr + "/" + key + "/" + std::to_string(i)));
      out->push_back(op);
    }
    return Status::OK();
  }

  Result<OptProgram> Program(const json& v, const std::string& ptr) const;

 private:
  const std::string& source_;
};

size_t Allocs(const std::vector<OptOp>& ops) {
  size_t n = 0;
  for (const OptOp& o : ops) n += o.alloc;
  return n;
}

Result<OptProgram> ProgramReader::Program(const json& v, const std::string& ptr) const {
  if (!v.is_object()) return Err(ptr, "expected an object with resident, before, body, end");
  OptProgram p;
  auto res = v.find("resident");
  if (res == v.end() || !res->is_array() || res->size() > 64) return Err(ptr + "/resident", "expected an array of sizes");
  for (size_t i = 0; i < res->size(); ++i) {
    std::string at = ptr + "/resident/" + std::to_string(i);
    if (!(*res)[i].is_string()) return Err(at, "expected a size");
    MEMSIM_ASSIGN_OR_RETURN(OptSize z, Size((*res)[i].get<std::string>(), at));
    p.resident.push_back(z);
  }
  MEMSIM_RETURN_IF_ERROR(Ops(v, "before", ptr, &p.before));
  MEMSIM_RETURN_IF_ERROR(Ops(v, "body", ptr, &p.body));
  MEMSIM_RETURN_IF_ERROR(Ops(v, "end", ptr, &p.end));
  // Every object freed once: in its own iteration, or carried (freed in the next parameter's
  // iteration and, for the last parameter, after the loop), or never (it is state after the step).
  const size_t globals = Allocs(p.before), temps = Allocs(p.body);
  std::set<std::pair<bool, uint32_t>> own, carried, at_end;
  std::set<uint32_t> globals_freed;
  size_t made = 0;
  auto check = [&](const std::vector<OptOp>& ops, const char* key, bool in_before, bool in_end) -> Status {
    made = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const OptOp& o = ops[i];
      std::string at = ptr + "/" + key + "/" + std::to_string(i);
      if (o.alloc) {
        if (in_end) return Err(at, "allocations after the loop are not supported");
        ++made;
        continue;
      }
      const OptRef& r = o.ref;
      if (r.owner == OptRef::Owner::kGlobal) {
        if (r.index >= (in_before ? made : globals)) return Err(at, "frees g" + std::to_string(r.index) + ", which is not made yet");
        if (!in_before && !in_end) return Err(at, "the loop frees an object made before it (not supported)");
        if (!globals_freed.insert(r.index).second) return Err(at, "g" + std::to_string(r.index) + " is freed twice");
        continue;
      }
      if (in_before) return Err(at, "before the loop only gK objects exist");
      const size_t limit = r.state ? p.resident.size() : (in_end || r.owner == OptRef::Owner::kPrevious) ? temps : made;
      if (r.index >= limit) return Err(at, std::string("frees ") + (r.state ? "s" : "t") + std::to_string(r.index) + ", which does not exist there");
      auto key2 = std::make_pair(r.state, r.index);
      auto& set = in_end ? at_end : r.owner == OptRef::Owner::kPrevious ? carried : own;
      if (!set.insert(key2).second) return Err(at, std::string(r.state ? "s" : "t") + std::to_string(r.index) + " is freed twice");
    }
    return Status::OK();
  };
  MEMSIM_RETURN_IF_ERROR(check(p.before, "before", true, false));
  MEMSIM_RETURN_IF_ERROR(check(p.body, "body", false, false));
  MEMSIM_RETURN_IF_ERROR(check(p.end, "end", false, true));
  for (const auto& k : own)
    if (carried.count(k) || at_end.count(k))
      return Err(ptr + "/body", std::string(k.first ? "s" : "t") + std::to_string(k.second) + " is freed in its own iteration and again later");
  if (carried != at_end)
    return Err(ptr + "/end", "the objects freed after the last parameter must be those the next parameter's iteration frees (\"free prev ...\")");
  p.survives.assign(temps, true);
  for (const auto& [state, index] : own)
    if (!state) p.survives[index] = false;
  for (const auto& [state, index] : carried)
    if (!state) p.survives[index] = false;
  return p;
}

/// The sizes of the state a parameter holds after a step of |p| (Note [Recorded optimizers]):
/// its resident state when the step replaces none of it in place, else the state the step makes
/// (its surviving allocations, in order) when it frees all of the resident state; a step that
/// frees part of its state, or frees its state and makes none, is an error naming |ptr|.
Result<std::vector<OptSize>> StateAfter(const OptProgram& p, const ProgramReader& r, const std::string& ptr) {
  std::set<uint32_t> freed;
  for (const std::vector<OptOp>* ops : {&p.body, &p.end})
    for (const OptOp& o : *ops)
      if (!o.alloc && o.ref.state) freed.insert(o.ref.index);
  std::vector<OptSize> made;
  size_t k = 0;
  for (const OptOp& o : p.body)
    if (o.alloc && p.survives[k++]) made.push_back(o.size);
  if (freed.empty() && made.empty()) return p.resident;
  if (freed.size() != p.resident.size())
    return r.Err(ptr, "the step frees " + std::to_string(freed.size()) + " of its " + std::to_string(p.resident.size()) +
                          " state tensors: a step must replace all of its state or none of it");
  if (made.empty())
    return r.Err(ptr, "the step frees its " + std::to_string(p.resident.size()) +
                          " state tensors and makes none to replace them: the next step would free them again");
  return made;  // compared with the steady step's resident state by the caller
}

}  // namespace

Result<OptimizerProgram> ParseOptimizerProgram(const json& v, const std::string& source, const std::string& ptr) {
  ProgramReader r(source);
  if (!v.is_object()) return r.Err(ptr, "expected an object (name, source, first_step, steady_step)");
  OptimizerProgram p;
  MEMSIM_ASSIGN_OR_RETURN(p.name, r.Str(v, "name", ptr));
  MEMSIM_ASSIGN_OR_RETURN(p.source, r.Str(v, "source", ptr));
  for (auto [key, out] : {std::pair{"first_step", &p.first}, std::pair{"steady_step", &p.steady}}) {
    auto it = v.find(key);
    if (it == v.end()) return r.Err(ptr + "/" + key, "missing");
    MEMSIM_ASSIGN_OR_RETURN(*out, r.Program(*it, ptr + "/" + key));
  }
  // Each step leaves the state the steady step starts from (Note [Recorded optimizers]): else a
  // later step frees a state that is not there, or one freed already.
  auto describe = [](const std::vector<OptSize>& v) {
    std::string s;
    for (const OptSize& z : v) {
      if (!s.empty()) s.append(", ");
      s.append(std::to_string(z.num ? z.num : z.bytes));
      if (z.num && z.den > 1) s.append("/").append(std::to_string(z.den));
      if (!z.num) s.append("B");
    }
    return std::string("[").append(s).append("]");
  };
  for (auto [key, prog] : {std::pair{"first_step", &p.first}, std::pair{"steady_step", &p.steady}}) {
    MEMSIM_ASSIGN_OR_RETURN(std::vector<OptSize> after, StateAfter(*prog, r, ptr + "/" + key));
    auto same = [](const OptSize& a, const OptSize& b) { return a.num == b.num && a.den == b.den && a.bytes == b.bytes; };
    if (!std::equal(after.begin(), after.end(), p.steady.resident.begin(), p.steady.resident.end(), same))
      return r.Err(ptr + "/" + key, std::string("the state after the step, ") + describe(after) +
                                        ", differs from the steady step's resident state " + describe(p.steady.resident));
  }
  return p;
}

}  // namespace memsim
