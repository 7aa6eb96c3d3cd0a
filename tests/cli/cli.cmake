# End-to-end CLI tests: golden reports, one-line errors with exit code 2, and the validation of
# memsim against the real PyTorch traces (tools/validate.py).
set(MEMSIM_CLI_DIR ${CMAKE_CURRENT_LIST_DIR})

function(memsim_golden_test name golden)
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:memsim>;${ARGN}"
                   -DGOLDEN=${MEMSIM_CLI_DIR}/golden/${golden} -DOUT=${CMAKE_BINARY_DIR}/cli_${name}.out
                   -P ${MEMSIM_CLI_DIR}/scripts/run_golden.cmake
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()

function(memsim_error_test name exit regex)
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:memsim>;${ARGN}" -DEXIT=${exit} "-DREGEX=${regex}"
                   -P ${MEMSIM_CLI_DIR}/scripts/run_expect_error.cmake
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()

memsim_golden_test(run_mlp_cpu_adam_json run_mlp_cpu_adam.json
  run graphs/mlp.json --batch 256 --profile cpu --torch 1.13 --optimizer adam --json)
memsim_golden_test(run_resnet18_cuda_text run_resnet18_cuda.txt
  run graphs/resnet18.json --batch 16 --optimizer sgd --gpu T4)
memsim_golden_test(run_alexnet_oom_json run_alexnet_oom.json
  run graphs/alexnet.json --batch 4096 --optimizer adam --gpu T4 --json --top 3)
memsim_golden_test(run_bert_small_frozen_json run_bert_small_frozen.json
  run graphs/bert_small.json --batch 8 --optimizer adamw --freeze "text.tok.*" --freeze "text.enc.layers.0.*" --json --top 5)
# --batch on a graph whose batch was fixed at export: said, not shown as a setting.
memsim_golden_test(run_fixed_batch_warning run_fixed_batch_warning.txt
  run tests/cli/fixed_batch_mlp.json --batch 8 --profile cpu --torch 1.13 --top 2)
memsim_golden_test(summary_alexnet_text summary_alexnet.txt summary graphs/alexnet.json --batch 1)
memsim_golden_test(summary_mlp_json summary_mlp.json summary graphs/mlp.json --batch 1 --json)

# Mixture of experts (Note [Routed token counts]): balanced counts at the run's batch, a hot expert.
memsim_golden_test(run_moe_balanced_text run_moe_balanced.txt
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --batch 64 --profile cpu --optimizer adam)
memsim_golden_test(run_moe_hot_text run_moe_hot.txt
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --batch 64 --profile cpu --optimizer adam --moe-routing hot=3)
memsim_error_test(moe_counts_partial 2 "routed0_e\\* add up to 49 but routing 0 routes 128 rows"
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --batch 64 --profile cpu --set routed0_e0=1)
memsim_error_test(moe_routing_unknown 2 "--moe-routing: expected balanced or hot=F"
  run graphs/mlp.json --profile cpu --moe-routing zipf)
# Expert parallel (Note [Expert parallel]): every rank simulated with the rows it receives; under
# hot=3 expert 0's rank receives three times the mean and peaks highest.
memsim_golden_test(run_ep_hot_ranks run_ep_hot_ranks.txt
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --batch 64 --profile cpu --torch 2.13 --optimizer adam --mesh ep=4 --moe-routing hot=3)
memsim_golden_test(run_ep_kit_ranks_json run_ep_kit_ranks.json
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --batch 32 --profile cpu --torch 2.13 --optimizer adam --step first --mesh ep=2
  --moe-routing ranks=29,9,2,24:29,9,1,25 --json --top 0)
memsim_error_test(ep_indivisible 2 "^memsim: --mesh ep=3: moe_mlp: routing 0 has 4 experts, not divisible by 3"
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --profile cpu --mesh ep=3)
memsim_error_test(ep_dense 2 "^memsim: --mesh ep=2: mlp has no mixture-of-experts routing"
  run graphs/mlp.json --profile cpu --mesh ep=2)
memsim_error_test(ep_ranks_count 2 "--moe-routing ranks=...: 1 ranks' counts for 2 ranks \\(--mesh ep=2\\); give one per rank"
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --batch 32 --profile cpu --mesh ep=2 --moe-routing ranks=29,9,2,24)
# reshard_after_forward=2 over 4 ranks (Note [FSDP2]): a half of each pair's gathered parameters kept.
memsim_golden_test(run_fsdp2_reshard_int run_fsdp2_reshard_int.txt
  run graphs/mlp.json --batch 64 --profile cpu --torch 2.13 --optimizer adam --step first --mesh dp_shard=4
  --wrap 0 --wrap 2 --wrap 4 --wrap 6 --wrap 8 --reshard-after-forward 2)
memsim_error_test(fsdp2_reshard_not_divisor 2 "--reshard-after-forward \"3\": expected true, false or a divisor of the shard ranks dp_shard\\*cp = 4"
  run graphs/mlp.json --profile cpu --mesh dp_shard=4 --reshard-after-forward 3)
memsim_error_test(fsdp2_reshard_int_tp 2 "--reshard-after-forward 2 with tp, ep, pp or dp_replicate in --mesh is not simulated yet"
  run tests/data/traces_tp_2_13/graphs/hf_llama_tp.json --profile cpu --mesh dp_shard=4,tp=2 --reshard-after-forward 2)
# FSDP2's CPUOffloadPolicy (--offload params): shards, grads and AdamW's state on the host; on the
# device the gathered layers, their grads and each unshard's copies of the host shards.
memsim_golden_test(run_fsdp2_offload_ranks run_fsdp2_offload_ranks.txt
  run tests/data/traces_2_13/graphs/cs336_small.json --batch 2 --set seq=256 --optimizer adamw --torch 2.13 --gpu H100-80GB
  --mesh dp_shard=4 --wrap "layers.*" --fsdp2-mp param=bf16,reduce=fp32 --offload params --steps 2 --top 3)
memsim_error_test(fsdp2_offload_optimizer 2 "FSDP2's CPUOffloadPolicy offloads parameters, grads and optimizer together: use --offload params"
  run graphs/cs336_small.json --batch 2 --mesh dp_shard=4 --offload optimizer)
# EP borrowing dp_shard (torchtitan): FSDP2 over 8 ranks, the experts' over efsdp = 4 on dim 1.
memsim_golden_test(run_ep_fsdp2_ranks run_ep_fsdp2_ranks.txt
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --batch 32 --profile cpu --torch 2.13 --optimizer adam --step first
  --mesh dp_shard=8,ep=2 --wrap moe.0 --moe-routing ranks=29,9,2,24:29,9,1,25:30,8,1,25:27,11,1,25:26,10,3,25:28,15,2,19:22,12,6,24:28,13,2,21)
memsim_error_test(ep_uneven_shard1 2 "--mesh dp_shard=24,ep=2: FSDP2 shards moe.0.experts.w1 on dim 1 \\(24 ranks > 4 experts\\) over 12 ranks, which do not divide its 256 rows"
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --profile cpu --batch 32 --mesh dp_shard=24,ep=2 --wrap moe.0)
memsim_error_test(ep_with_tp 2 "--mesh dp_shard=2,tp=2,ep=2: ep with tp or cp \\(or pp without dp_shard\\) is not simulated yet"
  run tests/data/traces_moe_2_13/graphs/moe_mlp.json --profile cpu --mesh dp_shard=2,tp=2,ep=2)

