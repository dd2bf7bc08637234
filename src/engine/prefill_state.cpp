#include "hybridgen/prefill_state.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "hybridgen/error.h"
#include "hybridgen/model.h"

namespace hg {

static_assert(std::endian::native == std::endian::little, "state files are little-endian");

namespace {

constexpr char kMagic[8] = {'H', 'G', 'S', 'T', 'A', 'T', 'E', '\0'};

template <typename T>
void write_array(std::ofstream& out, const std::vector<T>& v) {
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

// Reads the file's bytes in order, each read checked against what is left: a truncated file is one
// error naming what was missing, never a short read.
class Reader {
 public:
  Reader(std::istream& in, uint64_t size, std::string name) : path_(std::move(name)), in_(in), left_(size) {}
  void bytes(void* dst, uint64_t n, const char* what) {
    need(n, 1, what);
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    left_ -= n;
  }
  template <typename T>
  std::vector<T> array(uint64_t count, const char* what) {
    need(count, sizeof(T), what);
    std::vector<T> v(count);
    bytes(v.data(), count * sizeof(T), what);
    return v;
  }
  uint64_t left() const { return left_; }
  void need(uint64_t count, uint64_t size, const char* what) const {
    if (count > left_ / size)
      throw Error(path_ + ": truncated state file: " + what + " needs " + std::to_string(count * size) + " bytes, " +
                  std::to_string(left_) + " are left");
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::istream& in_;
  uint64_t left_ = 0;
};

int field(const nlohmann::json& h, const char* name, const std::string& path, int lo) {
  if (!h.contains(name) || !h[name].is_number_integer() || h[name].get<int64_t>() < lo ||
      h[name].get<int64_t>() > (int64_t{1} << 30))
    throw Error(path + ": state header field '" + name + "' is missing or out of range");
  return h[name].get<int>();
}

}  // namespace

PrefillState PrefillState::for_model(const Model& model) {
  PrefillState s;
  s.fingerprint = model_fingerprint(model);
  s.n_layers = model.spec.n_layers;
  s.kv_dim = model.spec.kv_dim();
  s.q_dim = model.spec.q_dim();
  s.n_kv_heads = model.spec.n_kv_heads;
  s.vocab = model.spec.vocab_size;
  s.layers.resize(static_cast<size_t>(s.n_layers));
  return s;
}

void PrefillState::check_model(const Model& model, const std::string& what, std::string model_print) const {
  if (model_print.empty()) model_print = model_fingerprint(model);
  const ModelSpec& m = model.spec;
  if (fingerprint != model_print || n_layers != m.n_layers || kv_dim != m.kv_dim() || q_dim != m.q_dim() ||
      n_kv_heads != m.n_kv_heads || vocab != m.vocab_size)
    throw Error(what + ": the state was saved by another model (fingerprint " + fingerprint + ", " +
                std::to_string(n_layers) + " layers) than " + model.source.filename().string() + " (fingerprint " +
                model_print + ", " + std::to_string(m.n_layers) + " layers)");
}

PrefillState PrefillState::prefix(int n) const {
  if (n < 0 || n > n_tokens())
    throw Error("prefill state: a prefix of " + std::to_string(n) + " tokens of a state of " +
                std::to_string(n_tokens()));
  PrefillState p = *this;
  p.tokens.resize(static_cast<size_t>(n));
  if (n < n_tokens()) {
    p.logits.clear();
    p.score_names.clear();
  }
  const int rows = std::min(n, kQueryRows);
  for (Layer& l : p.layers) {
    if (n < n_tokens()) l.scores.clear();
    l.k.resize(static_cast<size_t>(n) * kv_dim);
    l.v.resize(static_cast<size_t>(n) * kv_dim);
    l.q.resize(std::min(l.q.size(), static_cast<size_t>(rows) * q_dim));
  }
  return p;
}

int PrefillState::score_index(const std::string& name) const {
  for (size_t i = 0; i < score_names.size(); ++i)
    if (score_names[i] == name) return static_cast<int>(i);
  return -1;
}

bool PrefillState::holds_scores(const std::vector<std::string>& names) const {
  return std::all_of(names.begin(), names.end(), [&](const std::string& n) { return score_index(n) >= 0; });
}

size_t PrefillState::bytes() const {
  size_t b = tokens.size() * sizeof(int32_t) + logits.size() * sizeof(float);
  for (const Layer& l : layers) {
    b += (l.k.size() + l.v.size() + l.q.size()) * sizeof(float);
    for (const auto& sc : l.scores) b += sc.size() * sizeof(float);
  }
  return b;
}

void save_prefill_state(const PrefillState& s, const std::filesystem::path& path) {
  const nlohmann::json header = {{"fingerprint", s.fingerprint},
                                 {"n_layers", s.n_layers},
                                 {"kv_dim", s.kv_dim},
                                 {"q_dim", s.q_dim},
                                 {"n_kv_heads", s.n_kv_heads},
                                 {"vocab", s.vocab},
                                 {"scores", s.score_names},
                                 {"n_tokens", s.n_tokens()},
                                 {"q_rows", s.q_rows()},
                                 {"has_logits", !s.logits.empty()}};
  for (const PrefillState::Layer& l : s.layers) {
    bool ok = l.scores.size() == s.score_names.size();
    for (const auto& sc : l.scores) ok = ok && sc.size() == s.tokens.size() * static_cast<size_t>(s.n_kv_heads);
    if (!ok) throw Error(path.string() + ": the state's prompt scores do not match its tokens (not saved)");
  }
  const std::string text = header.dump();
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());  // two writers of one path (sweep shards) do not collide
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path.string() + ": cannot write the state file");
    const uint32_t version = PrefillState::kVersion, length = static_cast<uint32_t>(text.size());
    out.write(kMagic, sizeof kMagic);
    out.write(reinterpret_cast<const char*>(&version), sizeof version);
    out.write(reinterpret_cast<const char*>(&length), sizeof length);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    write_array(out, s.tokens);
    write_array(out, s.logits);
    for (const PrefillState::Layer& l : s.layers) {
      write_array(out, l.k);
      write_array(out, l.v);
      write_array(out, l.q);
      for (const auto& sc : l.scores) write_array(out, sc);
    }
    if (!out.flush()) throw Error(path.string() + ": writing the state file failed (disk full?)");
  }
  std::filesystem::rename(tmp, path);
}

