// The multi-stage schedules' action lists (Note [Pipeline parallel]), transcribed from
// torch/distributed/pipelining/schedules.py of torch 2.13: _get_warmup_ops, _get_1f1b_rank_ops,
// ScheduleInterleaved1F1B / ScheduleInterleavedZeroBubble / ScheduleZBVZeroBubble
// ._calculate_single_rank_operations, _add_bubbles_to_actions, _add_reduce_grad, _add_send_recv.
#include "lib/autodiff/pp_actions.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace memsim {

std::string PpAction::str() const {
  static const char* const kNames[] = {"F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD", "OVERLAP_F_B", "UNSHARD", "RESHARD"};
  if (!sub.empty()) {  // "(0F2;3B0)OVERLAP_F_B"
    std::string out;
    for (const PpAction& a : sub) out += (out.empty() ? "(" : ";") + a.str();
    return out + ")" + kNames[static_cast<int>(op)];
  }
  return std::to_string(stage) + kNames[static_cast<int>(op)] + (mb >= 0 ? std::to_string(mb) : "");
}

std::string PpFormat(const std::vector<PpAction>& actions) {
  std::string out;
  for (const PpAction& a : actions) out += (out.empty() ? "" : " ") + a.str();
  return out;
}

bool PpVShaped(PpMulti s) { return s == PpMulti::kZBVZeroBubble || s == PpMulti::kDualPipeV; }

int PpRankOfStage(PpMulti s, int ranks, int per_rank, int stage) {
  (void)per_rank;
  if (PpVShaped(s)) return stage < ranks ? stage : 2 * ranks - 1 - stage;
  return stage % ranks;
}

std::vector<int> PpStagesOfRank(PpMulti s, int ranks, int per_rank, int rank) {
  if (PpVShaped(s)) return {rank, 2 * ranks - 1 - rank};
  std::vector<int> out;
  for (int k = 0; k < per_rank; ++k) out.push_back(rank + k * ranks);
  return out;
}

