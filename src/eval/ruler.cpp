// The RULER task table, the generator that fits each sample's haystack to its length, and the
// scoring; what each task family's prompt holds is src/eval/ruler_tasks.cpp.
#include "eval/ruler.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "util/hash.h"
#include "util/strings.h"

namespace hg::eval {

namespace {

std::vector<std::string> lines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) out.push_back(std::move(line));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

uint64_t sample_seed(uint64_t seed, const std::string& task, int index) {
  uint64_t h = splitmix64(seed);
  for (char c : task) h = splitmix64(h ^ static_cast<unsigned char>(c));
  return splitmix64(h ^ static_cast<uint64_t>(index));
}

}  // namespace

// ---- the task table (NVIDIA/RULER/scripts/synthetic.yaml) ----

const std::vector<RulerTask>& ruler_tasks() {
  using F = RulerFamily;
  using H = Haystack;
  using K = NeedleKind;
  static const std::vector<RulerTask> tasks = {
      {"niah_single_1", F::Niah, H::Noise, K::Words, K::Numbers, 1, 1, 1, 128},
      {"niah_single_2", F::Niah, H::Essay, K::Words, K::Numbers, 1, 1, 1, 128},
      {"niah_single_3", F::Niah, H::Essay, K::Words, K::Uuids, 1, 1, 1, 128},
      {"niah_multikey_1", F::Niah, H::Essay, K::Words, K::Numbers, 4, 1, 1, 128},
      {"niah_multikey_2", F::Niah, H::Needles, K::Words, K::Numbers, 1, 1, 1, 128},
      {"niah_multikey_3", F::Niah, H::Needles, K::Uuids, K::Uuids, 1, 1, 1, 128},
      {"niah_multivalue", F::Niah, H::Essay, K::Words, K::Numbers, 1, 4, 1, 128},
      {"niah_multiquery", F::Niah, H::Essay, K::Words, K::Numbers, 4, 1, 4, 128},
      {"vt", F::VariableTracking, H::Noise, K::Words, K::Numbers, 1, 1, 1, 30},
      {"cwe", F::CommonWords, H::Noise, K::Words, K::Words, 1, 1, 1, 120},
      {"fwe", F::FrequentWords, H::Noise, K::Words, K::Words, 1, 1, 1, 50},
  };
  return tasks;
}

std::string ruler_task_names() {
  std::vector<std::string> names;
  for (const RulerTask& t : ruler_tasks()) names.push_back(t.name);
  return join(names, ", ");
}

const RulerTask& find_ruler_task(const std::string& name) {
  for (const RulerTask& t : ruler_tasks())
    if (t.name == name) return t;
  throw Error("--tasks: no RULER task '" + name + "' (tasks: " + ruler_task_names() + ")");
}

// ---- the generator ----

RulerGenerator::RulerGenerator(const Tokenizer& tok, std::string_view essay, bool chat)
    : tok_(tok), essay_words_(split_words(essay)), chat_(chat) {
  nouns_ = lines(wonderwords_nounlist());
  adjectives_ = lines(wonderwords_adjectivelist());
  std::set<std::string> all(nouns_.begin(), nouns_.end());
  all.insert(adjectives_.begin(), adjectives_.end());
  for (std::string& v : lines(wonderwords_verblist())) all.insert(std::move(v));
  vocabulary_.assign(all.begin(), all.end());
  if (chat_) {
    constexpr std::string_view kMarker = "\x01RULER\x01";
    const std::string wrapped = format_chat(tok_, ChatTemplate::Auto, kMarker);
    const size_t at = wrapped.find(kMarker);
    chat_before_ = wrapped.substr(0, at);
    chat_after_ = wrapped.substr(at + kMarker.size());
  }
}

std::vector<int32_t> RulerGenerator::encode(const Parts& p) const {
  // With the chat template the reply starts with the answer prefix, without its leading space.
  const std::string text =
      chat_ ? chat_before_ + p.task + chat_after_ + p.answer_prefix.substr(1) : p.task + p.answer_prefix;
  return tok_.encode(text, /*add_special=*/true);
}

