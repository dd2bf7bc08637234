// RULER's task families (eval/ruler.h lists the tasks): the prompt text, verbatim from
// NVIDIA/RULER/scripts/data/synthetic/constants.py, and one builder per family that draws a
// sample's parts for a haystack of a given size: needles in a haystack (RULER's niah.py),
// variable tracking (variable_tracking.py), common words (common_words_extraction.py) and
// frequent words (freq_words_extraction.py). Every draw of a sample comes from one mt19937_64
// seeded by the sample, always in the same order, so a seed makes the same sample on every machine.
#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "eval/ruler.h"
#include "hybridgen/error.h"
#include "util/hash.h"
#include "util/strings.h"

namespace hg::eval {

namespace {

// ---- RULER's prompt text, verbatim (NVIDIA/RULER/scripts/data/synthetic/constants.py) ----

constexpr std::string_view kNiahTemplate =
    "Some special magic {type} are hidden within the following text. Make sure to memorize it. I will quiz you "
    "about the {type} afterwards.\n{context}\nWhat are all the special magic {type} for {query} mentioned in the "
    "provided text?";
constexpr std::string_view kNiahAnswer = " The special magic {type} for {query} mentioned in the provided text are";
constexpr std::string_view kNeedle = "One of the special magic {type} for {key} is: {value}.";
constexpr std::string_view kFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

constexpr std::string_view kVtTemplate =
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {query} in the text above.";
constexpr std::string_view kVtAnswer =
    " Answer: According to the chain(s) of variable assignment in the text above, {n} variables are assigned the "
    "value {query}, they are: ";

constexpr std::string_view kCweTemplate =
    "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
    "appear most often.\n{context}\nQuestion: What are the 10 most common words in the above list?";
constexpr std::string_view kCweAnswer = " Answer: The top 10 words that appear most often in the list are:";

constexpr std::string_view kFweTemplate =
    "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
    "appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. "
    "What are the three most frequently appeared words in the above coded text?";
constexpr std::string_view kFweAnswer =
    " Answer: According to the coded text above, the three most frequently appeared words are:";

constexpr int kVtHops = 4;      // names in the chain: hops + 1
constexpr int kCweCommon = 10;  // words asked for
constexpr int kFweAnswers = 3;
constexpr int kVtExampleNoise = 15;  // filler lines of vt's worked example (~500 tokens with it)

// ---- small helpers ----

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// Fills {name} placeholders; the context (which may hold anything) goes in last.
std::string fill(std::string_view tmpl, const std::vector<std::pair<std::string_view, std::string>>& values,
                 const std::string& context = {}) {
  std::string s(tmpl);
  for (const auto& [name, value] : values) s = replace_all(std::move(s), name, value);
  const size_t at = s.find("{context}");
  if (at != std::string::npos) s.replace(at, 9, context);
  return s;
}

uint64_t uniform(std::mt19937_64& rng, uint64_t n) { return rng() % n; }

template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform(rng, i)]);
}

// k distinct indices of [0, n), in draw order.
std::vector<int64_t> sample_distinct(std::mt19937_64& rng, int64_t n, int k) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  while (static_cast<int>(out.size()) < k) {
    const int64_t x = static_cast<int64_t>(uniform(rng, static_cast<uint64_t>(n)));
    if (seen.insert(x).second) out.push_back(x);
  }
  return out;
}

// ---- haystack text and draws ----

// A word that ends a sentence: . ! ? possibly followed by closing quotes or brackets.
bool ends_sentence(const std::string& w) {
  size_t n = w.size();
  while (n > 0 && (w[n - 1] == '"' || w[n - 1] == '\'' || w[n - 1] == ')' || w[n - 1] == ']')) --n;
  if (n >= 3 && w.compare(n - 3, 3, "\xe2\x80\x9d") == 0) n -= 3;  // ” (UTF-8)
  return n > 0 && (w[n - 1] == '.' || w[n - 1] == '!' || w[n - 1] == '?');
}

