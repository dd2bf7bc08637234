// GPT-2 vocab.json + merges.txt (what OPT checkpoints ship) -> PipelineTokenizer with GPT-2's
// byte-level pre-tokenizer and decoder.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "hybridgen/error.h"
#include "tokenizer/json_tables.h"
#include "tokenizer/loaders.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

namespace {
std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_vocab(std::string_view vocab_json, std::string_view merges_txt,
                                           const std::string& name, const TokenizerConfig& config) {
  std::vector<std::pair<std::string, int64_t>> vocab;
  parse_vocab_object(vocab_json, name, vocab);
  PipelineParts p;
  p.source = name;
  int64_t max_id = -1;
  for (const auto& [piece, id] : vocab) {
    if (id < 0 || id >= (int64_t(1) << 24))
      throw Error(name + ": vocab.json['" + piece + "']: expected a non-negative integer id");
    max_id = std::max<int64_t>(max_id, id);
  }
  p.pieces.assign(size_t(max_id + 1), std::string());
  std::vector<std::string> keys(p.pieces.size());
  for (auto& [piece, id] : vocab) {
    size_t i = size_t(id);
    if (!p.pieces[i].empty()) throw Error(name + ": vocab.json: id " + std::to_string(i) + " is used twice");
    keys[i] = byte_map().decode_text(piece).value_or("");
    p.pieces[i] = std::move(piece);
  }

  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_no = 0, pos = 0;
  while (pos < merges_txt.size()) {
    size_t eol = merges_txt.find('\n', pos);
    if (eol == std::string_view::npos) eol = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || line.find(' ', sp + 1) != std::string_view::npos)
      throw Error(name + ": merges.txt line " + std::to_string(line_no) + ": expected \"left right\"");
    auto a = byte_map().decode_text(line.substr(0, sp)), b = byte_map().decode_text(line.substr(sp + 1));
    if (!a || !b)
      throw Error(name + ": merges.txt line " + std::to_string(line_no) + ": not in the byte-level alphabet");
    merges.emplace_back(*a, *b);
  }
  BpeOptions opt;
  opt.byte_level = true;
  p.model = std::make_unique<BpeModel>(std::move(keys), merges, opt, name + ": merges.txt");
  p.pre_tokenizer = make_byte_level_pre_tokenizer(false, true);
  p.decoder = make_byte_level_decoder();

  auto lookup = [&](const std::string& piece) { return find_piece(p.pieces, piece); };
  // GPT-2 names one special token; OPT's tokenizer_config.json names <s>, </s>, <pad>, <unk>.
  std::vector<std::string> specials = {"<|endoftext|>"};
  for (const auto& t : {config.bos_token, config.eos_token, config.unk_token})
    if (t) specials.push_back(*t);
  for (const auto& s : specials)
    if (auto id = lookup(s)) p.added.push_back(AddedToken{s, *id, true, false, false, false, false});
  p.bos = lookup(config.bos_token.value_or("<|endoftext|>"));
  p.eos = lookup(config.eos_token.value_or("<|endoftext|>"));
  if (config.add_bos_token.value_or(false) && p.bos) p.prefix.push_back(*p.bos);
  p.chat_template = config.chat_template;
  return make_pipeline_tokenizer(std::move(p));
}

std::unique_ptr<Tokenizer> load_gpt2_files(const std::filesystem::path& vocab_json) {
  auto merges = vocab_json.parent_path() / "merges.txt";
  if (!std::filesystem::exists(merges))
    throw Error(vocab_json.string() + ": merges.txt not found beside it (" + merges.string() + ")");
  TokenizerConfig config = read_tokenizer_config(vocab_json.parent_path() / "tokenizer_config.json");
  return load_gpt2_vocab(slurp(vocab_json), slurp(merges), vocab_json.string(), config);
}

}  // namespace hg::tok
