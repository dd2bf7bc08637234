// Synthetic models: a shape config (configs/models/NAME.yaml) instantiated with seeded random
// weights, so benchmarks of 7B-14B shapes run where the real weights cannot be had.
//
// Values are drawn per chunk of a tensor from a counter-based generator seeded by (seed, tensor
// name, chunk index), so the result is the same for any number of threads. Scales keep
// activations sane through many layers: linear weights have std 0.5/sqrt(in_features) (each
// projection shrinks rather than grows the residual stream), embeddings std 1/sqrt(d_model) (so
// tied logits have std ~1), norm scales 1 +- 0.1, biases std 0.02.
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <cmath>
#include <set>
#include <thread>

#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "model/config.h"
#include "model/quantize.h"
#include "model/weight_table.h"
#include "util/hash.h"

namespace hg {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kChunk = 1 << 18;  // elements per work item; a multiple of every block size
constexpr size_t kAlign = 64;

// splitmix64 as a generator: the next output of the sequence whose state is `state`.
uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t z = splitmix64(state);
  state += 0x9e3779b97f4a7c15ull;
  return z;
}

uint64_t name_hash(const std::string& name) {
  Fnv1a h;
  h.add_chars(name);
  return h.value();
}

// xoshiro256+: fast, plenty good for weights; seeded through splitmix64 as its authors advise.
class Xoshiro {
 public:
  explicit Xoshiro(uint64_t seed) {
    for (auto& w : s_) w = splitmix64_next(seed);
  }
  // Uniform in [-1, 1).
  float next_symmetric() {
    uint64_t r = s_[0] + s_[3];
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }

 private:
  uint64_t s_[4];
};

}  // namespace

ModelSpec load_shape_config(const fs::path& path) {
  const std::string file = path.string();
  YAML::Node y;
  try {
    y = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw Error(file + ": " + e.what());
  }
  if (!y.IsMap()) throw Error(file + ": expected a mapping of shape fields");
  static const std::set<std::string> known = {
      "name", "arch", "source", "n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff",
      "vocab_size", "max_ctx", "norm_eps", "rope_theta", "rope_scaling", "tied", "qkv_bias",
      "do_layer_norm_before", "word_embed_proj_dim", "bos_id", "eos_id"};
  for (const auto& kv : y) {
    std::string key = kv.first.as<std::string>();
    if (!known.count(key))
      throw Error(file + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown field '" + key + "'");
  }
  auto field = [&](const char* key, auto def, bool required) {
    using T = decltype(def);
    YAML::Node n = y[key];
    if (!n) {
      if (required) throw Error(file + ": missing field '" + key + "'");
      return def;
    }
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      throw Error(file + ":" + std::to_string(n.Mark().line + 1) + ": field '" + key + "': cannot read '" +
                  YAML::Dump(n) + "' as a " + (std::is_same_v<T, std::string> ? "string" : std::is_same_v<T, bool> ? "bool" : "number"));
    }
  };
  ModelSpec s;
  s.name = field("name", path.stem().string(), false);
  std::string arch = field("arch", std::string(), true);
  if (arch == "opt") s.arch = Arch::Opt;
  else if (arch == "llama") s.arch = Arch::Llama;
  else if (arch == "qwen2") s.arch = Arch::Qwen2;
  else throw Error(file + ": field 'arch': '" + arch + "' is not supported (expected opt, llama or qwen2)");
  s.n_layers = field("n_layers", 0, true);
  s.d_model = field("d_model", 0, true);
  s.n_heads = field("n_heads", 0, true);
  s.n_kv_heads = field("n_kv_heads", s.n_heads, false);
  s.head_dim = field("head_dim", s.n_heads > 0 ? s.d_model / s.n_heads : 0, false);
  s.d_ff = field("d_ff", 0, true);
  s.vocab_size = field("vocab_size", 0, true);
  s.max_ctx = field("max_ctx", 0, true);
  s.norm_eps = field("norm_eps", s.is_opt() ? 1e-5f : 1e-6f, false);
  s.rope_theta = field("rope_theta", s.arch == Arch::Qwen2 ? 1e6f : 10000.0f, false);
  s.tied_embeddings = field("tied", s.is_opt(), false);
  s.qkv_bias = field("qkv_bias", s.arch == Arch::Qwen2, false);
  s.do_layer_norm_before = field("do_layer_norm_before", true, false);
  s.word_embed_proj_dim = field("word_embed_proj_dim", s.d_model, false);
  s.pos_offset = s.is_opt() ? 2 : 0;
  s.bos_id = field("bos_id", -1, false);
  s.eos_id = field("eos_id", -1, false);
  if (s.is_opt() && !s.tied_embeddings) throw Error(file + ": field 'tied': OPT always ties lm_head to the embeddings");
  if (s.arch != Arch::Qwen2 && s.qkv_bias) throw Error(file + ": field 'qkv_bias': only qwen2 has q/k/v biases");
  if (YAML::Node rs = y["rope_scaling"]) {
    std::string type = rs["type"] ? rs["type"].as<std::string>() : "";
    if (type != "llama3")
      throw Error(file + ":" + std::to_string(rs.Mark().line + 1) + ": field 'rope_scaling.type': '" + type +
                  "' is not supported (expected llama3)");
    s.rope_scaling.llama3 = true;
    s.rope_scaling.factor = rs["factor"] ? rs["factor"].as<float>() : 8.0f;
    s.rope_scaling.low_freq_factor = rs["low_freq_factor"] ? rs["low_freq_factor"].as<float>() : 1.0f;
    s.rope_scaling.high_freq_factor = rs["high_freq_factor"] ? rs["high_freq_factor"].as<float>() : 4.0f;
    s.rope_scaling.original_max_position =
        rs["original_max_position"] ? rs["original_max_position"].as<int>() : 8192;
  }
  validate_spec(s, file);
  return s;
}

