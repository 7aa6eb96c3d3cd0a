"""Prints the action lists torch.distributed.pipelining's multi-stage schedules run on each rank
(pipeline_order_with_comms without FSDP's UNSHARD/RESHARD), as the schedules' own code computes
them: _calculate_single_rank_operations on a stand-in for the schedule object (no process group
needed), _add_bubbles_to_actions, _add_reduce_grad and _add_send_recv (DualPipeV's OVERLAP_F_B printed as
its repr, "(0F2;3B0)OVERLAP_F_B"). One line per rank:
`SCHEDULE RANKS PER_RANK MICROBATCHES RANK: ACTION ...` (tests/data/pp_actions_2_13.txt, compared
by tests/autodiff/pp_actions_test.cc). Usage: pp_actions.py > tests/data/pp_actions_2_13.txt;
pp_actions.py --fsdp > tests/data/pp_actions_fsdp_2_13.txt: with _add_unshard_reshard first (the
UNSHARD/RESHARD actions the lists hold when the stages are FSDP modules)."""
import sys, types
from torch.distributed.pipelining import schedules as S

CONFIGS = [("interleaved1f1b", 2, 2, 4), ("interleaved1f1b", 2, 2, 8), ("interleaved1f1b", 4, 2, 8),
           ("interleaved1f1b", 4, 3, 4), ("interleaved1f1b", 2, 3, 6), ("interleavedzb", 2, 2, 4),
           ("interleavedzb", 4, 2, 8), ("zbv", 2, 2, 4), ("zbv", 2, 2, 8), ("zbv", 4, 2, 8),
           ("dualpipev", 2, 2, 4), ("dualpipev", 2, 2, 6), ("dualpipev", 3, 2, 8), ("dualpipev", 4, 2, 8)]
CLASSES = {"interleaved1f1b": S.ScheduleInterleaved1F1B, "interleavedzb": S.ScheduleInterleavedZeroBubble,
           "zbv": S.ScheduleZBVZeroBubble, "dualpipev": S.ScheduleDualPipeV}


def order(name, ranks, per_rank, m):
    cls = CLASSES[name]
    me = types.SimpleNamespace(pp_group_size=ranks, n_local_stages=per_rank, _n_microbatches=m,
                               num_stages=ranks * per_rank)
    me.number_of_rounds = max(1, m // ranks)
    me.microbatches_per_round = m // me.number_of_rounds
    me.pipeline_order = {r: cls._calculate_single_rank_operations(me, r) for r in range(ranks)}
    if name == "interleavedzb":
        me.pipeline_order = cls._add_bubbles_to_actions(me, ranks * per_rank)
    style = "v" if name in ("zbv", "dualpipev") else "loop"
    mapping = S.generate_stage_to_rank_mapping(ranks, ranks * per_rank, style=style)
    fsdp = S._add_unshard_reshard if "--fsdp" in sys.argv else (lambda actions: actions)
    lowered = {r: S._add_reduce_grad(fsdp(me.pipeline_order[r]), m) for r in range(ranks)}
    return S._add_send_recv(lowered, stage_to_rank=lambda s: mapping[s], num_stages=ranks * per_rank)


for cfg in CONFIGS:
    for rank, actions in sorted(order(*cfg).items()):
        print("%s %d %d %d %d: %s" % (cfg + (rank, " ".join(str(a) for a in actions))))
