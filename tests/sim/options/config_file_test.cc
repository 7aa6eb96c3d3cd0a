// --config: DeepSpeed, TrainingArguments, accelerate and torchtitan files read as memsim options
// (Note [Config files] in docs/cli.md), every key ignored named, hostile files refused.
#include "sim/options/config_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/test_data.h"

namespace memsim::cli {
namespace {

using test_data::TestDataPath;

std::string Flags(const ConfigFile& f) {
  std::string out;
  for (const auto& [flag, value] : f.options) out += (out.empty() ? "" : " ") + flag + (value.empty() ? "" : " " + value);
  return out;
}

ConfigFile ReadOk(const std::string& name, int64_t world = 0) {
  Result<ConfigFile> f = ReadConfigFile(TestDataPath("configs/" + name), world);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : ConfigFile{};
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

/// A file with |text| under /tmp, removed at the end of the test.
class TempConfig {
 public:
  TempConfig(const std::string& name, const std::string& text) : path_(std::string(::testing::TempDir()) + name) {
    std::ofstream(path_) << text;
  }
  ~TempConfig() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ErrorOf(const std::string& name, const std::string& text) {
  TempConfig f(name, text);
  Result<ConfigFile> r = ReadConfigFile(f.path());
  EXPECT_FALSE(r.ok()) << name;
  return r.ok() ? "" : r.status().message();
}

TEST(ConfigFile, DeepSpeedZero2Offload) {
  ConfigFile f = ReadOk("deepspeed_zero2_offload.json");
  EXPECT_EQ(f.format, "DeepSpeed");
  EXPECT_EQ(Flags(f), "--batch 4 --accumulate 2 --clip-grad-norm 1.0 --zero 2 --offload optimizer "
                      "--zero-overlap-comm on --dtype bf16 --optimizer adamw");
  EXPECT_TRUE(Contains(f.no_effect, "/zero_optimization/allgather_bucket_size"));
  EXPECT_EQ(f.unknown, std::vector<std::string>{"/my_custom_key"});
  EXPECT_TRUE(Contains(f.no_effect, "/optimizer/params/lr"));
  EXPECT_TRUE(Contains(f.no_effect, "/train_batch_size"));
}

TEST(ConfigFile, HuggingFaceAutoValuesAreLeftToTheTrainingArguments) {
  ConfigFile f = ReadOk("training_args_deepspeed.json");
  EXPECT_EQ(f.format, "TrainingArguments");
  // DeepSpeed's "auto" batch, accumulation and clipping come from the TrainingArguments; bf16
  // under ZeRO is DeepSpeed's bf16 mode (--dtype); the ZeRO-3 optimizer section wins over optim.
  EXPECT_EQ(Flags(f), "--batch 4 --accumulate 2 --clip-grad-norm 1.0 --zero 3 --offload params --zero-overlap-comm on "
                      "--optimizer adamw --dtype bf16");
  EXPECT_TRUE(f.unknown.empty()) << f.Describe();
}

TEST(ConfigFile, TrainingArgumentsDefaultsApplyToAbsentKeys) {
  TempConfig t("args.json", R"({"output_dir": "x"})");
  Result<ConfigFile> f = ReadConfigFile(t.path());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // per_device_train_batch_size 8, max_grad_norm 1.0, adamw_torch_fused (transformers 5, torch >= 2.8).
  EXPECT_EQ(Flags(*f), "--batch 8 --clip-grad-norm 1.0 --optimizer adamw --foreach fused");
}

TEST(ConfigFile, TrainingArgumentsCheckpointingEveryNLayers) {
  TempConfig t("args.json", R"({"output_dir": "x", "activation_checkpointing": true,
      "activation_checkpointing_kwargs": {"every_n_layers": 3, "use_reentrant": true}, "optim": "adamw_torch"})");
  Result<ConfigFile> f = ReadConfigFile(t.path());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Flags(*f), "--batch 8 --clip-grad-norm 1.0 --checkpoint @blocks%3=0 --checkpoint-impl reentrant "
                       "--optimizer adamw");
}

TEST(ConfigFile, QloraTrainingArguments) {
  ConfigFile f = ReadOk("training_args_qlora.json");
  EXPECT_EQ(Flags(f), "--batch 2 --accumulate 4 --clip-grad-norm 0.3 --checkpoint @blocks --amp bf16 "
                      "--optimizer paged_adamw8bit");
}

TEST(ConfigFile, AccelerateFsdpDeepSpeedAndDdp) {
  EXPECT_EQ(Flags(ReadOk("accelerate_fsdp.yaml")),
            "--fsdp full --wrap @blocks --world 8 --checkpoint @blocks --fsdp-mixed-precision bf16");
  EXPECT_EQ(Flags(ReadOk("accelerate_deepspeed.yaml")),
            "--zero 2 --offload optimizer --accumulate 4 --clip-grad-norm 1.0 --world 4 --dtype bf16");
  EXPECT_EQ(Flags(ReadOk("accelerate_ddp.yaml")), "--ddp 2 --amp fp16");
  ConfigFile fsdp = ReadOk("accelerate_fsdp.yaml");
  EXPECT_TRUE(Contains(fsdp.no_effect, "/fsdp_config/fsdp_backward_prefetch"));
  EXPECT_FALSE(Contains(fsdp.no_effect, "/fsdp_config/fsdp_transformer_layer_cls_to_wrap"));
  EXPECT_TRUE(fsdp.unknown.empty()) << fsdp.Describe();
}

TEST(ConfigFile, TorchtitanLlama3_8b) {
  // torchtitan's own llama3_8b.toml: FSDP over all the GPUs, per-op SAC, AdamW fused.
  ConfigFile f = ReadOk("torchtitan_llama3_8b.toml", 64);
  EXPECT_EQ(f.format, "torchtitan");
  // The trainer builds on the meta device and deletes `pred` before backward.
  EXPECT_EQ(Flags(f), "--batch 1 --loop-holds loss --set seq=8192 --clip-grad-norm 1.0 --mesh dp_shard=64 --init meta "
                      "--wrap @blocks --fsdp2-mp param=bf16,reduce=fp32 --checkpoint @blocks --sac torchtitan "
                      "--checkpoint-early-stop off --optimizer adamw --foreach fused");
  EXPECT_TRUE(f.unknown.empty()) << f.Describe();
  EXPECT_TRUE(Contains(f.no_effect, "/checkpoint/interval"));
  Result<ConfigFile> no_world = ReadConfigFile(TestDataPath("configs/torchtitan_llama3_8b.toml"));
  ASSERT_FALSE(no_world.ok());
  EXPECT_NE(no_world.status().message().find("/parallelism/data_parallel_shard_degree: -1 takes the ranks"),
            std::string::npos);
}

TEST(ConfigFile, TorchtitanCpuOffloadIsFsdp2sPolicy) {
  TempConfig t("t.toml", "[training]\nlocal_batch_size = 1\nenable_cpu_offload = true\n[parallelism]\n"
                         "data_parallel_shard_degree = -1\n");
  Result<ConfigFile> f = ReadConfigFile(t.path(), 8);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_NE(Flags(*f).find("--offload params"), std::string::npos) << Flags(*f);
  EXPECT_FALSE(Contains(f->not_modelled, "/training/enable_cpu_offload (FSDP2 CPUOffloadPolicy)"));
}

TEST(ConfigFile, Torchtitan3dMesh) {
  // A 70B-style run: TP 8 (torchtitan's plan: sequence parallel, loss_parallel), PP 4 under
  // Interleaved1F1B with microbatches of 1, FSDP2 over the ranks left (the "default" reshard
  // policy: not after forward under PP).
  TempConfig t("t.toml", "[training]\nlocal_batch_size = 8\nseq_len = 8192\n[parallelism]\n"
                         "data_parallel_shard_degree = -1\ntensor_parallel_degree = 8\npipeline_parallel_degree = 4\n"
                         "pipeline_parallel_schedule = \"Interleaved1F1B\"\npipeline_parallel_microbatch_size = 1\n"
                         "enable_async_tensor_parallel = true\n[activation_checkpoint]\nmode = \"full\"\n");
  Result<ConfigFile> f = ReadConfigFile(t.path(), 64);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Flags(*f), "--batch 8 --loop-holds loss --set seq=8192 --clip-grad-norm 1.0 --mesh pp=4,dp_shard=2,tp=8 "
                       "--init meta --tp-plan torchtitan --sequence-parallel on --loss-parallel on --pp-schedule "
                       "interleaved1f1b --microbatches 8 --wrap @blocks --fsdp2-mp param=bf16,reduce=fp32 "
                       "--reshard-after-forward false --checkpoint @blocks --checkpoint-early-stop off --optimizer adamw "
                       "--foreach fused");
  EXPECT_TRUE(Contains(f->not_modelled, "/parallelism/enable_async_tensor_parallel (compiled micro-pipelining)"));
  TempConfig bad("b.toml", "[training]\nlocal_batch_size = 6\n[parallelism]\npipeline_parallel_degree = 2\n"
                           "pipeline_parallel_microbatch_size = 4\n");
  Result<ConfigFile> b = ReadConfigFile(bad.path(), 2);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("/parallelism/pipeline_parallel_microbatch_size: 4 does not divide local_batch_size 6"),
            std::string::npos) << b.status().message();
}

