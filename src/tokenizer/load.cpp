// load_tokenizer / load_model_tokenizer: pick the loader from the file (or directory) given.
#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "model/gguf.h"
#include "tokenizer/loaders.h"

namespace hg {

namespace fs = std::filesystem;

namespace {
std::unique_ptr<Tokenizer> load_gguf(const fs::path& file) {
  auto f = gguf::File::open(file);
  if (!f->has("tokenizer.ggml.model")) return nullptr;
  return tok::load_gguf_vocab(tok::read_gguf_vocab(*f), file.string());
}
}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& file) {
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    auto t = load_model_tokenizer(file);
    if (!t) throw Error(file.string() + ": no tokenizer.json or vocab.json in this directory");
    return t;
  }
  if (!fs::exists(file, ec)) throw Error(file.string() + ": no such file");
  if (file.extension() == ".gguf") {
    auto t = load_gguf(file);
    if (!t) throw Error(file.string() + ": GGUF file has no tokenizer.ggml.model (no vocabulary)");
    return t;
  }
  bool merges_beside = fs::exists(file.parent_path() / "merges.txt", ec);
  if (file.filename() == "vocab.json" || (merges_beside && file.filename() != "tokenizer.json"))
    return tok::load_gpt2_files(file);
  return tok::load_hf_json_file(file);
}

std::unique_ptr<Tokenizer> load_model_tokenizer(const fs::path& model_path) {
  std::error_code ec;
  if (fs::is_regular_file(model_path, ec) && model_path.extension() == ".gguf") return load_gguf(model_path);
  if (!fs::is_directory(model_path, ec)) return nullptr;
  if (fs::exists(model_path / "tokenizer.json", ec)) return tok::load_hf_json_file(model_path / "tokenizer.json");
  if (fs::exists(model_path / "vocab.json", ec)) return tok::load_gpt2_files(model_path / "vocab.json");
  return nullptr;
}

}  // namespace hg