memsim_error_test(unknown_op 2 "bad/unknown_op.json: /ops/1/op: unknown op" run tests/cli/bad/unknown_op.json)
memsim_error_test(dangling_tensor 2 "/ops/0/inputs/0: unknown tensor \"nope\"" run tests/cli/bad/dangling.json)
memsim_error_test(negative_dim 2 "/inputs/0/shape/1: negative dimension" run tests/cli/bad/negative_dim.json)
memsim_error_test(overflow_dim 2 "/inputs/0/shape/0: dimension .* is too large" run tests/cli/bad/overflow_dim.json)
memsim_error_test(cycle 2 "/ops/0: op \"a\" is on a cycle" run tests/cli/bad/cycle.json)
memsim_error_test(bad_json 2 "bad_json.json:3:[0-9]+: invalid JSON" run tests/cli/bad/bad_json.json)
memsim_error_test(shape_mismatch 2 "/ops/0: linear \"h\": input \\[4, 10\\] does not match weight \\[5, 11\\]" run tests/cli/bad/shape_mismatch.json)
memsim_error_test(missing_file 2 "no_such.json: cannot open file" run tests/cli/bad/no_such.json)
memsim_error_test(unknown_optimizer 2 "unknown optimizer \"adamx\"" run graphs/mlp.json --optimizer adamx)
memsim_error_test(bad_freeze_glob 2 "--freeze \"zzz\\*\" matches no parameter" run graphs/mlp.json --freeze "zzz*")
memsim_error_test(memory_budget_not_recorded 2 "--memory-budget 0.3: .* records the partitioner.s programs for budgets 1, 0.5, 0 only: re-export with .export_torch.py MODEL --compile --memory-budget 1,0.5,0,0.3." run tests/data/traces_compile_2_13/graphs/mlp_b64_budgets.json --batch 64 --memory-budget 0.3)
memsim_error_test(memory_budget_eager_graph 2 "--memory-budget applies to a graph exported with --compile" run graphs/mlp.json --memory-budget 0)
memsim_error_test(unknown_gpu 2 "unknown --gpu \"Z80\"" run graphs/mlp.json --gpu Z80)
memsim_error_test(bad_alloc_conf 2 "max_split_size_mb" run graphs/mlp.json --alloc-conf "max_split_size_mb:abc")
memsim_error_test(bad_set 2 "--set \"batch\": expected SYMBOL=non-negative integer" run graphs/mlp.json --set batch)
# Errors of the command line itself (CLI11's, rewritten: sim/options/parse_error.h): one line
# starting with "memsim: ", naming the fix, exit 2.
memsim_error_test(unknown_subcommand 2 "^memsim: unknown command \"frobnicate\": the commands are run, summary, sweep" frobnicate)
memsim_error_test(misspelt_subcommand 2 "^memsim: unknown command \"rn\": did you mean run\\?" rn graphs/mlp.json)
memsim_error_test(no_subcommand 2 "^memsim: a command is needed: memsim COMMAND, one of run, summary")
memsim_error_test(misspelt_option 2 "^memsim: unknown option --optimiser: did you mean --optimizer\\?" run graphs/mlp.json --optimiser adam)
memsim_error_test(unknown_option 2 "^memsim: unknown option --zzzz \\(memsim run --help lists the options\\)" run graphs/mlp.json --zzzz)
memsim_error_test(extra_positional 2 "^memsim: unexpected argument \"b.json\": run takes one file" run graphs/mlp.json b.json)
memsim_error_test(missing_graph 2 "^memsim: run needs a graph file: memsim run GRAPH.json" run)
memsim_error_test(bad_choice 2 "^memsim: --profile \"cdua\": did you mean cuda\\? expected cuda, cpu" run graphs/mlp.json --profile cdua)
memsim_error_test(bad_dtype_choice 2 "^memsim: --amp \"x\": expected bf16, fp16, off \\(also bfloat16, float16, half, torch.bfloat16" run graphs/mlp.json --amp x)
memsim_error_test(not_an_integer 2 "^memsim: --batch \"x\": expected an integer" run graphs/mlp.json --batch x)
memsim_error_test(not_a_number 2 "^memsim: --clip-grad-norm \"abc\": expected a number" run graphs/mlp.json --clip-grad-norm abc)
memsim_error_test(flag_with_value 2 "^memsim: --cudnn-benchmark \"maybe\": expected no value: it is a flag" run graphs/mlp.json --cudnn-benchmark=maybe)
memsim_error_test(option_without_value 2 "^memsim: --batch needs a value" run graphs/mlp.json --batch)
# The wrong command for the file, the wrong syntax, and options that would change nothing.
memsim_error_test(run_of_snapshot 2 "^memsim: tests/data/robustness/snapshot_bad_settings.pickle: this is a memory snapshot \\(a pickle\\), not a graph: use memsim replay tests/data/robustness/snapshot_bad_settings.pickle"
  run tests/data/robustness/snapshot_bad_settings.pickle)
memsim_error_test(replay_of_graph 2 "^memsim: graphs/mlp.json: this is a memsim graph, not a memory snapshot: use memsim run graphs/mlp.json" replay graphs/mlp.json)
memsim_error_test(alloc_conf_equals 2 "^memsim: alloc-conf: 'expandable_segments=True': write key:value, e.g. expandable_segments:True"
  run graphs/mlp.json --alloc-conf expandable_segments=True)
memsim_error_test(timeline_png 2 "^memsim: --timeline \"t.png\": name a FILE.html .*, FILE.json .* or FILE.pickle" run graphs/mlp.json --timeline t.png)
memsim_error_test(world_alone 2 "^memsim: --world 4 alone changes nothing: it is the ranks of --zero or --fsdp \\(DDP: --ddp N\\)" run graphs/mlp.json --world 4)
memsim_error_test(batch_zero 2 "^memsim: --batch 0: expected 1 to 2\\^40 samples" run graphs/mlp.json --batch 0)
memsim_error_test(top_negative 2 "^memsim: --top -1: expected 0 or more" run graphs/mlp.json --top=-1)
memsim_error_test(ddp_with_deepspeed 2 "^memsim: --zero 1 \\(DeepSpeed\\) reduces the gradients itself: drop --ddp and give the ranks as --world 2"
  run graphs/mlp.json --ddp 2 --zero 1)

