// Golden ids from the reference tokenizers (data/golden/tokenizer/*.jsonl) and
// decode(encode(x)) == x on the golden texts and the real-text corpora. SmolLM2's tokenizer is
// loaded from its GGUF as the engine loads a model's (load_model_tokenizer); its golden ids come
// from Hugging Face `tokenizers` (tools/smollm2_tokenizer_golden.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "hybridgen/tokenizer.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

// Meta's Llama tokenizers may not be redistributed here: they come from HG_TEST_DATA when set.
bool is_llama(const std::string& name) { return name.rfind("llama", 0) == 0; }
fs::path data_root(const std::string& name) {
  return is_llama(name) ? hg::test::licensed_data_dir() : hg::test::data_dir();
}

std::unique_ptr<hg::Tokenizer> load(const std::string& name) {
  if (name == "smollm2") return hg::load_model_tokenizer(hg::test::smollm2_path());
  fs::path dir = data_root(name) / "tokenizers" / name;
  return hg::load_tokenizer(name == "gpt2" ? dir / "vocab.json" : dir / "tokenizer.json");
}

// Empty when the tokenizer is at hand, else why the test skips.
std::string missing(const std::string& name) {
  if (name == "smollm2" && hg::test::smollm2_path().empty()) return hg::test::kNoSmolLM2Message;
  // Once HG_TEST_DATA is set, a tokenizer missing from it fails the test (load_tokenizer says which).
  return is_llama(name) && hg::test::licensed_data_dir().empty() ? hg::test::kNoLicensedDataMessage : "";
}

struct GoldenRow {
  std::string src, text;
  std::vector<int32_t> ids;
};

std::vector<GoldenRow> read_golden(const std::string& name) {
  std::ifstream in(data_root(name) / "golden/tokenizer" / (name + ".jsonl"));
  std::vector<GoldenRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    rows.push_back({j["src"], j["text"], j["ids"].get<std::vector<int32_t>>()});
  }
  return rows;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, EveryRowMatches) {
  const std::string name = GetParam();
  if (auto why = missing(name); !why.empty()) GTEST_SKIP() << why;
  auto tok = load(name);
  ASSERT_TRUE(tok) << name << ": no tokenizer";
  auto rows = read_golden(name);
  ASSERT_GT(rows.size(), 20u);
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    EXPECT_EQ(tok->encode(r.text, false), r.ids) << name << " row " << k << " (" << r.src << "): '"
                                                  << r.text.substr(0, 80) << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden, ::testing::Values("gpt2", "llama2", "llama3", "qwen3", "smollm2"));

// decode(encode(x)) == x on every golden text, the special tokens written in the text (SmolLM2's
// chat rows) included. Only the tokenizers without a normalizer: Qwen3's NFC gives a decomposed
// "é" back composed.
class GoldenRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenRoundTrip, EveryRowDecodesToItsText) {
  const std::string name = GetParam();
  if (auto why = missing(name); !why.empty()) GTEST_SKIP() << why;
  auto tok = load(name);
  ASSERT_TRUE(tok) << name << ": no tokenizer";
  auto rows = read_golden(name);
  ASSERT_GT(rows.size(), 20u);
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    EXPECT_EQ(tok->decode(tok->encode(r.text, false)), r.text) << name << " row " << k << " (" << r.src << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenRoundTrip, ::testing::Values("gpt2", "llama3", "smollm2"));

std::vector<std::string> corpus_texts() {
  std::vector<std::string> texts;
  for (const char* sub : {"text/moby-dick", "text/sotu"}) {
    fs::path dir = hg::test::data_dir() / sub;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) texts.push_back(hg::test::read_file(f));
  }
  return texts;
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

// Byte-level tokenizers are lossless: every byte sequence must come back unchanged.
TEST_P(RoundTrip, AllCorpusTexts) {
  const std::string name = GetParam();
  if (auto why = missing(name); !why.empty()) GTEST_SKIP() << why;
  auto tok = load(name);
  ASSERT_TRUE(tok) << name << ": no tokenizer";
  auto texts = corpus_texts();
  ASSERT_GT(texts.size(), 300u) << "expected all Moby-Dick chapters and State-of-the-Union texts";
  // Two halves in parallel: CI has two cores and the whole corpus is 14 MB.
  auto check = [&](size_t begin, size_t end) {
    size_t bad = texts.size();
    for (size_t k = begin; k < end && bad == texts.size(); ++k)
      if (tok->decode(tok->encode(texts[k], false)) != texts[k]) bad = k;
    return bad;
  };
  auto other = std::async(std::launch::async, check, 0, texts.size() / 2);
  size_t bad1 = check(texts.size() / 2, texts.size());
  size_t bad0 = other.get();
  EXPECT_EQ(bad0, texts.size()) << "text " << bad0 << " does not round-trip";
  EXPECT_EQ(bad1, texts.size()) << "text " << bad1 << " does not round-trip";
}

INSTANTIATE_TEST_SUITE_P(ByteLevel, RoundTrip, ::testing::Values("gpt2", "llama3", "qwen3", "smollm2"));

}  // namespace
