// The emulated CUDA device through the CLI, as a user reaches it: `--device cuda-emu` on every
// command that takes a device, `bench`'s counters of what one decode token asks of the device,
// `info`'s memory plan with the weights as the CUDA device stores them, and the note that its
// timings are not GPU figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace hg::test {
namespace {

nlohmann::json json_of(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

// Per decode token of `full` and `offload` on a 2-layer model: the embed id and the positions
// staged, the sampled logits copied back, one wait. `full`'s step is one CUDA graph (no launch
// outside it); offload, which waits for its copy stream every layer, runs without graphs, and so
// does `full` with HG_CUDA_GRAPHS=0: every kernel and GEMM of a step a launch.
TEST(CudaEmuCli, BenchCountsWhatADecodeTokenAsksOfTheDevice) {
  const std::string model = tiny_model("llama-gqa").string();
  const std::string args = "bench -m '" + model + "' -p 0 -n 4 -d 16 -r 1 --device cuda-emu -o json --policy ";
  const nlohmann::json rows = json_of(run_hybridgen(args + "full,offload"));
  const nlohmann::json eager = json_of(run_hybridgen_env("HG_CUDA_GRAPHS=0", args + "full"));
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(eager.size(), 1u);
  const nlohmann::json info = json_of(run_hybridgen("info -m '" + model + "' --json"));
  const double vocab = info["vocab_size"].get<double>(), layers = info["n_layers"].get<double>();
  for (const auto& r : {rows[0], rows[1], eager[0]}) {
    SCOPED_TRACE(r["policy"].get<std::string>() + (r["graph_launches_per_token"].get<double>() > 0 ? " (graphs)" : ""));
    EXPECT_EQ(r["backend"].get<std::string>().rfind("cuda-emu:0", 0), 0u) << r["backend"];
    if (r["graph_launches_per_token"].get<double>() > 0) {
      EXPECT_EQ(r["graph_launches_per_token"].get<double>(), 1.0) << "the step is one graph";
      EXPECT_EQ(r["launches_per_token"].get<double>(), 0.0) << "nothing launched outside it";
    } else {
      // Kernels: embed, then per layer two norms, rope, kv store, attention, two adds, silu and
      // the GEMMs (14 launches a layer on this model); then the final norm and the head.
      EXPECT_GE(r["launches_per_token"].get<double>(), 1 + layers * 10 + 2);
      EXPECT_LE(r["launches_per_token"].get<double>(), 1 + layers * 20 + 2);
    }
    // The logits' copy is the host's one wait: positions are staged once per step, offload's
    // streamed KV and its write-back go by DMA to and from the host store (registered for it),
    // and the step's timing marks are read after the logits' copy.
    EXPECT_EQ(r["syncs_per_token"].get<double>(), 1.0) << "the logits' copy is the step's one wait";
    EXPECT_GE(r["d2h_bytes_per_token"].get<double>(), 4 * vocab);
    EXPECT_GT(r["h2d_bytes_per_token"].get<double>(), 0.0);
  }
  EXPECT_EQ(rows[0]["graph_launches_per_token"].get<double>(), 1.0);
  EXPECT_EQ(rows[1]["graph_launches_per_token"].get<double>(), 0.0) << "offload waits every layer";
  EXPECT_EQ(eager[0]["graph_launches_per_token"].get<double>(), 0.0) << "HG_CUDA_GRAPHS=0";
  // offload streams every past token's K and V each step: more bytes in than full.
  EXPECT_GT(rows[1]["h2d_bytes_per_token"].get<double>(), rows[0]["h2d_bytes_per_token"].get<double>() + 1000);

  const RunResult md = run_hybridgen("bench -m '" + model + "' -p 0 -n 2 -r 1 --device cuda-emu -o md");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| launches/tok | graphs/tok | syncs/tok | d2h B/tok |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("are not GPU figures"), std::string::npos) << md.out;
  const RunResult cpu = run_hybridgen("bench -m '" + model + "' -p 0 -n 2 -r 1 --device cpu -o json");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_FALSE(nlohmann::json::parse(cpu.out)[0].contains("launches_per_token")) << "the CPU device counts none";
}

// The hybrid policies beside a GPU issue a decode step without a host wait: host callbacks on the
// stream join the host stage (attention/hybrid_async.cpp) and place an eviction's rows in the
// host store, so a token waits once, for its logits, and is one CUDA graph; the eviction every 16
// steps (1 in the 8 measured here) launches its gather before the step's capture. With
// HG_CUDA_HOST_CALLBACKS=0 the synchronous path waits for each layer's input and true query, as
// InfiniGen, whose K follows the data, always does.
TEST(CudaEmuCli, HybridWaitsOnceAStep) {
  const std::string model = tiny_model("llama-gqa").string();
  const nlohmann::json info = json_of(run_hybridgen("info -m '" + model + "' --json"));
  const double layers = info["n_layers"].get<double>(), steps = 8;
  const std::string args = "bench -m '" + model + "' -p 0 -n 8 -d 64 -r 1 --device cuda-emu -o json --policy ";
  const nlohmann::json rows =
      json_of(run_hybridgen(args + "hybrid:window=16:k=8:sched=fixed,hgca:window=16:k=8,quest:window=16:k=16"));
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) {
    SCOPED_TRACE(r["policy"].get<std::string>());
    EXPECT_GT(r["selected_per_layer"].get<double>(), 0.0) << "the host stage ran: not `full`";
    EXPECT_GT(r["h2d_bytes_per_token"].get<double>(), 0.0);
    EXPECT_EQ(r["syncs_per_token"].get<double>(), 1.0) << "the logits' copy";
    EXPECT_EQ(r["graph_launches_per_token"].get<double>(), 1.0) << "the step is one graph";
    EXPECT_EQ(r["launches_per_token"].get<double>(), 1 / steps) << "the eviction's gather";
  }
  const nlohmann::json sync = json_of(
      run_hybridgen_env("HG_CUDA_HOST_CALLBACKS=0", args + "hybrid:window=16:k=8:sched=fixed,infinigen:window=16"));
  ASSERT_EQ(sync.size(), 2u);
  for (const auto& r : sync) {
    SCOPED_TRACE(r["policy"].get<std::string>());
    EXPECT_GE(r["syncs_per_token"].get<double>(), layers + 1) << "a layer's query or input, the logits";
    EXPECT_LE(r["syncs_per_token"].get<double>(), 2 * layers + 1) << "input, query, logits";
    EXPECT_EQ(r["graph_launches_per_token"].get<double>(), 0.0) << "a wait a layer: no graphs";
  }
}