find_program(MEMSIM_PYTHON3 NAMES python3)
if(MEMSIM_PYTHON3)
  add_test(NAME validate_oracle_traces
           COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/validate.py --memsim $<TARGET_FILE:memsim>
                   --out ${CMAKE_BINARY_DIR}/validation.md
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endif()

memsim_golden_test(sweep_resnet18_json sweep_resnet18.json
  sweep graphs/resnet18.json --batch 8,64 --optimizer sgd,adam --profile cuda,cpu --gpu T4 --json --threads 2)
memsim_golden_test(sweep_mlp_csv sweep_mlp.csv sweep graphs/mlp.json --batch 1,256 --inplace-activations on,off --csv)
memsim_golden_test(fit_resnet50_text fit_resnet50.txt fit graphs/resnet50.json --gpu V100-16GB --optimizer adam)
memsim_golden_test(fit_gpt2_seq_json fit_gpt2_seq.json fit graphs/nanogpt_gpt2_small.json --search seq --batch 8 --gpu A100-40GB --optimizer adamw --json)
memsim_golden_test(fit_cs336_seq_text fit_cs336_seq.txt fit graphs/cs336_small.json --search seq --batch 8 --gpu A100-40GB --optimizer adamw)
# Not even batch 1 fits: fit proposes the single changes (advise) with which it does, each with the largest batch it then fits.
memsim_golden_test(fit_gpt2_large_proposals_text fit_gpt2_large_proposals.txt fit graphs/nanogpt_gpt2_large.json --gpu T4 --optimizer adamw)
memsim_golden_test(fit_gpt2_large_proposals_json fit_gpt2_large_proposals.json fit graphs/nanogpt_gpt2_large.json --gpu T4 --optimizer adamw --json)
# Out of memory has one meaning (Note [Would need] in docs/cli.md): a sweep row past the capacity
# gives what it would need and where it fails; fit's two answers and run agree at both batches.
memsim_golden_test(sweep_gpt2_oom_csv sweep_gpt2_oom.csv sweep graphs/nanogpt_gpt2_small.json --batch 4,8,16 --optimizer adamw --gpu T4 --csv)
memsim_golden_test(run_resnet50_fit_point_text run_resnet50_fit_point.txt run graphs/resnet50.json --gpu V100-16GB --optimizer adam --batch 176 --top 1)
memsim_golden_test(run_resnet50_fit_top_text run_resnet50_fit_top.txt run graphs/resnet50.json --gpu V100-16GB --optimizer adam --batch 131 --top 1)
memsim_error_test(fit_without_capacity 2 "fit needs a device capacity" fit graphs/mlp.json)
memsim_error_test(sweep_bad_set 2 "--set \"seq=1,x\": \"x\" is not a non-negative integer" sweep graphs/mlp.json --set seq=1,x)

function(memsim_golden_file_test name golden)
  set(file ${CMAKE_BINARY_DIR}/cli_${name}_${golden})
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:memsim>;${ARGN};--timeline;${file}" -DFILE=${file}
                   -DGOLDEN=${MEMSIM_CLI_DIR}/golden/${golden} -P ${MEMSIM_CLI_DIR}/scripts/run_golden.cmake
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()
memsim_golden_file_test(timeline_mlp_html timeline_mlp.html run graphs/mlp.json --batch 32 --optimizer adam)
memsim_golden_file_test(timeline_mnist_json timeline_mnist.json run graphs/mnist_cnn.json --batch 8 --profile cpu --torch 1.13)
# Note [Timeline page]: an OOM on two distinct ranks (ZeroRedundancyOptimizer's partitions): one
# panel per rank, the capacity and the OOM marked, the page's data embedded.
memsim_golden_file_test(timeline_mnist_zero1_oom_html timeline_mnist_zero1_oom.html
  run graphs/mnist_cnn.json --batch 32 --profile cpu --torch 1.13 --optimizer adam --zero 1 --world 2 --capacity 40000000)
# Note [Replay fragmentation]: the real recordings, the fragmentation at the peak and the what-ifs.
memsim_golden_test(replay_ctx256_text replay_ctx256.txt replay tests/data/gpu/transformer_small_ctx256_bs32_fwd_bwd_warm.pickle)
memsim_golden_test(replay_compiled_json replay_compiled.json
  replay tests/data/gpu/transformer_small_v50257_ctx64_bs1_compiled_step_warm.pickle --json)
memsim_golden_test(replay_resnet18_alloc_data_text replay_resnet18_alloc_data.txt
  replay tests/data/gpu/resnet18_bs8_sgd_momentum_first_iter_alloc_data.json)
memsim_golden_test(replay_no_history_text replay_no_history.txt replay tests/data/gpu/transformer_small_ctx256_no_history.pickle)
memsim_golden_test(replay_ctx256_expandable_json replay_ctx256_expandable.json
  replay tests/data/gpu/transformer_small_ctx256_bs32_fwd_bwd_warm.pickle --alloc-conf expandable_segments:True --json)
memsim_golden_test(advise_resnet18_text advise_resnet18.txt advise graphs/resnet18.json --batch 64 --optimizer adam --gpu T4)
memsim_golden_test(advise_bert_small_json advise_bert_small.json advise graphs/bert_small.json --batch 16 --optimizer adamw --json)
memsim_golden_test(advise_gpt2_oom_text advise_gpt2_oom.txt advise graphs/nanogpt_gpt2_small.json --batch 8 --optimizer adamw --gpu T4)
# Every change advise proposes, pasted into `memsim run` with the baseline's flags, gives the
# figures of its row (the flags are the change, not a description of it).
if(MEMSIM_PYTHON3)
  add_test(NAME cli.advise_args_reproduce_gpt2
           COMMAND ${MEMSIM_PYTHON3} ${MEMSIM_CLI_DIR}/scripts/advise_args.py $<TARGET_FILE:memsim>
                   graphs/nanogpt_gpt2_small.json --batch 8 --optimizer adamw --gpu T4
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  add_test(NAME cli.advise_args_reproduce_bert_ranks
           COMMAND ${MEMSIM_PYTHON3} ${MEMSIM_CLI_DIR}/scripts/advise_args.py $<TARGET_FILE:memsim>
                   graphs/bert_small.json --batch 16 --optimizer adamw --ddp 4 --torch 1.13 --gpu T4
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # --compile on replaces the baseline's --compile off (the compiled export's two forms)
  add_test(NAME cli.advise_args_reproduce_compile
           COMMAND ${MEMSIM_PYTHON3} ${MEMSIM_CLI_DIR}/scripts/advise_args.py $<TARGET_FILE:memsim>
                   tests/data/traces_compile_2_13/graphs/bert_small_b4_mb05.json --batch 4 --profile cpu --torch 2.13
                   --optimizer sgd --compile off
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endif()
memsim_error_test(advise_two_values 2 "advise takes one value per option" advise graphs/mlp.json --batch 1,2)

# Folder order: every #include goes down the pipeline (docs/README.md).
add_test(NAME layers.include_order COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/check_layers.py ${PROJECT_SOURCE_DIR})
add_test(NAME layers.checker_self_test COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/check_layers.py --self-test)
memsim_golden_test(run_resnet18_setups_cpu_json run_resnet18_setups_cpu.json
                   run graphs/resnet18.json --batch 4 --profile cpu --torch 1.13 --optimizer adam --accumulate 2 --clip-grad-norm 1 --checkpoint "layer?.?" --foreach on --json)
memsim_error_test(checkpoint_no_module 2 "--checkpoint \"zz\\*\" matches no module" run graphs/mlp.json --checkpoint "zz*")
memsim_golden_test(run_gpt2_paged_adamw8bit_json run_gpt2_paged_adamw8bit.json
  run tests/data/traces_2_13/graphs/nanogpt_gpt2_small.json --batch 8 --optimizer paged_adamw8bit --step steady --gpu A100-40GB --json --top 5)
memsim_error_test(negative_min_8bit_size 2 "--min-8bit-size -1: expected 0 to 2\\^50 elements" run graphs/mlp.json --optimizer adam8bit --min-8bit-size -1)
memsim_error_test(offload_adam8bit 2 "--offload with --optimizer adam8bit" run graphs/mlp.json --optimizer adam8bit --zero 2 --world 2 --offload optimizer)
memsim_error_test(foreach_adafactor 2 "--foreach on: memsim models adafactor's per-parameter loop only" run graphs/mlp.json --optimizer adafactor --foreach on)
memsim_error_test(fused_rmsprop 2 "--foreach fused: PyTorch has no fused rmsprop" run graphs/mlp.json --optimizer rmsprop --foreach fused)
# LoRA (Note [LoRA]): PEFT's usual Llama targets; 1,703,936 trainable parameters as peft's
# print_trainable_parameters() says for Llama 3.2 1B with r=16 on q_proj, v_proj.
memsim_golden_test(run_llama_1b_lora_text run_llama_1b_lora.txt
                   run graphs/llama_1b.json --batch 1 --set seq=512 --optimizer adamw --torch 1.13 --gpu A100-40GB --top 5
                   --lora "r=16,alpha=32,targets='*.q_proj,*.v_proj',dropout=0.05")
memsim_error_test(lora_no_target 2 "--lora targets: \"q_proj\" matches no Linear module of mlp" run graphs/mlp.json --lora r=8,targets=q_proj)
memsim_error_test(lora_bad_key 2 "--lora \"r=8,targets=0,bias=all\": unknown key \"bias\"" run graphs/mlp.json --lora r=8,targets=0,bias=all)
# QLoRA (Note [Quantized base weights]): the same adapters on an NF4 base with double
# quantization and bf16 compute, every Linear but lm_head quantized.
memsim_golden_test(run_llama_1b_qlora_text run_llama_1b_qlora.txt
                   run graphs/llama_1b.json --batch 1 --set seq=512 --optimizer adamw --torch 1.13 --gpu A100-40GB --top 5
                   --lora "r=16,alpha=32,targets='*.q_proj,*.v_proj',dropout=0.05"
                   --quantize-base nf4,double_quant=on,compute=bf16)
memsim_error_test(quantize_base_bad_format 2 "--quantize-base \"nf3\": type=nf3: expected nf4, fp4 or int8" run graphs/mlp.json --quantize-base nf3)
memsim_error_test(quantize_base_no_target 2 "--quantize-base targets: \"q_proj\" matches no Linear module of mlp" run graphs/mlp.json --quantize-base nf4,targets=q_proj)
memsim_error_test(accumulate_zero 2 "--accumulate 0: expected 1 to 1000000" run graphs/mlp.json --accumulate 0)
memsim_error_test(fp8_with_lora 2 "--lora on float8 Linears" run tests/data/traces_fp8_2_13/graphs/act_mlp_a.json --fp8 rowwise --lora r=4,targets=fc1)
memsim_error_test(fp8_fsdp_all_gather_without_fsdp2 2 "fsdp_float8_all_gather is FSDP2's float8 all-gather; give --mesh dp_shard=N"
  run tests/data/traces_fp8_2_13/graphs/act_mlp_a.json --fp8 tensorwise,fsdp_float8_all_gather)
memsim_error_test(fp8_fsdp_all_gather_rowwise 2 "fsdp_float8_all_gather needs tensorwise scaling"
  run tests/data/traces_fp8_2_13/graphs/act_mlp_a.json --fp8 rowwise,fsdp_float8_all_gather --mesh dp_shard=2)
memsim_error_test(fp8_amp_fp16 2 "--fp8 with --amp fp16: memsim models float8 training under bf16 autocast only"
  run tests/data/traces_fp8_2_13/graphs/act_mlp_a.json --fp8 tensorwise --amp fp16)
memsim_error_test(optimizer_in_backward_accumulate 2 "cannot be combined with --accumulate" run graphs/mlp.json --optimizer-in-backward on --accumulate 2)
# Numbers beyond what memsim models are refused, never saturated or wrapped (issue: size
# arithmetic outside the checked budget).
memsim_error_test(int_text_beyond_64_bits 2 "--batch: '99999999999999999999' does not fit in 64 bits" run graphs/mlp.json --batch 99999999999999999999)
memsim_error_test(int_list_beyond_64_bits 2 "--batch: '-99999999999999999999' does not fit in 64 bits" sweep graphs/mlp.json --batch 1,-99999999999999999999)
memsim_error_test(context_bytes_huge 2 "--context-bytes 9223372036854775807: expected 0 to 2\\^50 bytes" run graphs/mlp.json --context-bytes 9223372036854775807)
memsim_error_test(fit_max_batch_huge 2 "--max-batch 9223372036854775807: the batch limit must be 1 to 1099511627776" fit graphs/mlp.json --gpu T4 --max-batch 9223372036854775807)
memsim_error_test(threads_huge 2 "--threads 100000: expected 0 \\(every core\\) to" sweep graphs/mlp.json --batch 1,2 --threads 100000)
memsim_error_test(threads_negative 2 "--threads -1: expected 0 \\(every core\\) to" sweep graphs/mlp.json --batch 1 --threads=-1)

# The HTML timeline rendered in headless Chromium (Debian `chromium`, installed by `make deps`):
# the screenshot must show the stacked plot, the reserved and device-used lines and the capacity.
find_program(MEMSIM_CHROMIUM NAMES chromium chromium-browser)
if(MEMSIM_CHROMIUM AND MEMSIM_PYTHON3)
  add_test(NAME cli.timeline_screenshot_chromium
           COMMAND ${MEMSIM_PYTHON3} ${MEMSIM_CLI_DIR}/scripts/timeline_screenshot.py $<TARGET_FILE:memsim>
                   ${MEMSIM_CHROMIUM} ${CMAKE_BINARY_DIR}/timeline_screenshot
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.timeline_screenshot_chromium PROPERTIES TIMEOUT 300)
  # The page's DOM after its script ran: axis ticks and labels, capacity, peak and the OOM marker,
  # one panel per distinct rank (Note [Timeline page]).
  add_test(NAME cli.timeline_dom_chromium
           COMMAND ${MEMSIM_PYTHON3} ${MEMSIM_CLI_DIR}/scripts/timeline_dom.py $<TARGET_FILE:memsim>
                   ${MEMSIM_CHROMIUM} ${CMAKE_BINARY_DIR}/timeline_dom
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.timeline_dom_chromium PROPERTIES TIMEOUT 300)
else()
  add_test(NAME cli.timeline_screenshot_chromium
           COMMAND ${CMAKE_COMMAND} -E echo "chromium or python3 not found: run make deps")
  set_tests_properties(cli.timeline_screenshot_chromium PROPERTIES WILL_FAIL TRUE)
  add_test(NAME cli.timeline_dom_chromium COMMAND ${CMAKE_COMMAND} -E echo "chromium or python3 not found: run make deps")
  set_tests_properties(cli.timeline_dom_chromium PROPERTIES WILL_FAIL TRUE)
endif()

# The whole device: three levels, the range and the verdict; bad device options exit 2.
memsim_golden_test(run_resnet50_uncertain_text run_resnet50_uncertain.txt
  run graphs/resnet50.json --batch 32 --optimizer adam --gpu A100-40GB --capacity 6000000000 --top 3)
memsim_golden_test(run_resnet18_does_not_fit_text run_resnet18_does_not_fit.txt
  run graphs/resnet18.json --batch 64 --optimizer adam --gpu T4 --capacity 2000000000 --top 3)
memsim_golden_test(run_mlp_context_json run_mlp_context.json
  run graphs/mlp.json --batch 64 --optimizer adam --gpu H100 --context-bytes 600000000 --cudnn-workspace max --json --top 2)
memsim_error_test(bad_cudnn_workspace 2 "--cudnn-workspace \"fast\": expected none, typical, max or a byte count"
  run graphs/mlp.json --cudnn-workspace fast)
memsim_error_test(negative_cudnn_workspace 2 "--cudnn-workspace -1: bytes must be non-negative"
  run graphs/resnet18.json --cudnn-workspace=-1)
memsim_error_test(negative_context_bytes 2 "--context-bytes -5: expected 0 to 2\\^50 bytes"
  run graphs/mlp.json --context-bytes=-5)
memsim_error_test(sweep_every_row_invalid 2 "unknown optimizer \"adamx\"" sweep graphs/mlp.json --batch 1,2 --optimizer adamx)

# Several ranks (issue 10): the per-rank report (Notes [DDP], [ZeRO], [FSDP], [DataParallel]).
memsim_golden_test(run_mnist_zero1_cpu_json run_mnist_zero1_cpu.json
  run graphs/mnist_cnn.json --batch 32 --profile cpu --torch 1.13 --optimizer adam --zero 1 --world 2 --json --top 3)
memsim_golden_test(run_bert_small_data_parallel_text run_bert_small_data_parallel.txt
  run graphs/bert_small.json --batch 32 --optimizer adam --data-parallel 4 --gpu V100-16GB --top 3)
memsim_golden_test(run_bert_small_fsdp_json run_bert_small_fsdp.json
  run graphs/bert_small.json --batch 8 --optimizer adamw --fsdp full --world 8 --wrap "text.enc.layers.?" --gpu A100-40GB --json --top 3)
memsim_error_test(zero2_cpu 2 "--zero 2 on the cpu profile" run graphs/mlp.json --profile cpu --torch 1.13 --zero 2 --world 2)
memsim_error_test(zero_without_world 2 "--zero needs --world N" run graphs/mlp.json --zero 1)
memsim_error_test(wrap_matches_nothing 2 "--wrap \"zzz\" matches no module" run graphs/mlp.json --fsdp full --world 2 --wrap zzz)
memsim_error_test(offload_without_zero 2 "--offload needs --zero" run graphs/mlp.json --offload optimizer)
# Mixed-precision ZeRO and FSDP (Notes [ZeRO mixed precision], [FSDP mixed precision]).
memsim_golden_test(run_bert_small_zero3_fp16_json run_bert_small_zero3_fp16.json
  run graphs/bert_small.json --batch 8 --optimizer adam --zero 3 --world 8 --dtype fp16 --gpu A100-40GB --json --top 3)
memsim_golden_test(run_bert_small_fsdp_bf16_text run_bert_small_fsdp_bf16.txt
  run graphs/bert_small.json --batch 8 --optimizer adamw --fsdp full --world 8 --wrap "text.enc.layers.?" --fsdp-mixed-precision bf16 --gpu A100-40GB --top 3)
memsim_error_test(fsdp_mixed_precision_without_fsdp 2 "--fsdp-mixed-precision needs --fsdp"
  run graphs/mlp.json --zero 2 --world 2 --fsdp-mixed-precision bf16)
memsim_error_test(fsdp_mixed_precision_with_dtype 2 "--fsdp-mixed-precision casts an fp32 model"
  run graphs/mlp.json --fsdp full --world 2 --dtype bf16 --fsdp-mixed-precision bf16)
memsim_error_test(zero_fp16_with_amp 2 "does not combine with --amp"
  run graphs/mlp.json --zero 2 --world 2 --dtype fp16 --amp fp16)
if(MEMSIM_PYTHON3)
  add_test(NAME scenarios.alexnet_amp_up_to_date
           COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/scenarios/alexnet_amp.py --memsim $<TARGET_FILE:memsim> --check
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  add_test(NAME scenarios.multi_gpu_up_to_date
           COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/scenarios/multi_gpu.py --memsim $<TARGET_FILE:memsim> --check
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  add_test(NAME scenarios.llm_parallel_up_to_date
           COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/scenarios/llm_parallel.py --memsim $<TARGET_FILE:memsim> --check
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  add_test(NAME scenarios.finetune_up_to_date
           COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/scenarios/finetune.py --memsim $<TARGET_FILE:memsim> --check
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endif()
# Training setups of issue 8: autocast + GradScaler, and a three-step loop (per-step peaks).
memsim_golden_test(run_mlp_amp_fp16_json run_mlp_amp_fp16.json run graphs/mlp.json --batch 64 --optimizer adam --amp fp16 --json)
memsim_golden_test(run_mlp_steps3_text run_mlp_steps3.txt
                   run graphs/mlp.json --batch 32 --profile cpu --torch 1.13 --optimizer adam --steps 3 --loop-holds output)
memsim_error_test(bad_steps 2 "--steps 0: expected 1 to 1000" run graphs/mlp.json --steps 0)

# --config FILE (Note [Config files]): the report of a DeepSpeed / Hugging Face / accelerate /
# torchtitan file is the report of the flags it means, and the file's note names what it ignored.
function(memsim_config_test name config flags expect_stderr)
  add_test(NAME cli.config_${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD_A=$<TARGET_FILE:memsim>;run;graphs/cs336_small.json;--config;tests/data/configs/${config};${ARGN}"
                   "-DCMD_B=$<TARGET_FILE:memsim>;run;graphs/cs336_small.json;${flags};${ARGN}"
                   "-DEXPECT_STDERR=${expect_stderr}" -P ${MEMSIM_CLI_DIR}/scripts/run_same.cmake
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()
memsim_config_test(deepspeed deepspeed_zero2_offload.json
  "--batch;4;--accumulate;2;--clip-grad-norm;1.0;--zero;2;--offload;optimizer;--zero-overlap-comm;on;--dtype;bf16;--optimizer;adamw"
  "unknown keys, ignored: /my_custom_key" --world 4 --gpu A100-40GB)
memsim_config_test(training_args training_args_qlora.json
  "--batch;2;--accumulate;4;--clip-grad-norm;0.3;--checkpoint;@blocks;--amp;bf16;--optimizer;paged_adamw8bit"
  "read as a TrainingArguments config" --gpu T4)
memsim_config_test(accelerate_fsdp accelerate_fsdp.yaml
  "--fsdp;full;--wrap;@blocks;--world;8;--checkpoint;@blocks;--fsdp-mixed-precision;bf16"
  "read as an accelerate config" --optimizer adamw)
memsim_config_test(command_line_wins training_args_deepspeed.json
  "--accumulate;2;--clip-grad-norm;1.0;--zero;3;--offload;params;--zero-overlap-comm;on;--optimizer;adamw;--dtype;bf16"
  "the command line's own --batch kept" --batch 1 --world 2)
memsim_error_test(config_needs_world 2 "torchtitan_llama3_8b.toml: /parallelism/data_parallel_shard_degree: -1 takes the ranks"
  run graphs/cs336_small.json --config tests/data/configs/torchtitan_llama3_8b.toml)
memsim_error_test(config_bad_key 2 "a.json: /zero_optimization/stage: 7 is out of range"
  run graphs/cs336_small.json --config tests/cli/bad/configs/a.json)
memsim_error_test(zero_knobs_need_zero 2 "--zero-bucket-size, --zero-overlap-comm and --zero-persistence-threshold are DeepSpeed ZeRO's: give --zero"
  run graphs/mlp.json --zero-bucket-size 1000)
memsim_error_test(block_selector_bad 2 "--checkpoint \"@blocks%0=0\": a selector is @blocks or @blocks%K=R"
  run graphs/cs336_small.json --checkpoint "@blocks%0=0")
# FSDP2 (--mesh dp_shard=N, Note [FSDP2]): the per-rank report; 3 ranks leave the last one fewer rows.
memsim_golden_test(run_mlp_fsdp2_ranks run_mlp_fsdp2_ranks.txt
  run tests/data/traces_2_13/graphs/mlp.json --batch 64 --optimizer adam --profile cpu --torch 2.13 --mesh dp_shard=3 --wrap "?")
memsim_error_test(fsdp2_reshard_without_mesh 2 "^memsim: --reshard-after-forward needs --mesh dp_shard=N \\(FSDP2\\)"
  run graphs/mlp.json --reshard-after-forward false)
memsim_error_test(fsdp2_mp_bad 2 "^memsim: --fsdp2-mp \"param=fp8\": expected param=fp16\\|bf16 and reduce=fp32\\|fp16\\|bf16"
  run graphs/mlp.json --mesh dp_shard=2 --fsdp2-mp param=fp8)
# Tensor parallel (Note [Tensor parallel]): the per-rank report of a Hugging Face Llama at tp=2
# (rank 0 is the scatter source of parallelize_module), and the refusals.
memsim_golden_test(run_hf_llama_tp2_ranks_text run_hf_llama_tp2_ranks.txt
  run tests/data/traces_hf_2_13/graphs/hf_llama_tiny.json --profile cpu --batch 2 --optimizer adamw --mesh tp=2)
memsim_golden_test(run_hf_llama_tp2_ranks_json run_hf_llama_tp2_ranks.json
  run tests/data/traces_hf_2_13/graphs/hf_llama_tiny.json --profile cpu --batch 2 --optimizer adamw --mesh tp=2 --json --top 3)
memsim_error_test(tp_indivisible 2 "^memsim: --mesh tp=3: layers.0.self_attn.q_proj \\(layers.0.self_attn.q_proj.weight\\): size 2048 on dim 0 is not divisible by 3"
  run graphs/llama_1b.json --batch 1 --mesh tp=3)
memsim_error_test(tp_no_linear 2 "^memsim: --mesh tp=2: the plan layers selects no Linear of mlp" run graphs/mlp.json --batch 1 --mesh tp=2)
# The 2-D mesh FSDP2 × TP (Note [FSDP2]): TP's shards, then sharded on dim 0 over dp_shard; the
# ranks differ by both coordinates (the tp group's first rank scatters, the dp_shard rank's rows).
memsim_golden_test(run_hf_llama_fsdp2_tp_ranks run_hf_llama_fsdp2_tp_ranks.txt
  run tests/data/traces_tp_2_13/graphs/hf_llama_tp.json --profile cpu --torch 2.13 --batch 2 --set seq=128 --optimizer adamw
  --mesh dp_shard=2,tp=2 --wrap "model.layers.?" --top 3)
memsim_golden_test(run_hf_llama_hsdp_tp_ranks run_hf_llama_hsdp_tp_ranks.txt
  run tests/data/traces_tp_2_13/graphs/hf_llama_tp.json --profile cpu --torch 2.13 --batch 2 --set seq=128 --optimizer adamw
  --mesh dp_replicate=2,dp_shard=2,tp=2 --wrap "model.layers.*" --top 3)
memsim_error_test(tp_sequence_parallel_layers 2 "the layers plan keeps the embedding replicated.*give --tp-plan torchtitan"
  run graphs/llama_1b.json --batch 1 --mesh tp=2 --sequence-parallel on)
# torchtitan's whole plan with sequence parallelism (Note [Tensor parallel]): the embedding
# RowwiseParallel, the residual stream sharded on the sequence, the logits gathered.
memsim_golden_test(run_hf_llama_tp2_torchtitan_sp_ranks run_hf_llama_tp2_torchtitan_sp_ranks.txt
  run tests/data/traces_tp_2_13/graphs/hf_llama_tp.json --profile cpu --torch 2.13 --batch 2 --set seq=128 --optimizer adamw
  --mesh tp=2 --tp-plan torchtitan --sequence-parallel on --top 3)
# Context parallel (Note [Context parallel]): every rank of the ring at cp=2 (head-tail load
# balancing: rank 0 merges a second half, rank 1 a half K/V chunk), and the refusals.
memsim_golden_test(run_hf_llama_cp2_ranks run_hf_llama_cp2_ranks.txt
  run tests/data/traces_hf_2_13/graphs/hf_llama_tiny.json --profile cpu --torch 2.13 --batch 2 --set seq=64 --optimizer adamw
  --mesh cp=2 --top 3)
memsim_error_test(cp_indivisible 2 "^memsim: --mesh cp=3 does not divide seq 64"
  run tests/data/traces_hf_2_13/graphs/hf_llama_tiny.json --profile cpu --batch 2 --set seq=64 --mesh cp=3)
memsim_error_test(cp_no_seq 2 "^memsim: --mesh cp: mlp has no seq symbol" run graphs/mlp.json --batch 1 --mesh cp=2)
# Note [Meta-device init]: the shards of a sharded model (with pp, each stage's own).
memsim_error_test(init_meta_needs_sharding 2 "--init meta needs tp=N or dp_shard=N in --mesh"
  run graphs/cs336_small.json --mesh pp=2 --init meta)
# Checkpointing in a split backward: recomputed once per I and per W group pass (the config of
# tests/data/traces_pp_2_13/cs336_small_b4_s64_adamw_pp2_zbv_m4_ac); SAC and reentrant refused there.
memsim_golden_test(run_cs336_pp2_zbv_ac_ranks run_cs336_pp2_zbv_ac_ranks.txt
  run tests/data/traces_2_13/graphs/cs336_small.json --batch 4 --set seq=64 --profile cpu --torch 2.13 --optimizer adamw
  --step first --inplace-activations off --mesh pp=2 --pp-schedule zbv --pp-stages-per-rank 2 --microbatches 4
  --checkpoint "layers.*" --top 3)
memsim_error_test(pp_sac_split_backward_pending 2 "^memsim: --sac or --checkpoint-impl reentrant with --pp-schedule zbvzerobubble \\(a split backward\\) is not simulated yet; full non-reentrant --checkpoint is"
  run graphs/cs336_small.json --batch 4 --mesh pp=2 --pp-schedule zbvzerobubble --checkpoint "layers.*" --checkpoint-impl reentrant)
memsim_error_test(cp_tp_pending 2 "^memsim: --mesh cp=2,tp=2: cp with tp, pp or dp_replicate is not simulated yet"
  run graphs/llama_1b.json --batch 1 --mesh cp=2,tp=2)
# Pipeline parallel (Note [Pipeline parallel]): every stage rank with its schedule's timeline, and
# the refusals (a schedule not simulated, microbatches not dividing the batch).
memsim_golden_test(run_cs336_pp2_1f1b_ranks run_cs336_pp2_1f1b_ranks.txt
  run tests/data/traces_2_13/graphs/cs336_small.json --profile cpu --torch 2.13 --batch 4 --set seq=64 --optimizer adamw
  --mesh pp=2 --pp-schedule 1f1b --microbatches 4 --top 3)
memsim_golden_test(run_cs336_pp2_interleaved_ranks run_cs336_pp2_interleaved_ranks.txt
  run tests/data/traces_2_13/graphs/cs336_small.json --profile cpu --torch 2.13 --batch 4 --set seq=64 --optimizer sgd
  --mesh pp=2 --pp-schedule interleaved1f1b --pp-stages-per-rank 2 --microbatches 4 --top 3)
memsim_golden_test(run_cs336_pp2_zbv_ranks run_cs336_pp2_zbv_ranks.txt
  run tests/data/traces_2_13/graphs/cs336_small.json --profile cpu --torch 2.13 --batch 4 --set seq=64 --optimizer sgd
  --mesh pp=2 --pp-schedule zbvzerobubble --microbatches 4 --top 3)
# The 2-D mesh PP × FSDP2 (Note [FSDP2]): fully_shard on each stage's blocks and stage module;
# the dp_shard ranks of a stage are identical here (even dims 0); the split-backward schedules and
# pp with cp are refused.
memsim_golden_test(run_cs336_pp2_dp2_1f1b_ranks run_cs336_pp2_dp2_1f1b_ranks.txt
  run tests/data/traces_2_13/graphs/cs336_small.json --profile cpu --torch 2.13 --batch 4 --set seq=64 --optimizer adamw
  --mesh pp=2,dp_shard=2 --pp-schedule 1f1b --microbatches 4 --wrap "layers.*" --reshard-after-forward false --top 3)
memsim_error_test(pp_fsdp2_zbv_reshard_pending 2 "^memsim: --mesh pp=2,dp_shard=2: FSDP2 \\(dp_shard\\) with --pp-schedule zbvzerobubble and reshard_after_forward is not simulated: in torch 2.13 its split backward leaves some parameters without grads"
  run graphs/cs336_small.json --batch 4 --mesh pp=2,dp_shard=2 --pp-schedule zbvzerobubble)
# FSDP2 inside ZBV (split backward, Note [Pipeline parallel]): the hooks in the input passes only.
memsim_golden_test(run_hf_llama_pp2_dp2_zbv_mp_ranks run_hf_llama_pp2_dp2_zbv_mp_ranks.txt
  run tests/data/traces_pp_tp_2_13/graphs/hf_llama_pp_bf16.json --profile cpu --torch 2.13 --batch 4 --set seq=64
  --optimizer adamw --mesh pp=2,dp_shard=2 --pp-schedule zbv --pp-stages-per-rank 2 --microbatches 4
  --wrap "model.layers.*" --reshard-after-forward false --fsdp2-mp param=bf16,reduce=fp32 --top 3)
memsim_error_test(pp_cp_pending 2 "^memsim: --mesh pp=2,cp=2: pp with cp is not simulated yet"
  run graphs/llama_1b.json --batch 1 --mesh pp=2,cp=2)
# PP × TP and the 3-D mesh PP × FSDP2 × TP (Note [Pipeline parallel]): a Hugging Face Llama (its
# rotary tables made again on the second stage); tp 0 and 1 of each stage are distinct ranks.
memsim_golden_test(run_hf_llama_pp2_tp2_1f1b_ranks run_hf_llama_pp2_tp2_1f1b_ranks.txt
  run tests/data/traces_pp_tp_2_13/graphs/hf_llama_pp.json --profile cpu --torch 2.13 --batch 4 --set seq=64 --optimizer adamw
  --mesh pp=2,tp=2 --pp-schedule 1f1b --microbatches 4 --top 3)
memsim_golden_test(run_hf_llama_pp2_dp2_tp2_1f1b_ranks run_hf_llama_pp2_dp2_tp2_1f1b_ranks.txt
  run tests/data/traces_pp_tp_2_13/graphs/hf_llama_pp.json --profile cpu --torch 2.13 --batch 4 --set seq=64 --optimizer adamw
  --mesh pp=2,dp_shard=2,tp=2 --pp-schedule 1f1b --microbatches 4 --wrap "model.layers.*" --reshard-after-forward false --top 3)
# torchtitan's flow on the 3-D mesh: built on the meta device, MixedPrecisionPolicy(bf16, fp32) (the grads
# accumulate over the microbatches in fp32: unsharded_accumulated_grad), every layer checkpointed.
memsim_golden_test(run_hf_llama_pp2_dp2_tp2_mp_meta_ac_ranks run_hf_llama_pp2_dp2_tp2_mp_meta_ac_ranks.txt
  run tests/data/traces_pp_tp_2_13/graphs/hf_llama_pp_bf16.json --profile cpu --torch 2.13 --batch 4 --set seq=64 --optimizer adamw
  --mesh pp=2,dp_shard=2,tp=2 --pp-schedule 1f1b --microbatches 4 --wrap "model.layers.*" --reshard-after-forward false
  --fsdp2-mp param=bf16,reduce=fp32 --init meta --checkpoint "model.layers.*" --top 3)
memsim_error_test(pp_loopedbfs_pending 2 "^memsim: --pp-schedule loopedbfs is not simulated yet \\(its action lists are not transcribed\\)"
  run graphs/cs336_small.json --batch 4 --mesh pp=2 --pp-schedule loopedbfs)
memsim_error_test(pp_dualpipev_microbatches 2 "^memsim: --pp-schedule dualpipev: DualPipeV requires at least as many microbatches as stages, but got 2 microbatches and 4 stages"
  run graphs/cs336_small.json --batch 4 --mesh pp=2 --pp-schedule dualpipev --microbatches 2)
memsim_error_test(pp_stages_per_rank_single 2 "^memsim: --pp-stages-per-rank 2: --pp-schedule 1f1b runs one stage per rank"
  run graphs/cs336_small.json --batch 4 --mesh pp=2 --pp-schedule 1f1b --pp-stages-per-rank 2)
memsim_error_test(pp_interleaved_rounds 2 "^memsim: --pp-schedule interleaved1f1b: Interleaved 1F1B requires the number of microbatches to be a multiple of the number of rounds \\(2\\), but got 5"
  run graphs/cs336_small.json --batch 5 --mesh pp=2 --pp-schedule interleaved1f1b --microbatches 5)
memsim_error_test(pp_uneven_microbatches 2 "^memsim: --microbatches 3 does not divide --batch 4"
  run graphs/cs336_small.json --batch 4 --mesh pp=2 --microbatches 3)
memsim_error_test(pp_options_without_pp 2 "^memsim: --pp-schedule, --microbatches, --pp-split and --pp-stages-per-rank need pp=N in --mesh"
  run graphs/cs336_small.json --batch 4 --microbatches 2)
memsim_error_test(pp_no_blocks 2 "^memsim: --mesh pp: mlp has no repeated blocks"
  run graphs/mlp.json --batch 4 --mesh pp=2)
memsim_error_test(tp_plan_without_tp 2 "^memsim: --tp-plan, --sequence-parallel and --loss-parallel need tp=N in --mesh"
  run graphs/llama_1b.json --batch 1 --sequence-parallel on)

# Robustness (issue 25 item 10): numbers from options and files are range-checked before any
# work, recorded optimizer programs are checked per program, messages quote an excerpt.
memsim_error_test(shard_beyond_64_bits 2 "^memsim: --shard: '99999999999999999999' does not fit in 64 bits"
  sweep graphs/mlp.json --batch 1,2 --csv --shard 1/99999999999999999999)
memsim_error_test(shard_with_sign 2 "^memsim: --shard: '\\+1/2' is not K/N"
  sweep graphs/mlp.json --batch 1,2 --csv --shard +1/2)
memsim_error_test(shard_count_too_large 2 "^memsim: --shard: '2000000' is out of range \\[1, 1000000\\]"
  sweep graphs/mlp.json --batch 1,2 --csv --shard 1/2000000)
memsim_error_test(merge_part_with_huge_shard_count 2 "sweep_part_huge_shards.csv: shard: '99999999999' is out of range"
  merge ${CMAKE_BINARY_DIR}/merged_huge.csv tests/cli/bad/sweep_part_huge_shards.csv)
memsim_error_test(work_budget 2 "^memsim: --steps 1000 × --accumulate 1000000 × [0-9]+ ops of mlp = .* op runs: .*lower --steps or --accumulate"
  run graphs/mlp.json --steps 1000 --accumulate 1000000)
memsim_error_test(recorded_optimizer_size_overflow 2 "bytes is more than memsim models"
  run tests/cli/bad/optimizer_huge_size.json --optimizer recorded --step steady)
memsim_error_test(recorded_optimizer_steady_double_free 2
  "/optimizer/steady_step: the step frees its 1 state tensors and makes none to replace them"
  run tests/cli/bad/optimizer_steady_double_free.json --optimizer recorded)
memsim_error_test(min_8bit_size_too_large 2 "^memsim: --min-8bit-size 9223372036854775807: expected 0 to 2\\^50"
  run graphs/mlp.json --optimizer adam8bit --min-8bit-size 9223372036854775807)
memsim_error_test(conv_workspace_too_large 2 "^memsim: --conv-workspace 1125899906842625: expected 0 to 2\\^50"
  run graphs/mlp.json --conv-workspace 1125899906842625)
memsim_error_test(set_value_too_large 2 "^memsim: --set \"batch=1099511627777\": 1099511627777: expected at most 2\\^40"
  run graphs/mlp.json --set batch=1099511627777)
string(REPEAT "a" 3000 MEMSIM_LONG_GLOB)
memsim_error_test(long_glob_is_quoted_as_an_excerpt 2 "^memsim: --freeze \"a+\\.\\.\\.\" matches no parameter of mlp\n$"
  run graphs/mlp.json --freeze ${MEMSIM_LONG_GLOB})
memsim_error_test(cublas_workspace_minus_one 2 "^memsim: --cublas-workspace -1: expected 0 to 2\\^50"
  run graphs/mlp.json --cublas-workspace -1)
# torch.compile (Note [Compiled regions]): --explain lists what the partitioner recomputes in backward
# (the MLP at budget 0: each Linear+ReLU recomputed; one of them alive at the backward peak)
memsim_golden_test(run_compiled_recompute_explain_text run_compiled_recompute_explain.txt
  run tests/data/traces_compile_2_13/graphs/mlp_b64_budgets.json --batch 64 --profile cpu --torch 2.13
  --optimizer sgd --memory-budget 0 --explain --top 10)
memsim_golden_test(run_compiled_recompute_explain_json run_compiled_recompute_explain.json
  run tests/data/traces_compile_2_13/graphs/rms_mlp_b64_mb0.json --batch 64 --profile cpu --torch 2.13
  --optimizer sgd --explain --top 2 --json)
# torch.compile on or off (lib/ir/compile_mode.h): a compiled export keeps the eager ops beside its
# regions; advise proposes running eager on the compiled graph and compiling under --compile off
# (CS336 small with SGD: the compiled backward peaks higher than the eager one, so running eager
# saves; BERT-small at budget 0.5: compiling saves)
memsim_golden_test(advise_compiled_text advise_compiled.txt
  advise tests/data/traces_compile_2_13/graphs/cs336_small_b2_s64.json --batch 2 --set seq=64 --profile cpu
  --torch 2.13 --optimizer sgd)
memsim_golden_test(advise_compile_off_json advise_compile_off.json
  advise tests/data/traces_compile_2_13/graphs/bert_small_b4_mb05.json --batch 4 --profile cpu --torch 2.13
  --optimizer sgd --compile off --json)
memsim_golden_test(advise_eager_compile_note_text advise_eager_compile_note.txt
  advise graphs/mlp.json --batch 256 --profile cpu --torch 2.13 --optimizer adam)
memsim_error_test(compile_on_eager_graph 2 "--compile on: graphs/mlp.json has no compiled regions: export the model with .tools/export_torch.py MODEL --compile."
  run graphs/mlp.json --compile on)
memsim_error_test(compile_off_with_budget 2 "--memory-budget selects a compiled program: give it without --compile off"
  run tests/data/traces_compile_2_13/graphs/mlp_b64_budgets.json --batch 64 --compile off --memory-budget 0)
# EP borrowing dp_shard on each pipeline stage (Note [Expert parallel]): the recorded routing of
# tests/data/traces_ep_2_13/moe_decoder_tiny_b4_s64_adamw_pp2_dp4_ep2_1f1b_m4 (one microbatch's counts).
memsim_golden_test(run_moe_pp2_dp4_ep2_1f1b_ranks run_moe_pp2_dp4_ep2_1f1b_ranks.txt
  run tests/data/traces_moe_2_13/graphs/moe_decoder_tiny.json --batch 4 --set seq=64 --profile cpu --torch 2.13
  --optimizer adamw --step first --mesh pp=2,dp_shard=4,ep=2 --pp-schedule 1f1b --microbatches 4 --wrap "layers.*"
  --reshard-after-forward false --top 3
  --moe-routing ranks=30,32,32,34/32,35,34,27:31,37,31,29/26,32,31,39:34,33,31,30/28,35,38,27:31,40,31,26/38,31,35,24:30,32,32,34/32,35,34,27:31,37,31,29/26,32,31,39:34,33,31,30/28,35,38,27:31,40,31,26/38,31,35,24)
memsim_error_test(ep_pp_without_dp_shard 2 "--mesh pp=2,ep=2: ep with tp or cp \\(or pp without dp_shard\\) is not simulated yet"
  run tests/data/traces_moe_2_13/graphs/moe_decoder_tiny.json --profile cpu --mesh pp=2,ep=2)
memsim_error_test(run_rank_outside 2 "^memsim: --rank 8: expected a rank from 0 to 7"
  run tests/data/traces_moe_2_13/graphs/moe_decoder_tiny.json --profile cpu --batch 4 --set seq=64 --mesh pp=2,dp_shard=4,ep=2
  --wrap "layers.*" --rank 8 --events ${CMAKE_CURRENT_BINARY_DIR}/rank_outside.events)
