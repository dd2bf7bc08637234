#include "cli/common.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hybridgen/error.h"

namespace hg::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("-m,--model", o.model, "model: HF directory, .gguf file, or 'smollm2' (the default model)");
  cmd.add_option("--synthetic", o.synthetic, "build a seeded random model from a shape config (configs/models/X.yaml)");
  cmd.add_option("--synthetic-dtype", o.synthetic_dtype, "weight dtype of a synthetic model: f32|f16|bf16|q8_0|q4_0|q4_1")
      ->capture_default_str();
  cmd.add_option("--synthetic-seed", o.synthetic_seed, "seed of a synthetic model")->capture_default_str();
  cmd.add_option("--tokenizer", o.tokenizer, "tokenizer file (tokenizer.json, vocab.json or .gguf) instead of the model's");
}

void add_runtime_options(CLI::App& cmd, RuntimeOptions& o) {
  cmd.add_option("-t,--threads", o.threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd.add_option("-c,--ctx", o.ctx, "tokens per sequence the KV cache holds (0: as needed)")->capture_default_str();
  cmd.add_option("--kv-dtype", o.kv_dtype, "KV cache dtype: bf16|f16|f32")->capture_default_str();
  cmd.add_option("--device", o.device, "auto|cpu|cuda")->capture_default_str();
  cmd.add_option("--gpu", o.gpu, "CUDA device index")->capture_default_str();
  cmd.add_flag("-v,--verbose", o.verbose, "more log output");
}

namespace {
DType parse_weight_dtype(const std::string& s) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1})
    if (dtype_name(t) == s) return t;
  throw Error("--synthetic-dtype: '" + s + "' is not one of f32, f16, bf16, q8_0, q4_0, q4_1");
}
}  // namespace

std::unique_ptr<Model> load_model(const ModelOptions& o) {
  if (!o.synthetic.empty() && !o.model.empty()) throw Error("give either -m or --synthetic, not both");
  if (!o.synthetic.empty()) return make_synthetic_model(o.synthetic, parse_weight_dtype(o.synthetic_dtype), o.synthetic_seed);
  if (o.model.empty()) throw Error("no model: give -m MODEL (a directory, a .gguf file or 'smollm2') or --synthetic");
  return hg::load_model(o.model);
}

std::unique_ptr<Tokenizer> load_tokenizer(const ModelOptions& o, const Model& model) {
  if (!o.tokenizer.empty()) return hg::load_tokenizer(o.tokenizer);
  if (model.format == "synthetic") return nullptr;
  return load_model_tokenizer(model.source);
}

EngineOptions engine_options(const RuntimeOptions& r, const ModelSpec& spec, int needed_ctx, int batch) {
  EngineOptions e;
  e.threads = r.threads;
  e.kv_dtype = parse_kv_dtype(r.kv_dtype);
  e.device = r.device;
  e.gpu = r.gpu;
  e.batch = batch;
  if (r.ctx < 0) throw Error("--ctx must be >= 0, got " + std::to_string(r.ctx));
  e.ctx = r.ctx > 0 ? r.ctx : needed_ctx;
  if (e.ctx > spec.max_ctx)
    throw Error("context of " + std::to_string(e.ctx) + " tokens is longer than the model's " +
                std::to_string(spec.max_ctx) + " (max_position_embeddings)");
  return e;
}

std::vector<int32_t> parse_ids(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": not a JSON array of token ids (" + std::string(e.what()) + ")");
  }
  if (!j.is_array()) throw Error(what + ": expected a JSON array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (const auto& v : j) {
    if (!v.is_number_integer()) throw Error(what + ": element " + v.dump() + " is not an integer token id");
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

void setup_logging(int verbose) {
  // Logs go to stderr: stdout carries generated text and machine-readable output.
  if (!spdlog::get("hybridgen")) spdlog::set_default_logger(spdlog::stderr_color_mt("hybridgen"));
  spdlog::set_level(verbose >= 2 ? spdlog::level::debug : verbose == 1 ? spdlog::level::info : spdlog::level::warn);
  spdlog::set_pattern("[%^%l%$] %v");
}

}  // namespace hg::cli