// The first n words of the essay (tiled), as sentences.
std::vector<std::string> essay_sentences(const std::vector<std::string>& words, int64_t n) {
  std::vector<std::string> out;
  std::string cur;
  for (int64_t i = 0; i < n; ++i) {
    const std::string& w = words[static_cast<size_t>(i) % words.size()];
    if (!cur.empty()) cur += ' ';
    cur += w;
    if (ends_sentence(w)) out.push_back(std::move(cur)), cur.clear();
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string draw_number(std::mt19937_64& rng, int digits) {
  const uint64_t lo = static_cast<uint64_t>(std::pow(10.0, digits - 1));
  return std::to_string(lo + uniform(rng, lo * 9));
}

std::string draw_uuid(std::mt19937_64& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  const uint64_t hi = rng(), lo = rng();
  std::string s;
  for (int i = 0; i < 32; ++i) {
    int nibble = static_cast<int>(((i < 16 ? hi : lo) >> (60 - 4 * (i % 16))) & 0xf);
    if (i == 12) nibble = 4;                 // version 4
    if (i == 16) nibble = 8 | (nibble & 3);  // variant 10xx
    if (i == 8 || i == 12 || i == 16 || i == 20) s += '-';
    s += kHex[nibble];
  }
  return s;
}

std::string draw_letters(std::mt19937_64& rng, int n, char base) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>(base + uniform(rng, 26));
  return s;
}

std::string kind_plural(NeedleKind k) {
  switch (k) {
    case NeedleKind::Words:
      return "words";
    case NeedleKind::Numbers:
      return "numbers";
    case NeedleKind::Uuids:
      return "uuids";
  }
  return "";
}

// "a" | "a, and b" | "a, b, and c" (RULER's query list)
std::string query_list(const std::vector<std::string>& keys) {
  if (keys.size() == 1) return keys[0];
  std::vector<std::string> head(keys.begin(), keys.end() - 1);
  return join(head, ", ") + ", and " + keys.back();
}

// RULER's 40 needle depths: round(linspace(0, 100, 40)), in percent.
double grid_depth(int i) { return std::round(100.0 * i / 39.0) / 100.0; }

// ---- NIAH: needles, and the haystacks they hide in ----

// The word lists keys and values are drawn from.
struct KeyWords {
  const std::vector<std::string>& adjectives;
  const std::vector<std::string>& nouns;

  // A key or a value: an adjective-noun pair, a 7-digit number or a uuid.
  std::string draw(NeedleKind k, std::mt19937_64& rng) const {
    switch (k) {
      case NeedleKind::Words:
        return adjectives[uniform(rng, adjectives.size())] + "-" + nouns[uniform(rng, nouns.size())];
      case NeedleKind::Numbers:
        return draw_number(rng, 7);
      case NeedleKind::Uuids:
        return draw_uuid(rng);
    }
    return std::string();
  }
};

// A NIAH task's question and answer prefix, and what they call the values.
struct NiahText {
  std::string type;         // "numbers"; "number" when the question asks for one value
  std::string needle_type;  // the needles always say the plural
  std::string question, answer;
};

NiahText niah_text(const RulerTask& task) {
  NiahText t;
  t.type = t.needle_type = kind_plural(task.value);
  std::string tmpl = std::string(kNiahTemplate) + std::string(kNiahAnswer);
  if (task.queries * task.values == 1) {
    // RULER's singular rewrite of the whole template; the needles keep the plural
    for (auto [from, to] : {std::pair{"Some", "A"}, {"are all", "is"}, {"are", "is"}, {"answers", "answer"}})
      tmpl = replace_all(std::move(tmpl), from, to);
    t.type.pop_back();
  }
  const size_t split = tmpl.rfind(" The special magic");
  t.question = tmpl.substr(0, split);
  t.answer = tmpl.substr(split);
  return t;
}

// A sample's needles: every key with its values, and one sentence per value, in draw order.
struct Needles {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;  // [key][value]
  std::vector<std::string> sentences;
};

Needles draw_needles(const RulerTask& task, const KeyWords& words, const std::string& type, std::mt19937_64& rng) {
  const int n_keys = std::max(task.keys, task.queries);
  Needles n;
  n.values.resize(static_cast<size_t>(n_keys));
  for (int k = 0; k < n_keys; ++k) {
    n.keys.push_back(words.draw(task.key, rng));
    for (int v = 0; v < task.values; ++v) {
      n.values[static_cast<size_t>(k)].push_back(words.draw(task.value, rng));
      n.sentences.push_back(fill(
          kNeedle, {{"{type}", type}, {"{key}", n.keys.back()}, {"{value}", n.values[static_cast<size_t>(k)].back()}}));
    }
  }
  return n;
}

// Draws the `queries` keys the question asks for (RULER's query list); their values go to `answers`.
std::string draw_query(const Needles& n, int queries, std::mt19937_64& rng, std::vector<std::string>& answers) {
  std::vector<std::string> query_keys;
  for (int64_t k : sample_distinct(rng, static_cast<int64_t>(n.keys.size()), queries)) {
    query_keys.push_back(n.keys[static_cast<size_t>(k)]);
    for (const std::string& v : n.values[static_cast<size_t>(k)]) answers.push_back(v);
  }
  return query_list(query_keys);
}

// A haystack with its needles in it; depth: where a single needle sits (-1 for several).
struct FilledHaystack {
  std::string text;
  double depth = -1;
};

// The sentence a needle at depth d of the prose goes before: the one whose start is nearest to
// that fraction of the text. start: each sentence's offset in the text, then the text's end.
int64_t nearest_sentence(const std::vector<size_t>& start, double d) {
  const double target = d * static_cast<double>(start.back());
  const auto it = std::lower_bound(start.begin(), start.end(), static_cast<size_t>(target));
  int64_t i = it - start.begin();
  if (i > 0 && (it == start.end() ||
                target - static_cast<double>(start[static_cast<size_t>(i - 1)]) < static_cast<double>(*it) - target))
    --i;
  return std::min<int64_t>(i, static_cast<int64_t>(start.size()) - 1);
}

// The needles between the sentences of prose: one at even_depth, several at distinct depths of
// RULER's 40, drawn.
FilledHaystack needles_in_prose(const std::vector<std::string>& sentences, const std::vector<std::string>& needles,
                                double even_depth, std::mt19937_64& rng) {
  std::vector<size_t> start(1, 0);
  for (const std::string& x : sentences) start.push_back(start.back() + x.size() + 1);
  FilledHaystack c;
  std::vector<int64_t> at;  // sentence index each needle goes before
  if (needles.size() == 1) {
    at.push_back(nearest_sentence(start, even_depth));
    c.depth = even_depth;
  } else {
    for (int64_t d : sample_distinct(rng, 40, static_cast<int>(needles.size())))
      at.push_back(nearest_sentence(start, grid_depth(static_cast<int>(d))));
    std::sort(at.begin(), at.end());
  }
  std::vector<std::string> parts;
  int64_t from = 0;
  for (size_t i = 0; i < needles.size(); ++i) {
    parts.push_back(join(std::vector<std::string>(sentences.begin() + from, sentences.begin() + at[i]), " "));
    parts.push_back(needles[i]);
    from = at[i];
  }
  parts.push_back(join(std::vector<std::string>(sentences.begin() + from, sentences.end()), " "));
  c.text = join(parts, " ");
  return c;
}

// `units` lines of haystack: the filler, or distractor needles (keys and values drawn).
std::vector<std::string> haystack_lines(const RulerTask& task, int64_t units, const std::string& needle_type,
                                        const KeyWords& words, std::mt19937_64& rng) {
  std::vector<std::string> hay;
  for (int64_t i = 0; i < units; ++i)
    hay.push_back(task.haystack == Haystack::Noise ? std::string(kFiller)
                                                   : fill(kNeedle, {{"{type}", needle_type},
                                                                    {"{key}", words.draw(task.key, rng)},
                                                                    {"{value}", words.draw(task.value, rng)}}));
  return hay;
}

// The needles among the lines: one at even_depth, several at drawn lines.
FilledHaystack needles_in_lines(std::vector<std::string> hay, const std::vector<std::string>& needles,
                                double even_depth, std::mt19937_64& rng) {
  FilledHaystack c;
  const int64_t units = static_cast<int64_t>(hay.size());
  std::vector<int64_t> at;
  if (needles.size() == 1) {
    at.push_back(static_cast<int64_t>(static_cast<double>(units) * even_depth));
    c.depth = even_depth;
  } else {
    for (size_t i = 0; i < needles.size(); ++i)
      at.push_back(static_cast<int64_t>(uniform(rng, static_cast<uint64_t>(units) + 1)));
    std::sort(at.begin(), at.end());
  }
  for (size_t i = needles.size(); i-- > 0;) hay.insert(hay.begin() + at[i], needles[i]);
  c.text = join(hay, "\n");
  return c;
}

// ---- variable tracking ----

// A chain of kVtHops + 1 distinct variables of `name_len` capital letters, the first assigned a
// 5-digit value and each next one the one before, spread in order through `units` filler lines.
struct VariableChain {
  std::vector<std::string> names;
  std::string value, text;
};

VariableChain variable_chain(std::mt19937_64& rng, int64_t units, int name_len) {
  VariableChain c;
  std::set<std::string> seen;
  while (static_cast<int>(c.names.size()) < kVtHops + 1) {
    std::string v = draw_letters(rng, name_len, 'A');
    if (seen.insert(v).second) c.names.push_back(std::move(v));
  }
  c.value = std::to_string(10000 + uniform(rng, 90000));
  std::vector<std::string> chain = {"VAR " + c.names[0] + " = " + c.value};
  for (int h = 1; h <= kVtHops; ++h) chain.push_back("VAR " + c.names[h] + " = VAR " + c.names[h - 1] + " ");
  std::vector<std::string> hay(static_cast<size_t>(units), std::string(kFiller));
  std::vector<int64_t> at = sample_distinct(rng, units, static_cast<int>(chain.size()));
  std::sort(at.begin(), at.end());
  for (size_t j = 0; j < chain.size(); ++j) hay.insert(hay.begin() + at[j] + static_cast<int64_t>(j), chain[j]);
  c.text = join(hay, "\n");
  return c;
}

std::string vt_question(const VariableChain& c) { return fill(kVtTemplate, {{"{query}", c.value}}, c.text); }

std::string vt_answer_prefix(const VariableChain& c) {
  return fill(kVtAnswer, {{"{n}", std::to_string(kVtHops + 1)}, {"{query}", c.value}});
}

// ---- common words ----

// RULER's cwe counts: the common words 30 times and the others 3 from 4K tokens, 6 and 1 below;
// the worked example's list is 40 words (20) counted 10 and 3 times (3 and 1).
struct CweCounts {
  int common, rare;
  int shot_words, shot_common, shot_rare;
};

CweCounts cwe_counts(int length) { return length >= 4096 ? CweCounts{30, 3, 40, 10, 3} : CweCounts{6, 1, 20, 3, 1}; }

// "1. a 2. b 3. c"
std::string numbered(const std::vector<std::string>& words) {
  size_t n = 0;
  return join(words, " ", [&n](const std::string& w) { return std::to_string(++n) + ". " + w; });
}

// A numbered list of `n` distinct words of `vocab`, shuffled: the first kCweCommon drawn (`top`)
// `common` times each, the others `rare` times.
std::string cwe_word_list(const std::vector<std::string>& vocab, std::mt19937_64& rng, int64_t n, int common, int rare,
                          std::vector<std::string>& top) {
  if (n > static_cast<int64_t>(vocab.size()))
    throw Error("cwe: the length needs " + std::to_string(n) + " distinct words, the word lists hold " +
                std::to_string(vocab.size()));
  std::vector<std::string> items;
  for (int64_t i : sample_distinct(rng, static_cast<int64_t>(vocab.size()), static_cast<int>(n))) {
    const std::string& w = vocab[static_cast<size_t>(i)];
    const bool is_common = static_cast<int>(top.size()) < kCweCommon;
    if (is_common) top.push_back(w);
    for (int r = 0; r < (is_common ? common : rare); ++r) items.push_back(w);
  }
  shuffle(items, rng);
  return numbered(items);
}

// ---- frequent words ----

// `n` distinct coded words of 6 letters; the first, the most frequent, is noise: "...".
std::vector<std::string> coded_words(std::mt19937_64& rng, int n) {
  std::set<std::string> seen;
  std::vector<std::string> vocab;
  while (static_cast<int>(vocab.size()) < n) {
    std::string w = draw_letters(rng, 6, 'a');
    if (seen.insert(w).second) vocab.push_back(std::move(w));
  }
  vocab[0] = "...";
  return vocab;
}

// About `units` words with Zipf(2) counts, in vocabulary order: the k-th word units / (k² ζ(2)) times.
std::vector<std::string> zipf_words(const std::vector<std::string>& vocab, int64_t units) {
  constexpr double kZeta2 = 1.6449340668482264;
  std::vector<std::string> items;
  for (int k = 1; k <= static_cast<int>(vocab.size()); ++k) {
    const int64_t count = static_cast<int64_t>(static_cast<double>(units) / (static_cast<double>(k) * k) / kZeta2);
    for (int64_t c = 0; c < count; ++c) items.push_back(vocab[static_cast<size_t>(k - 1)]);
  }
  return items;
}

}  // namespace

