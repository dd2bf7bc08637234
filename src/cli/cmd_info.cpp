// hybridgen info: what a model is and what it needs: spec, parameters, weight dtypes, KV bytes
// per token and the memory plan for a context and batch.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "device/device.h"
#include "hybridgen/error.h"
#include "kv/kv_cache.h"
#include "kv/memory_plan.h"
#include "mem/placement.h"
#include "mem/report.h"
#include "device/cpu_info.h"
#include "policy/enum_names.h"
#include "sched/cores.h"

namespace hg::cli {

namespace {

struct InfoOptions {
  ModelOptions model;
  int ctx = 0;
  int batch = 1;
  std::string kv_dtype = "bf16";
  std::string precision = "auto";
  std::string device = "auto";
  bool json = false;
  bool numa = false;
  std::string kv_placement = "semantic", k_node = "auto", v_node = "auto", k_dram_budget = "0";
};

// The NUMA nodes, what this process may do with them, and where the host K and V stores of a
// context of `ctx` tokens would live (bytes per node), before anything is allocated.
nlohmann::json numa_plan(const InfoOptions& o, const ModelSpec& s, int ctx, DType kv_dtype, std::string* text) {
  const mem::Topology topo = mem::Topology::discover();
  mem::PlacementOptions po;
  po.policy = mem::parse_placement_policy(o.kv_placement);
  po.k_node = mem::parse_node_option("--k-node", o.k_node);
  po.v_node = mem::parse_node_option("--v-node", o.v_node);
  po.k_dram_budget = mem::parse_byte_size("--k-dram-budget", o.k_dram_budget);
  const mem::Placement placement = mem::resolve_placement(topo, po);
  const uint64_t per_token = static_cast<uint64_t>(KvCache::bytes_per_token(s, kv_dtype) / 2) * o.batch;
  const mem::PlacementPlan plan = mem::plan_placement(per_token, per_token, ctx, topo, placement);
  const mem::NumaSupport support = mem::NumaSupport::probe(placement.worker_node);
  *text = mem::numa_report(topo, support, &placement, &plan, {});
  return mem::numa_report_json(topo, support, &placement, &plan, {});
}

void run_info(const InfoOptions& o) {
  setup_logging(0);
  if (o.ctx < 0) throw Error("--ctx must be >= 0 (0: the model's max), got " + std::to_string(o.ctx));
  check_range("--batch", o.batch, 1, kMaxBatch, "sequences decoded together");
  auto model = load_model(o.model);
  const ModelSpec& s = model->spec;
  const int ctx = o.ctx > 0 ? o.ctx : s.max_ctx;
  const DType kv_dtype = parse_kv_dtype(o.kv_dtype);
  const size_t kv_per_token = KvCache::bytes_per_token(s, kv_dtype);
  const double kv_total = static_cast<double>(kv_per_token) * ctx * o.batch;
  const double weights = static_cast<double>(model->weight_bytes());
  const Precision precision = resolve_precision(parse_precision(o.precision), *model);

  std::map<std::string, int64_t> dtype_params;
  auto count = [&](const TensorView& t) {
    if (t.present()) dtype_params[std::string(dtype_name(t.dtype))] += t.numel();
  };
  const ModelWeights& w = model->weights;
  for (const TensorView* t : {&w.tok_embed, &w.pos_embed, &w.project_in, &w.project_out, &w.final_norm, &w.final_norm_bias})
    count(*t);
  if (w.lm_head.data != w.tok_embed.data) count(w.lm_head);
  for (const auto& l : w.layers)
    for (const TensorView* t : {&l.attn_norm, &l.attn_norm_bias, &l.wq, &l.wk, &l.wv, &l.bq, &l.bk, &l.bv, &l.wo, &l.bo,
                                &l.ffn_norm, &l.ffn_norm_bias, &l.w_gate, &l.w_up, &l.b_up, &l.w_down, &l.b_down})
      count(*t);

  nlohmann::json j = {
      {"source", model->source.string()}, {"format", model->format}, {"name", s.name},
      {"arch", std::string(arch_name(s.arch))}, {"n_layers", s.n_layers}, {"d_model", s.d_model},
      {"n_heads", s.n_heads}, {"n_kv_heads", s.n_kv_heads}, {"head_dim", s.head_dim}, {"d_ff", s.d_ff},
      {"vocab_size", s.vocab_size}, {"max_ctx", s.max_ctx}, {"rope_theta", s.rope_theta},
      {"tied_embeddings", s.tied_embeddings}, {"n_params", model->n_params()}, {"weight_bytes", weights},
      {"params_by_dtype", dtype_params}, {"kv_dtype", o.kv_dtype}, {"kv_bytes_per_token", kv_per_token},
      {"ctx", ctx}, {"batch", o.batch}, {"kv_bytes", kv_total}, {"total_bytes", weights + kv_total},
      {"precision", precision_name(precision)}, {"precision_asked", o.precision}};
  const CpuInfo& cpu = cpu_info();
  j["cpu"] = {{"model", cpu.model},
              {"vendor", cpu.vendor},
              {"family", cpu.family},
              {"model_number", cpu.model_number},
              {"usable_cpus", cpu.usable_cpus},
              {"isa", cpu.isa},
              {"int8_dot", cpu.int8_dot},
              {"prefill_gemm", cpu.prefill_gemm},
              {"features", cpu.features}};
  // Whether `full` attention at this context fits the device (`auto`: the GPU if there is one),
  // with the weights counted as that device stores them.
  std::unique_ptr<Device> device = make_named_cuda_device(o.device, 0);
  const bool cpu_device = !device;
  if (cpu_device) device = make_cpu_device(1);
  const DeviceMemoryPlan plan = plan_device_memory(*model, Policy{}, kv_dtype, ctx, o.batch, *device);
  j["device_plan"] = plan.to_json();
  j["fits"] = plan.fits();
  // What `--policy hybrid` leaves to this device, chosen as a run here would choose it.
  Policy hybrid = policy_preset("hybrid");
  const std::string chosen = resolve_device_defaults(hybrid, cpu_device, 0, available_cpus());
  j["hybrid_defaults"] = {{"host_threads", hybrid.host_threads},
                          {"query", std::string(enum_name(hybrid.query))},
                          {"why", chosen}};
  std::string numa_text;
  if (o.numa) j["numa"] = numa_plan(o, s, ctx, kv_dtype, &numa_text);
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("model:        %s (%s, %s)\n", model->source.string().c_str(), model->format.c_str(), s.name.c_str());
  std::printf("architecture: %s, %d layers, d_model %d, %d heads (%d kv, head_dim %d), d_ff %d, vocab %d\n",
              std::string(arch_name(s.arch)).c_str(), s.n_layers, s.d_model, s.n_heads, s.n_kv_heads, s.head_dim,
              s.d_ff, s.vocab_size);
  std::printf("context:      %d max positions, rope_theta %g%s\n", s.max_ctx, s.rope_theta,
              s.rope_scaling.llama3         ? " (llama3 scaling)"
              : s.rope_freq_factors.empty() ? ""
                                            : " (llama3 scaling as rope_freqs.weight factors)");
  std::printf("parameters:   %.1f M (%s of weights)\n", static_cast<double>(model->n_params()) / 1e6,
              format_bytes(weights).c_str());
  for (const auto& [dt, n] : dtype_params) std::printf("  %-6s %12lld params\n", dt.c_str(), static_cast<long long>(n));
  std::printf("precision:    %s (%s)\n", precision_name(precision),
              o.precision == "auto" ? "auto: follows the weights, f32 for f32/f16 checkpoints, bf16 otherwise"
                                    : "--precision");
  std::printf("KV cache:     %s per token (%s)\n", format_bytes(static_cast<double>(kv_per_token)).c_str(), o.kv_dtype.c_str());
  std::printf("memory plan:  ctx %d x batch %d: KV %s + weights %s = %s\n", ctx, o.batch, format_bytes(kv_total).c_str(),
              format_bytes(weights).c_str(), format_bytes(weights + kv_total).c_str());
  std::string features;
  for (const auto& f : cpu.features) features += (features.empty() ? "" : " ") + f;
  std::printf("cpu:          %s; CPU features: %s\n", cpu_summary().c_str(), features.c_str());
  if (plan.fits())
    std::printf("fits:         yes, on %s: needs %s of %s available\n", plan.device.c_str(),
                format_bytes(static_cast<double>(plan.needed())).c_str(),
                format_bytes(static_cast<double>(plan.memory.free)).c_str());
  else
    std::printf("fits:         NO: %s\n", plan.problem().c_str());
  std::printf("hybrid:       %s\n", chosen.c_str());
  if (o.numa) std::printf("\n%s\n", numa_text.c_str());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  auto* cmd = app.add_subcommand("info", "model spec, parameter count, KV bytes per token and memory plan");
  add_model_options(*cmd, o->model);
  cmd->add_option("-c,--ctx", o->ctx, "context length for the memory plan (0: the model's max)");
  cmd->add_option("-b,--batch", o->batch, "sequences for the memory plan")->capture_default_str();
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV cache dtype: bf16|f16|f32")->capture_default_str();
  cmd->add_option("--precision", o->precision, "CPU device arithmetic: auto (follows the weights)|f32|bf16")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "device of the memory plan: auto|cpu|cuda|cuda-emu")->capture_default_str();
  cmd->add_flag("--json", o->json, "print as JSON");
  cmd->add_flag("--numa", o->numa, "NUMA nodes and the host KV placement plan (bytes of K and V per node) for --ctx");
  cmd->add_option("--kv-placement", o->kv_placement, "semantic|interleave|local")->capture_default_str();
  cmd->add_option("--k-node", o->k_node, "NUMA node of the host keys (auto)")->capture_default_str();
  cmd->add_option("--v-node", o->v_node, "NUMA node of the host values (auto)")->capture_default_str();
  cmd->add_option("--k-dram-budget", o->k_dram_budget, "bytes of keys allowed on the K node (0: no limit)")
      ->capture_default_str();
  cmd->callback([o] { run_info(*o); });
}

}  // namespace hg::cli