// The CUDA device holds fp32 checkpoints as they are (4 bytes a parameter), bf16 matrices as bf16
// with fp32 vectors, GGUF block types expanded to bf16; the CPU device keeps them mapped (0).
TEST(CudaEmuCli, InfoPlansTheWeightsAsTheDeviceStoresThem) {
  const nlohmann::json f32 =
      json_of(run_hybridgen("info -m '" + tiny_model("llama-gqa").string() + "' --device cuda-emu --json"));
  EXPECT_EQ(f32["device_plan"]["weight_bytes"].get<double>(), 4 * f32["n_params"].get<double>());
  EXPECT_EQ(f32["device_plan"]["device"].get<std::string>().rfind("cuda-emu:0", 0), 0u);
  const nlohmann::json bf16 =
      json_of(run_hybridgen("info -m '" + tiny_model("llama-gqa-bf16").string() + "' --device cuda-emu --json"));
  const double params = bf16["n_params"].get<double>();
  EXPECT_GT(bf16["device_plan"]["weight_bytes"].get<double>(), 2 * params);
  EXPECT_LT(bf16["device_plan"]["weight_bytes"].get<double>(), 2.1 * params) << "vectors only are fp32";
  const nlohmann::json cpu =
      json_of(run_hybridgen("info -m '" + tiny_model("llama-gqa").string() + "' --device cpu --json"));
  EXPECT_EQ(cpu["device_plan"]["weight_bytes"].get<double>(), 0.0);
  const RunResult bad = run_hybridgen("info -m '" + tiny_model("llama-gqa").string() + "' --device tpu");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("is not one of auto, cpu, cuda, cuda-emu"), std::string::npos) << bad.err;
}