RulerGenerator::Builder RulerGenerator::builder(const RulerTask& task, const SampleAt& at) const {
  switch (task.family) {
    case RulerFamily::Niah:
      return niah(task, at);
    case RulerFamily::VariableTracking:
      return variable_tracking(at);
    case RulerFamily::CommonWords:
      return common_words(at);
    case RulerFamily::FrequentWords:
      return frequent_words(task, at);
  }
  throw Error(task.name + ": no generator for its task family");
}

// Needles in a haystack: the needles drawn and shuffled, the keys asked drawn, then the haystack.
RulerGenerator::Builder RulerGenerator::niah(const RulerTask& task, const SampleAt& at) const {
  const NiahText text = niah_text(task);
  const KeyWords words{adjectives_, nouns_};
  Build build = [this, task, at, text, words](int64_t units) {
    std::mt19937_64 rng(at.seed);
    Needles needles = draw_needles(task, words, text.needle_type, rng);
    shuffle(needles.sentences, rng);
    Parts p;
    const std::string query = draw_query(needles, task.queries, rng, p.answers);
    const FilledHaystack context =
        task.haystack == Haystack::Essay
            ? needles_in_prose(essay_sentences(essay_words_, units), needles.sentences, at.even_depth, rng)
            : needles_in_lines(haystack_lines(task, units, text.needle_type, words, rng), needles.sentences,
                               at.even_depth, rng);
    p.depth = context.depth;
    p.task = fill(text.question, {{"{type}", text.type}, {"{query}", query}}, context.text);
    p.answer_prefix = fill(text.answer, {{"{type}", text.type}, {"{query}", query}});
    return p;
  };
  return {std::move(build), task.haystack == Haystack::Essay ? at.length * 3 / 4 : at.length / 22};
}