PrefillState load_prefill_state(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open the state file");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  return read_prefill_state(in, size, path.string());
}

PrefillState read_prefill_state(std::istream& in, uint64_t size, const std::string& name) {
  Reader r(in, size, name);
  const std::string& where = r.path();
  char magic[sizeof kMagic] = {};
  if (r.left() < sizeof magic) throw Error(where + ": not a hybridgen state file (too short)");
  r.bytes(magic, sizeof magic, "the magic");
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) throw Error(where + ": not a hybridgen state file");
  uint32_t version = 0, length = 0;
  r.bytes(&version, sizeof version, "the version");
  if (version != PrefillState::kVersion)
    throw Error(where + ": state file format version " + std::to_string(version) + "; this build reads version " +
                std::to_string(PrefillState::kVersion) + " (save the state again with this build)");
  r.bytes(&length, sizeof length, "the header length");
  const std::vector<char> text = r.array<char>(length, "the header");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception&) {
    throw Error(where + ": the state header is not JSON");
  }
  if (!h.is_object() || !h.contains("fingerprint") || !h["fingerprint"].is_string() || !h.contains("has_logits") ||
      !h["has_logits"].is_boolean())
    throw Error(where + ": the state header lacks the model fingerprint");
  PrefillState s;
  s.fingerprint = h["fingerprint"].get<std::string>();
  s.n_layers = field(h, "n_layers", where, 1);
  s.kv_dim = field(h, "kv_dim", where, 1);
  s.q_dim = field(h, "q_dim", where, 1);
  s.n_kv_heads = field(h, "n_kv_heads", where, 1);
  s.vocab = field(h, "vocab", where, 1);
  if (s.kv_dim % s.n_kv_heads != 0) throw Error(where + ": the state header's kv_dim is not a multiple of n_kv_heads");
  if (!h.contains("scores") || !h["scores"].is_array()) throw Error(where + ": the state header lacks the score names");
  for (const auto& name : h["scores"]) {
    if (!name.is_string()) throw Error(where + ": a score name in the state header is not a string");
    s.score_names.push_back(name.get<std::string>());
  }
  const int n = field(h, "n_tokens", where, 0);
  const int q_rows = field(h, "q_rows", where, 0);
  if (q_rows > std::min(n, PrefillState::kQueryRows))
    throw Error(where + ": the state header's q_rows exceeds its tokens");
  s.tokens = r.array<int32_t>(static_cast<uint64_t>(n), "the tokens");
  if (h["has_logits"].get<bool>()) s.logits = r.array<float>(static_cast<uint64_t>(s.vocab), "the logits");
  s.layers.resize(static_cast<size_t>(s.n_layers));
  const uint64_t kv = static_cast<uint64_t>(n) * static_cast<uint64_t>(s.kv_dim);
  for (PrefillState::Layer& l : s.layers) {
    l.k = r.array<float>(kv, "a layer's K");
    l.v = r.array<float>(kv, "a layer's V");
    l.q = r.array<float>(static_cast<uint64_t>(q_rows) * static_cast<uint64_t>(s.q_dim), "a layer's queries");
    for (size_t i = 0; i < s.score_names.size(); ++i)
      l.scores.push_back(r.array<float>(static_cast<uint64_t>(n) * static_cast<uint64_t>(s.n_kv_heads),
                                        "a layer's prompt scores"));
  }
  if (r.left() != 0) throw Error(where + ": " + std::to_string(r.left()) + " bytes after the state's end");
  return s;
}

}  // namespace hg
