// load_model: resolves aliases, picks the loader by what the path is (directory -> HF
// safetensors, *.gguf -> GGUF), binds the weight table, and keeps the mappings in Model::storage.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/loaders.h"
#include "model/quantize.h"
#include "model/safetensors.h"
#include "model/weight_table.h"

namespace hg {

namespace fs = std::filesystem;

namespace {

// The real models tools/fetch_model.sh puts in the cache, by alias.
struct ModelAlias {
  const char* alias;
  const char* file;
};
constexpr ModelAlias kModelAliases[] = {
    {"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
    {"qwen2.5-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"},
};

class GgufSource : public TensorSource {
 public:
  explicit GgufSource(const gguf::File& f) : f_(f) {}
  std::optional<TensorView> find(const std::string& name) const override { return f_.find_tensor(name); }
  std::string file_of(const std::string&) const override { return f_.path().string(); }

 private:
  const gguf::File& f_;
};

std::unique_ptr<Model> load_hf_dir(const fs::path& dir) {
  fs::path config = dir / "config.json";
  if (!fs::exists(config)) throw Error(dir.string() + ": no config.json in the model directory");
  auto model = std::make_unique<Model>();
  model->spec = spec_from_hf_config(config);
  std::unique_ptr<SafetensorsSet> set = SafetensorsSet::open_dir(dir);
  bind_weights(model->spec, Naming::HF, *set, model->weights);
  model->source = dir;
  model->format = "safetensors";
  model->storage = set->storage();
  return model;
}

// Each distinct tensor once: tied lm_head shares tok_embed's bytes.
template <typename Fn>
void for_each_distinct(const ModelWeights& w, Fn fn) {
  std::set<const void*> seen;
  auto visit = [&](const TensorView& t) {
    if (t.present() && seen.insert(t.data).second) fn(t);
  };
  visit(w.tok_embed);
  visit(w.pos_embed);
  visit(w.project_in);
  visit(w.project_out);
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {&l.attn_norm, &l.attn_norm_bias, &l.wq, &l.wk, &l.wv, &l.bq, &l.bk, &l.bv, &l.wo,
                                &l.bo, &l.ffn_norm, &l.ffn_norm_bias, &l.w_gate, &l.w_up, &l.b_up, &l.w_down,
                                &l.b_down})
      visit(*t);
  }
  visit(w.final_norm);
  visit(w.final_norm_bias);
  visit(w.lm_head);
}

}  // namespace

fs::path cache_dir() {
  if (const char* c = std::getenv("HG_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/root") / ".cache/hybridgen";
}

std::unique_ptr<Model> model_from_gguf(std::shared_ptr<gguf::File> f) {
  auto model = std::make_unique<Model>();
  model->spec = spec_from_gguf(*f);
  bind_weights(model->spec, Naming::GGUF, GgufSource(*f), model->weights);
  model->source = f->path();
  model->format = "gguf";
  model->storage.push_back(std::move(f));
  return model;
}

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::Opt: return "opt";
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
  }
  return "?";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Model::n_params() const {
  int64_t n = 0;
  for_each_distinct(weights, [&](const TensorView& t) { n += t.numel(); });
  return n;
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for_each_distinct(weights, [&](const TensorView& t) { n += t.nbytes; });
  return n;
}

size_t Model::weight_bytes(const std::function<size_t(const TensorView&)>& bytes_of) const {
  size_t n = 0;
  for_each_distinct(weights, [&](const TensorView& t) { n += bytes_of(t); });
  return n;
}

fs::path resolve_model_path(const std::string& name_or_path) {
  std::string lower = name_or_path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const ModelAlias& a : kModelAliases) {
    if (lower != a.alias) continue;
    fs::path p = cache_dir() / "models" / a.file;
    if (!fs::exists(p))
      throw Error("model '" + lower + "': " + p.string() + " not found; run tools/fetch_model.sh " + lower +
                  (lower == "smollm2" ? " (or `make run`)" : "") + " to download it");
    return p;
  }
  return name_or_path;
}

std::unique_ptr<Model> load_model(const std::string& name_or_path) {
  fs::path p = resolve_model_path(name_or_path);
  if (!fs::exists(p)) throw Error(p.string() + ": no such file or directory (expected an HF model directory, a .gguf file, 'smollm2' or 'qwen2.5-0.5b')");
  if (fs::is_directory(p)) return load_hf_dir(p);
  if (p.extension() == ".gguf") return model_from_gguf(gguf::File::open(p));
  throw Error(p.string() + ": not a model (expected an HF model directory, a .gguf file, 'smollm2' or 'qwen2.5-0.5b')");
}

DType parse_weight_dtype(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (DType t : kWritableDTypes)
    if (s == dtype_name(t)) return t;
  throw Error("weight dtype '" + name + "' is not supported (expected " + writable_dtype_names() + ")");
}

}  // namespace hg