int64_t count_params(const ModelSpec& spec) {
  ModelWeights scratch;
  int64_t n = 0;
  for (const WeightSlot& slot : weight_slots(spec, Naming::HF, scratch)) {
    int64_t numel = 1;
    for (int64_t d : slot.shape) numel *= d;
    n += numel;
  }
  return n;
}

namespace {

struct Job {
  const WeightSlot* slot;
  DType dtype;
  uint8_t* out;
  uint64_t seed;
  float scale;  // half-width of the uniform distribution
  float center;
  int64_t numel;
};

void fill_chunk(const Job& job, int64_t chunk, std::vector<float>& buf) {
  int64_t begin = chunk * kChunk;
  int64_t n = std::min(kChunk, job.numel - begin);
  buf.resize(static_cast<size_t>(n));
  Xoshiro rng(job.seed ^ (static_cast<uint64_t>(chunk) * 0xd1342543de82ef95ull));
  for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = job.center + job.scale * rng.next_symmetric();
  // begin is a multiple of kChunk, itself a multiple of 32: whole blocks
  size_t offset = dtype_row_bytes(job.dtype, begin);
  quantize_row(job.dtype, buf.data(), n, job.out + offset);
}

}  // namespace

std::unique_ptr<Model> make_synthetic_model(const fs::path& shape_yaml, DType weight_dtype, uint64_t seed) {
  const std::string file = shape_yaml.string();
  if (!dtype_writable(weight_dtype))
    throw Error(file + ": synthetic weights in " + std::string(dtype_name(weight_dtype)) + " are not supported (use " +
                writable_dtype_names() + ")");
  auto model = std::make_unique<Model>();
  model->spec = load_shape_config(shape_yaml);
  model->source = shape_yaml;
  model->format = "synthetic";
  const ModelSpec& s = model->spec;
  std::vector<WeightSlot> slots = weight_slots(s, Naming::HF, model->weights);

  // Norms and biases stay in a float type: quantized checkpoints keep them in f32 too.
  const DType small_dtype = dtype_is_quantized(weight_dtype) ? DType::F32 : weight_dtype;
  std::vector<Job> jobs;
  jobs.reserve(slots.size());
  size_t total = 0;
  std::vector<size_t> offsets;
  for (const WeightSlot& slot : slots) {
    bool matrix = slot.kind == WeightKind::Linear || slot.kind == WeightKind::Embedding;
    DType dt = matrix ? weight_dtype : small_dtype;
    int64_t cols = slot.shape.back();
    if (cols % dtype_block_elems(dt) != 0)
      throw Error(file + ": tensor '" + slot.name + "' has rows of " + std::to_string(cols) +
                  " elements, not a multiple of the " + std::string(dtype_name(dt)) + " block size " +
                  std::to_string(dtype_block_elems(dt)));
    int64_t numel = 1;
    for (int64_t d : slot.shape) numel *= d;
    Job job{&slot, dt, nullptr, seed ^ name_hash(slot.name), 0.0f, 0.0f, numel};
    const float sqrt3 = std::sqrt(3.0f);  // uniform(-a, a) has std a / sqrt(3)
    switch (slot.kind) {
      case WeightKind::Linear: job.scale = sqrt3 * 0.5f / std::sqrt(static_cast<float>(cols)); break;
      case WeightKind::Embedding: job.scale = sqrt3 / std::sqrt(static_cast<float>(s.d_model)); break;
      case WeightKind::Norm: job.center = 1.0f; job.scale = 0.1f; break;
      case WeightKind::NormBias:
      case WeightKind::Bias: job.scale = sqrt3 * 0.02f; break;
    }
    offsets.push_back(total);
    total += (dtype_row_bytes(dt, numel) + kAlign - 1) / kAlign * kAlign;
    jobs.push_back(job);
  }

  // Not value-initialized: every byte is written below, and zeroing 10+ GB first would double
  // the time.
  std::shared_ptr<uint8_t[]> buffer(new (std::align_val_t(kAlign)) uint8_t[total],
                                    [](uint8_t* p) { ::operator delete[](p, std::align_val_t(kAlign)); });
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i];
    job.out = buffer.get() + offsets[i];
    TensorView& t = *job.slot->dst;
    t.name = job.slot->name;
    t.dtype = job.dtype;
    t.shape = job.slot->shape;
    t.data = job.out;
    t.nbytes = dtype_row_bytes(job.dtype, job.numel);
  }
  if (s.tied_embeddings) model->weights.lm_head = model->weights.tok_embed;

  struct Item {
    uint32_t job;
    int64_t chunk;
  };
  std::vector<Item> items;
  for (size_t i = 0; i < jobs.size(); ++i)
    for (int64_t c = 0; c * kChunk < jobs[i].numel; ++c) items.push_back({static_cast<uint32_t>(i), c});
  std::atomic<size_t> next{0};
  auto worker = [&] {
    std::vector<float> buf;
    for (size_t k; (k = next.fetch_add(1)) < items.size();) fill_chunk(jobs[items[k].job], items[k].chunk, buf);
  };
  unsigned n_threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 64));
  n_threads = static_cast<unsigned>(std::min<size_t>(n_threads, items.size()));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n_threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  model->storage.push_back(std::shared_ptr<void>(buffer, buffer.get()));
  return model;
}

}  // namespace hg