namespace {

using Order = std::vector<std::optional<PpAction>>;

int Rounds(int ranks, int m) { return std::max(1, m / ranks); }

/// _get_warmup_ops.
int WarmupOps(int rank, int per_rank, int per_round, int ranks, int m, int factor) {
  return std::min((per_rank - 1) * per_round + factor * ((ranks - 1) - rank), m * per_rank);
}

/// _get_1f1b_rank_ops: warmup forwards, None padding, 1F1B (with the zero-bubble W after each B
/// once num_1f1b_microbatches have run), cooldown backwards, the W left.
Order OneFOneBRankOps(int per_rank, int ranks, int warmup, int fwd_bwd, int cooldown, int rank,
                      const std::function<int(int)>& fwd_stage, const std::function<int(int)>& bwd_stage,
                      int num_1f1b = 0, bool zero_bubble = false) {
  std::map<int, int> fwd_mb, bwd_mb, w_mb;
  Order ops(rank);
  int post_warmup = per_rank * ranks + 2 * (ranks - 1 - rank) - (warmup + rank);
  if (zero_bubble) post_warmup = ranks - rank - 1;
  const int total = warmup + fwd_bwd + cooldown;
  std::vector<int> backward_ids;
  size_t weight_count = 0;
  const PpOp bop = zero_bubble ? PpOp::kI : PpOp::kB;
  auto weight = [&] {
    const int st = bwd_stage(backward_ids[weight_count]);
    ops.push_back(PpAction{st, PpOp::kW, w_mb[st]++});
    ++weight_count;
  };
  for (int op = 0; op < total; ++op) {
    if (op < warmup) {
      const int st = fwd_stage(op);
      ops.push_back(PpAction{st, PpOp::kF, fwd_mb[st]++});
      if (op == warmup - 1) ops.insert(ops.end(), std::max(0, post_warmup), std::nullopt);
      continue;
    }
    if (op < warmup + fwd_bwd) {
      const int st = fwd_stage(op);
      ops.push_back(PpAction{st, PpOp::kF, fwd_mb[st]++});
    } else if (!zero_bubble) {
      ops.push_back(std::nullopt);
    }
    const int bst = bwd_stage(op);
    ops.push_back(PpAction{bst, bop, bwd_mb[bst]++});
    backward_ids.push_back(op);
    if (zero_bubble && op - warmup >= num_1f1b) weight();
  }
  while (zero_bubble && weight_count < backward_ids.size()) weight();
  return ops;
}

/// ScheduleInterleaved1F1B (factor 2) / ScheduleInterleavedZeroBubble (factor 1, I and W)
/// ._calculate_single_rank_operations.
Order InterleavedRankOps(bool zero_bubble, int ranks, int per_rank, int m, int rank) {
  const int per_round = m / Rounds(ranks, m);
  const int warmup = WarmupOps(rank, per_rank, per_round, ranks, m, zero_bubble ? 1 : 2);
  const int microbatch_ops = per_rank * m, fwd_bwd = microbatch_ops - warmup, cooldown = microbatch_ops - fwd_bwd;
  auto fwd_stage = [=](int step) { return ((step / per_round) % per_rank) * ranks + rank; };
  auto bwd_stage = [=](int step) { return (per_rank - 1 - ((step - warmup) / per_round) % per_rank) * ranks + rank; };
  return OneFOneBRankOps(per_rank, ranks, warmup, fwd_bwd, cooldown, rank, fwd_stage, bwd_stage, rank, zero_bubble);
}

/// ScheduleInterleavedZeroBubble._add_bubbles_to_actions: a rank waits (None) while its next
/// forward's previous stage has not run that microbatch in an earlier time step.
std::vector<Order> AddBubbles(const std::vector<Order>& actions, int num_stages) {
  using Key = std::tuple<int, PpOp, int>;
  std::set<Key> seen;
  const int ranks = static_cast<int>(actions.size());
  std::vector<Order> result(ranks);
  std::vector<size_t> next(ranks, 0);
  auto need_bubble = [&](const PpAction& a) {
    if (a.op == PpOp::kF) return a.stage != 0 && !seen.count({a.stage - 1, a.op, a.mb});
    if (a.op == PpOp::kB) {
      if (a.stage == num_stages - 1) return !seen.count({a.stage, PpOp::kF, a.mb});
      return !seen.count({a.stage + 1, a.op, a.mb});
    }
    return false;
  };
  while (true) {
    bool stop = true;
    std::set<Key> now;
    for (int r = 0; r < ranks; ++r) {
      if (next[r] >= actions[r].size()) continue;
      stop = false;
      const std::optional<PpAction>& a = actions[r][next[r]];
      if (a && need_bubble(*a)) {
        result[r].push_back(std::nullopt);
        continue;
      }
      result[r].push_back(a);
      if (a && a->mb >= 0) now.insert({a->stage, a->op, a->mb});
      ++next[r];
    }
    seen.insert(now.begin(), now.end());
    if (stop) break;
  }
  return result;
}

/// ScheduleZBVZeroBubble._calculate_single_rank_operations: the V's two chunks.
Order ZbvRankOps(int ranks, int m, int rank) {
  const int n_micro = std::max(2 * ranks - 1, m);
  Order ops(rank);
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  const int c0 = rank, c1 = 2 * ranks - 1 - rank;
  auto add = [&](int st, PpOp op, int& cnt) { ops.push_back(PpAction{st, op, cnt}); };
  for (int k = 0; k < 2 * (ranks - rank) - 1; ++k) add(c0, PpOp::kF, f0), ++f0;
  for (int k = 0; k < rank; ++k) {
    add(c1, PpOp::kF, f1), ++f1;
    add(c0, PpOp::kF, f0), ++f0;
  }
  for (int k = 0; k < ranks - rank; ++k) {
    add(c1, PpOp::kF, f1), ++f1;
    add(c1, PpOp::kI, b1);
    add(c1, PpOp::kW, b1), ++b1;
  }
  while (f1 < f0 || f0 < n_micro) {
    if (f0 < n_micro) add(c0, PpOp::kF, f0), ++f0;
    add(c0, PpOp::kI, b0);
    add(c0, PpOp::kW, b0), ++b0;
    add(c1, PpOp::kF, f1), ++f1;
    add(c1, PpOp::kI, b1);
    add(c1, PpOp::kW, b1), ++b1;
  }
  int w0 = b0, w1 = b1;
  for (int k = 0; k < rank; ++k) {
    add(c0, PpOp::kI, b0), ++b0;
    add(c1, PpOp::kI, b1), ++b1;
  }
  for (int k = 0; k < ranks - rank; ++k) {
    add(c0, PpOp::kI, b0), ++b0;
    add(c0, PpOp::kW, w0), ++w0;
  }
  while (w1 < b1) add(c1, PpOp::kW, w1), ++w1;
  while (w0 < b0) add(c0, PpOp::kW, w0), ++w0;
  for (std::optional<PpAction>& a : ops)  // microbatches beyond M (n_micro pads to 2N − 1) are None
    if (a && a->mb >= m) a.reset();
  return ops;
}

/// ScheduleDualPipeV._calculate_single_rank_operations: the V's two chunks, its main phase
/// OVERLAP_F_B pairs (a forward of one chunk with a full backward of the other), the last
/// backwards split into I and W.
Order DualPipeVRankOps(int ranks, int m, int rank) {
  Order ops;
  std::map<std::pair<int, PpOp>, int> counters;  // (stage, F / I / W) -> next microbatch
  std::vector<std::pair<int, int>> weight_queue;
  const int s0 = rank, s1 = 2 * ranks - 1 - rank;
  auto backward_counts = [&](int st) { ++counters[{st, PpOp::kI}], ++counters[{st, PpOp::kW}]; };
  auto add = [&](int st, PpOp op) {  // add_action: a full backward counts with the I
    const PpOp key = op == PpOp::kB ? PpOp::kI : op;
    const int mb = counters[{st, key}];
    ops.push_back(PpAction{st, op, mb});
    if (op == PpOp::kB) return backward_counts(st);
    if (op == PpOp::kI) weight_queue.emplace_back(st, mb);
    counters[{st, key}] = mb + 1;
  };
  auto overlap = [&](int fst, int bst) {  // add_overlap_f_b
    PpAction a{-1, PpOp::kOverlapFB, -1};
    a.sub = {PpAction{fst, PpOp::kF, counters[{fst, PpOp::kF}]}, PpAction{bst, PpOp::kB, counters[{bst, PpOp::kI}]}};
    ops.push_back(a);
    ++counters[{fst, PpOp::kF}];
    backward_counts(bst);
  };
  auto weight = [&] {  // add_weight_action_if_pending
    if (weight_queue.empty()) return;
    const auto [st, mb] = weight_queue.front();
    weight_queue.erase(weight_queue.begin());
    ops.push_back(PpAction{st, PpOp::kW, mb});
    ++counters[{st, PpOp::kW}];
  };
  for (int k = 0; k < (ranks - rank - 1) * 2; ++k) add(s0, PpOp::kF);
  for (int k = 0; k < rank + 1; ++k) add(s0, PpOp::kF), add(s1, PpOp::kF);
  for (int k = 0; k < ranks - rank - 1; ++k) add(s1, PpOp::kI), weight(), add(s1, PpOp::kF);
  for (int i = 0; i < m - ranks * 2 + rank + 1; ++i) {
    if (i == 0 && rank == ranks - 1) add(s0, PpOp::kF), add(s1, PpOp::kB);
    else overlap(s0, s1);
    overlap(s1, s0);
  }
  for (int k = 0; k < ranks - rank - 1; ++k) add(s1, PpOp::kB), overlap(s1, s0);
  bool zb = false;
  for (int i = 0; i < rank + 1; ++i) {
    if (i == (rank + 1) / 2 && rank % 2 == 1) zb = true;
    add(s1, zb ? PpOp::kI : PpOp::kB);
    if (i == (rank + 1) / 2 && rank % 2 == 0) zb = true;
    add(s0, zb ? PpOp::kI : PpOp::kB);
  }
  for (int k = 0; k < ranks - rank - 1; ++k) weight(), add(s0, zb ? PpOp::kI : PpOp::kB);
  for (int k = 0; k < rank + 1; ++k) weight();
  return ops;
}

/// _add_unshard_reshard(max_active_stages=3): before each compute action, the stages of the next
/// three distinct stages (in order of appearance, an OVERLAP_F_B's sub-actions each) not yet
/// active are unsharded after the active ones not among them are resharded; the rest resharded
/// at the end. Bubbles are dropped.
Order AddUnshardReshard(const Order& actions) {
  constexpr size_t kMaxActive = 3;
  Order out;
  std::vector<int> active;  // active_stages
  for (size_t i = 0; i < actions.size(); ++i) {
    if (!actions[i]) continue;
    std::vector<int> next;
    for (size_t k = i; k < actions.size() && next.size() < kMaxActive; ++k) {
      if (!actions[k]) continue;
      const std::vector<PpAction> leaves = actions[k]->sub.empty() ? std::vector<PpAction>{*actions[k]} : actions[k]->sub;
      for (const PpAction& x : leaves)
        if (std::find(next.begin(), next.end(), x.stage) == next.end() && (next.size() < kMaxActive || !actions[k]->sub.empty()))
          next.push_back(x.stage);
    }
    std::sort(active.begin(), active.end());  // a set of small ints iterates in ascending order
    for (size_t a = 0; a < active.size();)
      if (std::find(next.begin(), next.end(), active[a]) == next.end()) {
        out.push_back(PpAction{active[a], PpOp::kReshard, -1});
        active.erase(active.begin() + static_cast<std::ptrdiff_t>(a));
      } else {
        ++a;
      }
    for (int st : next)
      if (std::find(active.begin(), active.end(), st) == active.end()) {
        active.push_back(st);
        out.push_back(PpAction{st, PpOp::kUnshard, -1});
      }
    out.push_back(actions[i]);
  }
  std::sort(active.begin(), active.end());
  for (int st : active) out.push_back(PpAction{st, PpOp::kReshard, -1});
  return out;
}

/// _add_reduce_grad: REDUCE_GRAD after a stage's M-th B or W.
std::vector<PpAction> AddReduceGrad(const Order& actions, int m) {
  std::vector<PpAction> out;
  std::map<int, int> count;
  for (const std::optional<PpAction>& a : actions) {
    if (!a) continue;
    out.push_back(*a);
    for (const PpAction& leaf : a->sub.empty() ? std::vector<PpAction>{*a} : a->sub)
      if ((leaf.op == PpOp::kW || leaf.op == PpOp::kB) && ++count[leaf.stage] == m)
        out.push_back(PpAction{leaf.stage, PpOp::kReduceGrad, -1});
  }
  return out;
}

}  // namespace

