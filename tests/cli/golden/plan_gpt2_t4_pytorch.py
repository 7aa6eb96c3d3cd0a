# memsim plan for nanogpt_gpt2_small on 2 x T4: amp-fp16 ddp world 2, ckpt none, micro-batch 4 x 2
# memory: memsim run graphs/nanogpt_gpt2_small.json --gpu T4 --optimizer adamw --batch 4 --accumulate 2 --amp fp16 --ddp 2
# torchrun --nproc_per_node 2 train.py
import functools
import torch
import torch.distributed as dist
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, CheckpointPolicy

dist.init_process_group("nccl")
torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
model = build_model().cuda()  # your model

model = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
scaler = torch.amp.GradScaler()

for batches in loader:  # 2 micro-batches of 4 samples per rank
    for x, y in batches:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y) / 2
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