TEST(ConfigFile, AccelerateFsdp2) {
  TempConfig t("a.yaml", "distributed_type: FSDP\nmixed_precision: bf16\nnum_processes: 8\nfsdp_config:\n"
                         "  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n  fsdp_activation_checkpointing: true\n"
                         "  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer\n");
  Result<ConfigFile> f = ReadConfigFile(t.path());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Flags(*f), "--mesh dp_shard=8 --wrap @blocks --reshard-after-forward false --checkpoint @blocks "
                       "--fsdp2-mp param=bf16,reduce=bf16");
  EXPECT_TRUE(f->unknown.empty()) << f->Describe();
  // fsdp_offload_params: CPUOffloadPolicy (--offload params)
  TempConfig o("o.yaml", "distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                         "  fsdp_offload_params: true\n");
  Result<ConfigFile> g = ReadConfigFile(o.path());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Flags(*g), "--mesh dp_shard=4 --wrap @blocks --offload params");
}

TEST(ConfigFile, TorchtitanLayerSelectiveCheckpointing) {
  TempConfig t("t.toml", "[parallelism]\ndata_parallel_shard_degree = 1\ntensor_parallel_degree = 2\n"
                         "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"2\"\n");
  Result<ConfigFile> f = ReadConfigFile(t.path());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // _layer_sac_count % 2 == 0, counted from 1: the 2nd, 4th, ... blocks.
  EXPECT_EQ(Flags(*f), "--batch 8 --loop-holds loss --set seq=2048 --clip-grad-norm 1.0 --mesh tp=2 --init meta "
                       "--tp-plan torchtitan --sequence-parallel on --loss-parallel on "
                       "--checkpoint @blocks%2=1 --checkpoint-early-stop off --optimizer adamw --foreach fused");
}