std::string PpCheck(PpMulti s, int ranks, int per_rank, int m) {
  if (PpVShaped(s) && per_rank != 2) return "ZBV requires exactly 2 stages per rank, but got " + std::to_string(per_rank) + ".";
  if (s == PpMulti::kDualPipeV && m < ranks * per_rank)
    return "DualPipeV requires at least as many microbatches as stages, but got " + std::to_string(m) +
           " microbatches and " + std::to_string(ranks * per_rank) + " stages.";
  if (PpVShaped(s)) return "";
  if (m % Rounds(ranks, m) != 0)
    return std::string(s == PpMulti::kInterleaved1F1B ? "Interleaved 1F1B" : "Zero bubble") +
           " requires the number of microbatches to be a multiple of the number of rounds (" +
           std::to_string(Rounds(ranks, m)) + "), but got " + std::to_string(m) + ".";
  return "";
}

std::vector<Order> PpComputeOrder(PpMulti s, int ranks, int per_rank, int m) {
  std::vector<Order> order;
  for (int r = 0; r < ranks; ++r)
    order.push_back(s == PpMulti::kZBVZeroBubble ? ZbvRankOps(ranks, m, r)
                    : s == PpMulti::kDualPipeV   ? DualPipeVRankOps(ranks, m, r)
                                                 : InterleavedRankOps(s == PpMulti::kInterleavedZeroBubble, ranks, per_rank, m, r));
  if (s == PpMulti::kInterleavedZeroBubble) order = AddBubbles(order, ranks * per_rank);
  return order;
}