// A quantized GGUF model on the CUDA device: its Q4_1 and Q8_0 weights stay in their blocks, so the
// device holds the file's bytes (issue 48's bound: 1.15x; bf16 expansion took 2.79x), which the plan
// says before anything is allocated. Its perplexity matches the CPU device's, both through the
// prefill GEMMs on bf16 tiles and, eight tokens at a time, through the decode GEMV that multiplies
// the blocks in registers (the CPU device's decode GEMV quantizes its inputs to int8: ~1% apart).
TEST(CudaEmuCli, AGgufModelKeepsItsBlocksOnTheDevice) {
  const std::string smollm2 = smollm2_path();
  if (smollm2.empty()) GTEST_SKIP() << kNoSmolLM2Message;
  const nlohmann::json j = json_of(run_hybridgen("info -m '" + smollm2 + "' --device cuda-emu --json"));
  const double file_bytes = j["weight_bytes"].get<double>(),
               device_bytes = j["device_plan"]["weight_bytes"].get<double>();
  EXPECT_LE(device_bytes, 1.15 * file_bytes);
  EXPECT_GE(device_bytes, file_bytes) << "the fp32 vectors are the file's too";
  const std::string text = (source_dir() / "data/text/moby-dick/chapter_1.txt").string();
  const std::string args =
      "perplexity -m '" + smollm2 + "' -f '" + text + "' --ctx 33 --max-windows 1 --json --no-progress --device ";
  const double cpu = json_of(run_hybridgen(args + "cpu"))["ppl"].get<double>();
  const double tiles = json_of(run_hybridgen(args + "cuda-emu"))["ppl"].get<double>();
  const double gemv = json_of(run_hybridgen(args + "cuda-emu --ubatch 8"))["ppl"].get<double>();
  EXPECT_NEAR(tiles, cpu, 0.01 * cpu);
  EXPECT_NEAR(gemv, cpu, 0.02 * cpu);
  EXPECT_NEAR(gemv, tiles, 0.02 * cpu);
}

// Every command that runs the engine takes the emulated device.
TEST(CudaEmuCli, GenerateAndPerplexityRunOnTheEmulatedDevice) {
  const std::string model = tiny_model("qwen2").string();
  const RunResult gen = run_hybridgen("generate -m '" + model + "' --ids '[1, 2, 3]' -n 6 --temp 0 --device cuda-emu");
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  const RunResult gen_cpu = run_hybridgen("generate -m '" + model + "' --ids '[1, 2, 3]' -n 6 --temp 0 --device cpu");
  EXPECT_EQ(gen.out, gen_cpu.out) << "greedy tokens of an fp32 model agree across devices";
  const std::filesystem::path ids = temp_dir("cuda-emu-cli") / "ids.json";
  write_ids(ids, random_ids(40, 3));
  const std::string ppl_args =
      "perplexity -m '" + model + "' --ids-file '" + ids.string() + "' --ctx 20 --json --device ";
  const nlohmann::json ppl = json_of(run_hybridgen(ppl_args + "cuda-emu"));
  const nlohmann::json ppl_cpu = json_of(run_hybridgen(ppl_args + "cpu"));
  EXPECT_NEAR(ppl["ppl"].get<double>(), ppl_cpu["ppl"].get<double>(), 1e-4 * ppl_cpu["ppl"].get<double>());
}

}  // namespace
}  // namespace hg::test