TEST(ConfigFile, HostileAndWrongFilesGetOneLineNamingTheKey) {
  struct Case { const char* name; std::string text; const char* expect; };
  const Case cases[] = {
      {"a.json", R"({"zero_optimization": {"stage": 4}})", "/zero_optimization/stage: 4 is out of range [0, 3]"},
      {"a.json", R"({"train_micro_batch_size_per_gpu": "four"})", "/train_micro_batch_size_per_gpu: expected an integer"},
      {"a.json", R"({"train_micro_batch_size_per_gpu": 99999999999999999999})", "/train_micro_batch_size_per_gpu"},
      {"a.json", R"({"optimizer": {"type": "Lamb"}})", "/optimizer/type: \"Lamb\" is not simulated"},
      {"a.json", R"({"bf16": {"enabled": true}})", "/bf16/enabled: DeepSpeed's 16-bit mode without ZeRO"},
      {"a.json", R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "gpu"}}})",
       "offload_optimizer/device: \"gpu\": expected cpu, nvme or none"},
      {"a.json", "{\"a\": ", "not valid JSON"},
      {"a.json", R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": -5}})", "reduce_bucket_size: expected 1 to 1e12"},
      {"a.json", "[1, 2]", "expected a table of keys at the top"},
      {"a.json", std::string(100, '[') + std::string(100, ']'), "nested more than 64 levels"},
      {"a.yaml", "distributed_type: TPU\n", "/distributed_type: \"TPU\""},
      {"a.yaml", "a: [1, 2\n", "not valid YAML"},
      {"args.json", R"({"output_dir": "x", "fsdp": "full_shard auto_wrap", "fsdp_config": {"fsdp_version": 2}})",
       "FSDP2 (fsdp_version 2) is given to memsim as --mesh dp_shard=N"},
      {"a.toml", "[training\n", "line 1: not valid TOML"},
      {"a.toml", "[parallelism]\ndata_parallel_shard_degree = 1\n[activation_checkpoint]\nmode = \"memory_budget\"\n",
       "memory_budget is the compiled partitioner's"},
      {"a.toml", "[parallelism]\ndata_parallel_shard_degree = 0\n", "data_parallel_shard_degree: 0: expected a positive"},
      {"a.txt", "x", "--config takes a .json"},
      {"args.json", R"({"output_dir": "x", "optim": "galore_adamw"})", "/optim: \"galore_adamw\" is not simulated"},
  };
  for (const Case& c : cases) {
    const std::string msg = ErrorOf(c.name, c.text);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.text.substr(0, 80) << " -> " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.name), std::string::npos) << msg;  // names the file
  }
  EXPECT_NE(ReadConfigFile("/nonexistent/ds.json").status().message().find("cannot open file"), std::string::npos);
}

TEST(ConfigFile, CommandLineOptionsWinAndWorldBecomesTheMesh) {
  std::vector<std::string> notes;
  Result<std::vector<std::string>> args = ExpandConfigFiles(
      {"graphs/x.json", "--config", TestDataPath("configs/deepspeed_zero2_offload.json"), "--batch=16", "--world", "8"},
      &notes);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  const std::vector<std::string> want = {"graphs/x.json", "--accumulate", "2", "--clip-grad-norm", "1.0", "--zero", "2",
                                         "--offload", "optimizer", "--zero-overlap-comm", "on", "--dtype", "bf16",
                                         "--optimizer", "adamw",
                                         "--batch=16", "--world", "8"};
  EXPECT_EQ(*args, want);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("the command line's own --batch kept"), std::string::npos) << notes[0];

  notes.clear();
  args = ExpandConfigFiles({"--world", "16", "--config=" + TestDataPath("configs/torchtitan_llama3_8b.toml")}, &notes);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_EQ(std::count(args->begin(), args->end(), "--world"), 0);
  EXPECT_NE(std::find(args->begin(), args->end(), "dp_shard=16"), args->end());
  EXPECT_FALSE(ExpandConfigFiles({"--config"}, &notes).ok());
}

}  // namespace
}  // namespace memsim::cli
