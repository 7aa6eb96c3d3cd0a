# memsim plan (docs/plan.md): golden plans on a small LLM for two GPUs and two global batches
# (the answer moves as it should), bad input, and the chosen plans' flags reproduced by run.
set(MEMSIM_PLAN_GPT2 graphs/nanogpt_gpt2_small.json --precision amp-bf16,amp-fp16,bf16 --checkpoints none,every-2,all,sac-all
    --threads 2 --no-timing)
memsim_golden_test(plan_gpt2_t4_text plan_gpt2_t4.txt plan ${MEMSIM_PLAN_GPT2} --gpus 2xT4 --global-batch 16)
memsim_golden_test(plan_gpt2_a100_text plan_gpt2_a100.txt plan ${MEMSIM_PLAN_GPT2} --gpus 2xA100-40GB --global-batch 16)
memsim_golden_test(plan_gpt2_a100_batch64_json plan_gpt2_a100_batch64.json
  plan ${MEMSIM_PLAN_GPT2} --gpus 2xA100-40GB --global-batch 64 --sharding ddp,zero2,fsdp --json)
memsim_golden_test(plan_gpt2_t4_memory_text plan_gpt2_t4_memory.txt
  plan ${MEMSIM_PLAN_GPT2} --gpus 2xT4 --global-batch 16 --objective memory --sharding ddp,zero3,fsdp-offload)
memsim_golden_test(plan_gpt2_t4_pytorch plan_gpt2_t4_pytorch.py
  plan ${MEMSIM_PLAN_GPT2} --gpus 2xT4 --global-batch 16 --sharding ddp,fsdp --framework pytorch)
memsim_golden_test(plan_gpt2_t4_deepspeed plan_gpt2_t4_deepspeed.json
  plan ${MEMSIM_PLAN_GPT2} --gpus 2xT4 --global-batch 16 --sharding zero2,zero3 --framework deepspeed)
memsim_error_test(plan_unknown_gpu 2 "^memsim: --gpus: unknown GPU \"H100-80G\": did you mean H100-80GB\\?"
  plan graphs/mlp.json --gpus 8xH100-80G --global-batch 64)
memsim_error_test(plan_bad_objective 2 "^memsim: --objective \"speed\": expected time, memory or balanced"
  plan graphs/mlp.json --gpus 8xH100-80GB --global-batch 64 --objective speed)
memsim_error_test(plan_bad_framework 2 "^memsim: --framework \"jax\": expected pytorch, torchtitan, deepspeed or hf"
  plan graphs/mlp.json --gpus 8xH100-80GB --global-batch 64 --framework jax)
memsim_error_test(plan_no_global_batch 2 "^memsim: plan needs --global-batch"
  plan graphs/mlp.json --gpus 8xH100-80GB)
if(MEMSIM_PYTHON3)
  add_test(NAME cli.plan_args_reproduce_gpt2
           COMMAND ${MEMSIM_PYTHON3} ${MEMSIM_CLI_DIR}/scripts/plan_args.py $<TARGET_FILE:memsim> ${MEMSIM_PLAN_GPT2}
                   --gpus 2xT4 --global-batch 16 --sharding ddp,zero2,zero3,fsdp
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endif()
# A vision model: ResNet-18 on four 16 GB V100s, then on one T4 (the plan moves with the budget).
memsim_golden_test(plan_resnet18_v100_text plan_resnet18_v100.txt
  plan graphs/resnet18.json --gpus 4xV100-16GB --global-batch 512 --optimizer sgd --precision fp32,amp-fp16
  --checkpoints none,all --micro-batch 32,64,128 --threads 2 --no-timing)
memsim_golden_test(plan_resnet18_t4_text plan_resnet18_t4.txt
  plan graphs/resnet18.json --gpus 1xT4 --global-batch 512 --optimizer sgd --precision fp32,amp-fp16
  --checkpoints none,all --micro-batch 32,64,128,256 --threads 2 --no-timing)
if(MEMSIM_PYTHON3)
  # The smallest plans (ZeRO-3, FSDP with CPU offload) reproduced too.
  add_test(NAME cli.plan_args_reproduce_gpt2_memory
           COMMAND ${MEMSIM_PYTHON3} ${MEMSIM_CLI_DIR}/scripts/plan_args.py $<TARGET_FILE:memsim> ${MEMSIM_PLAN_GPT2}
                   --gpus 2xT4 --global-batch 16 --sharding zero3,zero3-offload,fsdp-offload --objective memory
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endif()
