#include "sim/routing.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "lib/ir/expert_parallel.h"
#include "sim/simulator.h"

namespace memsim {
namespace {

const char kPolicyForms[] =
    "balanced or hot=F (F >= 1: the first expert's tokens over the mean) or ranks=C0:C1:... (each rank's tokens "
    "per expert, layers separated by '/', experts by ',')";

/// "29,9,2,24" → {29, 9, 2, 24}; nullopt on anything but non-negative integers.
std::optional<std::vector<int64_t>> ParseCounts(const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    if (item.empty() || item.size() > 12 || item.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    out.push_back(std::stoll(item));
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> SplitOn(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

}  // namespace

Result<std::vector<int64_t>> RoutedCounts(const std::string& policy, int64_t n, int64_t experts) {
  auto balanced = [](int64_t m, int64_t e, std::vector<int64_t>* out) {
    for (int64_t i = 0; i < e; ++i) out->push_back(m / e + (i < m % e ? 1 : 0));
  };
  std::vector<int64_t> c;
  if (policy == "balanced") {
    balanced(n, experts, &c);
    return c;
  }
  if (policy.rfind("hot=", 0) == 0) {
    char* end = nullptr;
    double f = std::strtod(policy.c_str() + 4, &end);
    if (end && *end == '\0' && f >= 1 && f <= 1e6) {
      int64_t hot = experts == 1 ? n : std::min<int64_t>(n, static_cast<int64_t>(f * n / experts + 0.5));
      c.push_back(hot);
      balanced(n - hot, experts - 1, &c);
      return c;
    }
  }
  return Status::InvalidArgument(std::string("--moe-routing: expected ") + kPolicyForms + ", got \"" + policy + "\"");
}

Result<std::vector<std::vector<std::vector<int64_t>>>> ParseRankCounts(const std::string& policy) {
  std::vector<std::vector<std::vector<int64_t>>> ranks;
  if (policy.rfind("ranks=", 0) != 0) return ranks;
  for (const std::string& rank : SplitOn(policy.substr(6), ':')) {
    ranks.emplace_back();
    for (const std::string& layer : SplitOn(rank, '/')) {
      std::optional<std::vector<int64_t>> counts = ParseCounts(layer);
      if (!counts)
        return Status::InvalidArgument("--moe-routing: \"" + layer + "\" in rank " + std::to_string(ranks.size() - 1) +
                                       "'s counts is not a list of token counts; expected " + kPolicyForms);
      ranks.back().push_back(std::move(*counts));
    }
  }
  if (ranks.size() > 1'000'000) return Status::InvalidArgument("--moe-routing: more than 1000000 ranks' counts");
  return ranks;
}

std::vector<std::vector<int64_t>> ReceivedRows(const std::vector<std::vector<int64_t>>& sources, int world, int rank) {
  std::vector<std::vector<int64_t>> rows;
  for (const std::vector<int64_t>& counts : sources) {
    const size_t local = counts.size() / static_cast<size_t>(world);
    rows.emplace_back(counts.begin() + static_cast<std::ptrdiff_t>(local * rank),
                      counts.begin() + static_cast<std::ptrdiff_t>(local * (rank + 1)));
  }
  return rows;
}

namespace {

/// Each source rank's counts over the experts of routing |l| (one source without expert
/// parallelism): --set (the same on every rank), the per-rank list, or the policy.
Result<std::vector<std::vector<int64_t>>> SourceCounts(const Graph& g, const SimOptions& opt, const Bindings& b, size_t l,
                                                       const std::vector<std::vector<std::vector<int64_t>>>& per_rank,
                                                       bool given, int base) {
  const Graph::Routing& r = g.routing[l];
  const int world = g.ep_degree;
  auto n = r.tokens.Eval(b);
  if (!n) return Status::InvalidArgument(g.source + ": routing " + std::to_string(l) + "'s tokens are unbound");
  std::vector<std::vector<int64_t>> sources;
  for (int s = 0; s < world; ++s) {
    std::vector<int64_t> counts;
    if (given) {
      for (int64_t e = 0; e < r.experts; ++e)
        counts.push_back(b[g.FindSymbol("routed" + std::to_string(l) + "_e" + std::to_string(e))].value_or(0));
    } else if (!per_rank.empty()) {
      const size_t at = world > 1 ? static_cast<size_t>(base + s) : static_cast<size_t>(opt.parallel.rank) % per_rank.size();
      if (per_rank[at].size() != g.routing.size() || per_rank[at][l].size() != static_cast<size_t>(r.experts))
        return Status::InvalidArgument("--moe-routing ranks=...: rank " + std::to_string(at) + " gives " +
                                       std::to_string(per_rank[at].size()) + " layers' counts; " + g.name + " has " +
                                       std::to_string(g.routing.size()) + " routings of " + std::to_string(r.experts) +
                                       " experts (routing " + std::to_string(l) + ")");
      counts = per_rank[at][l];
    } else {
      MEMSIM_ASSIGN_OR_RETURN(counts, RoutedCounts(opt.moe_routing, *n, r.experts));
    }
    const int64_t sum = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    if (world > 1 && sum != *n)
      return Status::InvalidArgument("routing " + std::to_string(l) + ": rank " + std::to_string(s) + "'s counts add up to " +
                                     std::to_string(sum) + ", not its " + std::to_string(*n) +
                                     " routed rows (tokens x top-k); fix --set routed" + std::to_string(l) +
                                     "_e<i> or --moe-routing");
    sources.push_back(std::move(counts));
  }
  return sources;
}

}  // namespace

Status BindRouting(const Graph& g, const SimOptions& opt, Bindings* b) {
  MEMSIM_ASSIGN_OR_RETURN(auto per_rank, ParseRankCounts(opt.moe_routing));
  if (per_rank.empty()) MEMSIM_RETURN_IF_ERROR(RoutedCounts(opt.moe_routing, 1, 1).status());  // refused on any graph
  const int world = g.ep_degree;
  // Under ep borrowing dp_shard the rank's ep group is the ep consecutive ranks around it
  // (torchtitan's sparse mesh, ep innermost); the list gives every rank of the world.
  const int ranks = std::max(opt.parallel.world, world);
  if (!per_rank.empty() && world > 1 && per_rank.size() != static_cast<size_t>(ranks))
    return Status::InvalidArgument("--moe-routing ranks=...: " + std::to_string(per_rank.size()) + " ranks' counts for " +
                                   std::to_string(ranks) + " ranks (--mesh " + opt.parallel.mesh.ToString() +
                                   "); give one per rank");
  const int rank = world > 1 ? EpCoordOf(opt.parallel.mesh, opt.parallel.rank).ep : 0;
  const int base = world > 1 ? opt.parallel.rank - rank : 0;
  for (size_t l = 0; l < g.routing.size(); ++l) {
    const std::string prefix = "routed" + std::to_string(l) + "_e";
    bool given = false;
    for (int64_t e = 0; e < g.routing[l].experts && !given; ++e) given = opt.symbols.count(prefix + std::to_string(e)) > 0;
    MEMSIM_ASSIGN_OR_RETURN(auto sources, SourceCounts(g, opt, *b, l, per_rank, given, base));
    const std::vector<int64_t>& own = sources[world > 1 ? rank : 0];
    if (!given)
      for (int64_t e = 0; e < g.routing[l].experts; ++e) (*b)[g.FindSymbol(prefix + std::to_string(e))] = own[e];
    if (world <= 1) continue;
    const std::vector<std::vector<int64_t>> rows = ReceivedRows(sources, world, rank);
    int64_t received = 0;
    for (size_t j = 0; j < rows[0].size(); ++j) {
      int64_t expert = 0;
      for (int s = 0; s < world; ++s) {
        (*b)[g.FindSymbol(EpRowsSymbol(l, s, static_cast<int64_t>(j)))] = rows[s][j];
        expert += rows[s][j];
      }
      (*b)[g.FindSymbol(EpExpertSymbol(l, static_cast<int64_t>(j)))] = expert;
      received += expert;
    }
    (*b)[g.FindSymbol(EpReceivedSymbol(l))] = received;
  }
  return Status::OK();
}

}  // namespace memsim