// Variable tracking: a worked example on a short chain, then the question on a chain through `units` lines.
RulerGenerator::Builder RulerGenerator::variable_tracking(const SampleAt& at) const {
  Build build = [at](int64_t units) {
    std::mt19937_64 rng(at.seed);
    const VariableChain example = variable_chain(rng, kVtExampleNoise, 3);
    const VariableChain chain = variable_chain(rng, std::max<int64_t>(units, kVtHops + 1), 5);
    Parts p;
    p.task =
        vt_question(example) + vt_answer_prefix(example) + join(example.names, " ") + "\n" + "\n" + vt_question(chain);
    p.answer_prefix = vt_answer_prefix(chain);
    p.answers = chain.names;
    return p;
  };
  return {std::move(build), at.length / 22};
}

// Common words: a worked example on a short list, then the question on a list of `units` words.
RulerGenerator::Builder RulerGenerator::common_words(const SampleAt& at) const {
  const CweCounts n = cwe_counts(at.length);
  std::vector<std::string> vocab = vocabulary_;
  std::mt19937_64 vocab_rng(splitmix64(at.run_seed));
  shuffle(vocab, vocab_rng);  // once per run, as RULER's
  Build build = [at, n, vocab](int64_t units) {
    std::mt19937_64 rng(at.seed);
    std::vector<std::string> shot_top, top;
    const std::string shot_list = cwe_word_list(vocab, rng, n.shot_words, n.shot_common, n.shot_rare, shot_top);
    const std::string shot = fill(kCweTemplate, {}, shot_list) + std::string(kCweAnswer) + " " + numbered(shot_top);
    const int64_t words = std::max<int64_t>(units, kCweCommon);
    Parts p;
    p.task = shot + "\n" + fill(kCweTemplate, {}, cwe_word_list(vocab, rng, words, n.common, n.rare, top));
    p.answer_prefix = std::string(kCweAnswer);
    p.answers = top;
    return p;
  };
  return {std::move(build), at.length / (at.length >= 4096 ? 12 : 5)};
}

// Frequent words: `units` coded words of a Zipf(2) text, shuffled.
RulerGenerator::Builder RulerGenerator::frequent_words(const RulerTask& task, const SampleAt& at) const {
  const int vocab_size = std::max(kFweAnswers + 2, (at.length - task.answer_tokens) / 50);
  Build build = [at, vocab_size](int64_t units) {
    std::mt19937_64 rng(at.seed);
    const std::vector<std::string> vocab = coded_words(rng, vocab_size);
    std::vector<std::string> items = zipf_words(vocab, units);
    shuffle(items, rng);
    Parts p;
    p.task = fill(kFweTemplate, {}, join(items, " "));
    p.answer_prefix = std::string(kFweAnswer);
    p.answers.assign(vocab.begin() + 1, vocab.begin() + 1 + kFweAnswers);
    return p;
  };
  return {std::move(build), at.length / 2};
}

}  // namespace hg::eval