std::vector<std::vector<PpAction>> PpLowerWithComms(PpMulti s, int ranks, int per_rank, int m, bool fsdp) {
  const int num_stages = ranks * per_rank;
  auto rank_of = [&](int stage) { return PpRankOfStage(s, ranks, per_rank, stage); };
  std::vector<std::vector<PpAction>> compute;
  for (const Order& o : PpComputeOrder(s, ranks, per_rank, m)) compute.push_back(AddReduceGrad(fsdp ? AddUnshardReshard(o) : o, m));
  // _add_send_recv: a rank's compute action is placed once its input arrived (its own recv, put
  // there by the sender, or the producing action on this rank), followed by its send; the
  // receiver's recv goes on the receiving rank's list at the same time.
  auto has_comms = [&](const PpAction& a) {
    if (a.op == PpOp::kF) return a.stage != num_stages - 1 && rank_of(a.stage + 1) != rank_of(a.stage);
    if (a.op == PpOp::kI || a.op == PpOp::kB) return a.stage != 0 && rank_of(a.stage - 1) != rank_of(a.stage);
    return false;
  };
  std::vector<std::vector<PpAction>> comm(ranks);
  std::vector<std::set<std::tuple<int, PpOp, int>>> prev(ranks);
  auto seen = [&](int r, PpAction a) { return prev[r].count({a.stage, a.op, a.mb}) > 0; };
  auto add = [&](int r, PpAction a) {
    comm[r].push_back(a);
    prev[r].insert({a.stage, a.op, a.mb});
  };
  auto ready = [&](int r, const PpAction& a) {
    if (a.op == PpOp::kF && a.stage != 0)
      return seen(r, {a.stage, PpOp::kRecvF, a.mb}) || seen(r, {a.stage - 1, PpOp::kF, a.mb});
    if ((a.op == PpOp::kI || a.op == PpOp::kB) && a.stage != num_stages - 1)
      return seen(r, {a.stage, PpOp::kRecvB, a.mb}) || seen(r, {a.stage + 1, PpOp::kI, a.mb}) ||
             seen(r, {a.stage + 1, PpOp::kB, a.mb});
    return true;
  };
  std::vector<size_t> pos(ranks, 0);
  auto left = [&] {
    for (int r = 0; r < ranks; ++r)
      if (pos[r] < compute[r].size()) return true;
    return false;
  };
  while (left()) {
    bool progress = false;
    for (int r = 0; r < ranks; ++r) {
      if (pos[r] >= compute[r].size()) continue;
      const PpAction a = compute[r][pos[r]];
      const std::vector<PpAction> leaves = a.sub.empty() ? std::vector<PpAction>{a} : a.sub;
      if (!std::all_of(leaves.begin(), leaves.end(), [&](const PpAction& x) { return ready(r, x); })) continue;
      comm[r].push_back(a);
      for (const PpAction& x : leaves) {
        prev[r].insert({x.stage, x.op, x.mb});
        if (!has_comms(x)) continue;
        const bool fwd = x.op == PpOp::kF;
        const PpAction send{x.stage, fwd ? PpOp::kSendF : PpOp::kSendB, x.mb};
        const PpAction recv{fwd ? x.stage + 1 : x.stage - 1, fwd ? PpOp::kRecvF : PpOp::kRecvB, x.mb};
        add(r, send);
        add(rank_of(recv.stage), recv);
      }
      ++pos[r];
      progress = true;
    }
    if (!progress) return {};  // "Malformed compute schedule" (the transcribed schedules never are)
  }
  return comm;
}

}  // namespace memsim