RulerSample RulerGenerator::fit(const RulerTask& task, int length, const Build& build, int64_t first_guess) const {
  // The most haystack units whose prompt leaves the task's answer tokens within `length`: a
  // secant step from the token counts seen so far, bisection once the answer is bracketed.
  const int64_t budget = static_cast<int64_t>(length) - task.answer_tokens;
  auto tokens = [&](int64_t units) { return static_cast<int64_t>(encode(build(units)).size()); };
  const int64_t t_one = tokens(1);
  int64_t lo = 1, t_lo = t_one;
  if (t_lo > budget)
    throw Error("--length " + std::to_string(length) + ": too short for " + task.name + " (its instructions and " +
                std::to_string(task.answer_tokens) + " answer tokens take " +
                std::to_string(t_lo + task.answer_tokens) + ")");
  int64_t hi = -1, n = std::max<int64_t>(2, first_guess);
  for (int probe = 0; probe < 40; ++probe) {
    const int64_t t = tokens(n);
    if (t <= budget)
      lo = n, t_lo = t;
    else
      hi = n;
    if (hi >= 0 && hi - lo <= std::max<int64_t>(1, lo / 400)) break;
    // tokens per unit from the last fitting count; aim just under the budget
    const double rate = std::max(1e-3, static_cast<double>(t_lo - t_one + 1) / static_cast<double>(lo));
    int64_t next = lo + std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(budget - t_lo) / rate));
    if (hi >= 0) next = std::clamp(next, lo + 1, hi - 1), next = (next + (lo + hi) / 2) / 2;
    n = next;
  }
  const Parts p = build(lo);
  RulerSample s;
  s.task = task.name;
  s.ids = encode(p);
  s.answers = p.answers;
  s.depth = p.depth;
  return s;
}

RulerSample RulerGenerator::make(const RulerTask& task, int length, int index, int n_samples, uint64_t seed) const {
  if (task.needs_essay() && essay_words_.empty())
    throw Error(task.name + " needs a prose haystack: give -f FILE or a directory of .txt files");
  const SampleAt at{length, seed, sample_seed(seed, task.name, index), (index + 0.5) / std::max(1, n_samples)};
  const Builder b = builder(task, at);
  RulerSample s = fit(task, length, b.build, b.first_guess);
  s.index = index;
  return s;
}

// ---- scoring ----

double string_match_all(std::string_view reply, const std::vector<std::string>& answers) {
  if (answers.empty()) return 0.0;
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string r = lower(reply);
  int found = 0;
  for (const std::string& a : answers) found += r.find(lower(a)) != std::string::npos;
  return static_cast<double>(found) / static_cast<double>(answers.size());
}

RulerScore ruler_score(const std::vector<double>& x) {
  RulerScore s;
  s.n = static_cast<int>(x.size());
  if (x.empty()) return s;
  const double n = static_cast<double>(x.size());
  double sum = 0;
  bool binary = true;
  for (double v : x) sum += v, binary &= v == 0.0 || v == 1.0;
  const double mean = sum / n;
  constexpr double z = 1.959963984540054;
  double lo, hi;
  if (binary) {
    // Wilson's interval: right at 0% and 100%, where mean ± 1.96 SE collapses to a point
    const double d = 1 + z * z / n, center = (mean + z * z / (2 * n)) / d;
    const double half = z * std::sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / d;
    lo = center - half, hi = center + half;
  } else {
    double ss = 0;
    for (double v : x) ss += (v - mean) * (v - mean);
    const double se = x.size() > 1 ? std::sqrt(ss / (n - 1) / n) : 0.0;
    lo = mean - z * se, hi = mean + z * se;
  }
  s.score = 100 * mean;  // (Wilson's bounds meet the mean at 0% and 100% up to rounding)
  s.lo = 100 * std::clamp(std::min(lo, mean), 0.0, 1.0);
  s.hi = 100 * std::clamp(std::max(hi, mean), 0.0, 1.0);
  return s;
}

nlohmann::json RulerScore::to_json() const { return {{"score", score}, {"ci95", {lo, hi}}, {"n", n}}; }

}  // namespace hg::eval
