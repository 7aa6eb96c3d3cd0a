"""--config FILE from Python: config="ds_config.json" means the options the file gives, as on the
command line, and the note naming the keys it ignored is a UserWarning (Note [Config files])."""
import os

import pytest

import memsim
from conftest import ROOT

GRAPH = os.path.join(ROOT, "graphs", "cs336_small.json")
CONFIGS = os.path.join(ROOT, "tests", "data", "configs")


def test_deepspeed_config_is_its_options():
    with pytest.warns(UserWarning, match=r"read as a DeepSpeed config: --batch 4 .*unknown keys, ignored: /my_custom_key"):
        a = memsim.simulate(GRAPH, explain=False, config=os.path.join(CONFIGS, "deepspeed_zero2_offload.json"), world=4)
    b = memsim.simulate(GRAPH, explain=False, batch=4, accumulate=2, clip_grad_norm=1.0, zero=2, offload="optimizer",
                        zero_overlap_comm="on",
                        dtype="bf16", optimizer="adamw", world=4)
    assert a.peak_live_bytes == b.peak_live_bytes and a.peak_reserved_bytes == b.peak_reserved_bytes
    assert a.peak_live_bytes > 0


def test_keyword_wins_over_the_file():
    with pytest.warns(UserWarning, match=r"the command line's own --batch kept"):
        a = memsim.simulate(GRAPH, 2, explain=False, config=os.path.join(CONFIGS, "training_args_qlora.json"))
    b = memsim.simulate(GRAPH, 2, explain=False, accumulate=4, clip_grad_norm=0.3, checkpoint="@blocks", amp="bf16",
                        optimizer="paged_adamw8bit")
    assert a.peak_live_bytes == b.peak_live_bytes


def test_bad_config_is_an_option_error():
    with pytest.raises(memsim.OptionError, match=r"a.json: /zero_optimization/stage: 7 is out of range"):
        memsim.simulate(GRAPH, config=os.path.join(ROOT, "tests", "cli", "bad", "configs", "a.json"))


def test_torchtitan_config_is_its_options():
    # torchtitan's own llama3_8b.toml over 8 ranks: FSDP2 built on the meta device, the output
    # deleted before backward (Notes [Config files], [Meta-device init]).
    with pytest.warns(UserWarning, match=r"read as a torchtitan config: .*--init meta"):
        a = memsim.simulate(GRAPH, explain=False, config=os.path.join(CONFIGS, "torchtitan_llama3_8b.toml"), world=8)
    b = memsim.simulate(GRAPH, 1, explain=False, loop_holds="loss", set={"seq": 8192}, clip_grad_norm=1.0,
                        mesh="dp_shard=8", init="meta", wrap="@blocks", fsdp2_mp="param=bf16,reduce=fp32",
                        checkpoint="@blocks", sac="torchtitan", checkpoint_early_stop="off", optimizer="adamw",
                        foreach="fused")
    assert a.peak_live_bytes == b.peak_live_bytes and a.peak_reserved_bytes == b.peak_reserved_bytes
    c = memsim.simulate(GRAPH, 1, explain=False, set={"seq": 8192}, mesh="dp_shard=8", wrap="@blocks",
                        fsdp2_mp="param=bf16,reduce=fp32", checkpoint="@blocks", optimizer="adamw")
    assert c.peak_live_bytes != b.peak_live_bytes


def test_reshard_after_forward_takes_fully_shards_values():
    # True, False or an int K (a divisor of the shard ranks), as fully_shard takes them (Note [FSDP2])
    kw = dict(explain=False, set={"seq": 256}, mesh="dp_shard=4", wrap="@blocks", optimizer="adamw")
    on, off = memsim.simulate(GRAPH, 2, reshard_after_forward=True, **kw), memsim.simulate(GRAPH, 2, reshard_after_forward=False, **kw)
    two = memsim.simulate(GRAPH, 2, reshard_after_forward=2, **kw)
    assert on.peak_live_bytes < two.peak_live_bytes < off.peak_live_bytes
    assert memsim.simulate(GRAPH, 2, reshard_after_forward=4, **kw).peak_live_bytes == on.peak_live_bytes
    with pytest.raises(memsim.OptionError, match=r"--reshard-after-forward \"3\": expected true, false or a divisor"):
        memsim.simulate(GRAPH, 2, reshard_after_forward=3, **kw)
