#include "eval/ruler.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <set>

#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
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

uint64_t sample_seed(uint64_t seed, const std::string& task, int index) {
  uint64_t h = splitmix64(seed);
  for (char c : task) h = splitmix64(h ^ static_cast<unsigned char>(c));
  return splitmix64(h ^ static_cast<uint64_t>(index));
}

// RULER's 40 needle depths: round(linspace(0, 100, 40)), in percent.
double grid_depth(int i) { return std::round(100.0 * i / 39.0) / 100.0; }

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
  const uint64_t s_seed = sample_seed(seed, task.name, index);
  if (task.needs_essay() && essay_words_.empty())
    throw Error(task.name + " needs a prose haystack: give -f FILE or a directory of .txt files");
  auto key_of = [&](NeedleKind k, std::mt19937_64& rng) {
    switch (k) {
      case NeedleKind::Words:
        return adjectives_[uniform(rng, adjectives_.size())] + "-" + nouns_[uniform(rng, nouns_.size())];
      case NeedleKind::Numbers:
        return draw_number(rng, 7);
      case NeedleKind::Uuids:
        return draw_uuid(rng);
    }
    return std::string();
  };
  const double even_depth = (index + 0.5) / std::max(1, n_samples);

  Build build;
  int64_t guess = 0;
  switch (task.family) {
    case RulerFamily::Niah: {
      const int n_keys = std::max(task.keys, task.queries);
      const bool singular = task.queries * task.values == 1;
      std::string type = kind_plural(task.value);
      const std::string needle_type = type;
      std::string tmpl = std::string(kNiahTemplate) + std::string(kNiahAnswer);
      if (singular) {
        // RULER's singular rewrite of the whole template; the needles keep the plural
        for (auto [from, to] : {std::pair{"Some", "A"}, {"are all", "is"}, {"are", "is"}, {"answers", "answer"}})
          tmpl = replace_all(std::move(tmpl), from, to);
        type.pop_back();
      }
      const size_t split = tmpl.rfind(" The special magic");
      const std::string question = tmpl.substr(0, split), answer = tmpl.substr(split);
      build = [=, this](int64_t units) {
        std::mt19937_64 rng(s_seed);
        std::vector<std::string> keys, needles, values_of;
        std::vector<std::vector<std::string>> values(static_cast<size_t>(n_keys));
        for (int k = 0; k < n_keys; ++k) {
          keys.push_back(key_of(task.key, rng));
          for (int v = 0; v < task.values; ++v) {
            values[static_cast<size_t>(k)].push_back(key_of(task.value, rng));
            needles.push_back(fill(
                kNeedle,
                {{"{type}", needle_type}, {"{key}", keys.back()}, {"{value}", values[static_cast<size_t>(k)].back()}}));
          }
        }
        shuffle(needles, rng);
        const std::vector<int64_t> asked = sample_distinct(rng, n_keys, task.queries);
        Parts p;
        std::vector<std::string> query_keys;
        for (int64_t k : asked) {
          query_keys.push_back(keys[static_cast<size_t>(k)]);
          for (const std::string& v : values[static_cast<size_t>(k)]) p.answers.push_back(v);
        }
        const std::string query = query_list(query_keys);
        std::string context;
        if (task.haystack == Haystack::Essay) {
          std::vector<std::string> sentences = essay_sentences(essay_words_, units);
          // a needle at depth d goes between the sentences nearest to d of the haystack's text
          std::vector<size_t> start(1, 0);
          for (const std::string& x : sentences) start.push_back(start.back() + x.size() + 1);
          auto boundary = [&](double d) {
            const double target = d * static_cast<double>(start.back());
            const auto it = std::lower_bound(start.begin(), start.end(), static_cast<size_t>(target));
            int64_t i = it - start.begin();
            if (i > 0 && (it == start.end() || target - static_cast<double>(start[static_cast<size_t>(i - 1)]) <
                                                   static_cast<double>(*it) - target))
              --i;
            return std::min<int64_t>(i, static_cast<int64_t>(sentences.size()));
          };
          std::vector<int64_t> at;  // sentence index each needle goes before
          if (needles.size() == 1) {
            at.push_back(boundary(even_depth));
            p.depth = even_depth;
          } else {
            for (int64_t d : sample_distinct(rng, 40, static_cast<int>(needles.size())))
              at.push_back(boundary(grid_depth(static_cast<int>(d))));
            std::sort(at.begin(), at.end());
          }
          std::vector<std::string> parts;
          int64_t from = 0;
          for (size_t i = 0; i < needles.size(); ++i) {
            std::vector<std::string> chunk(sentences.begin() + from, sentences.begin() + at[i]);
            parts.push_back(join(chunk, " "));
            parts.push_back(needles[i]);
            from = at[i];
          }
          parts.push_back(join(std::vector<std::string>(sentences.begin() + from, sentences.end()), " "));
          context = join(parts, " ");
        } else {
          std::vector<std::string> hay;
          for (int64_t i = 0; i < units; ++i)
            hay.push_back(task.haystack == Haystack::Noise ? std::string(kFiller)
                                                           : fill(kNeedle, {{"{type}", needle_type},
                                                                            {"{key}", key_of(task.key, rng)},
                                                                            {"{value}", key_of(task.value, rng)}}));
          std::vector<int64_t> at;
          if (needles.size() == 1) {
            at.push_back(static_cast<int64_t>(static_cast<double>(units) * even_depth));
            p.depth = even_depth;
          } else {
            for (size_t i = 0; i < needles.size(); ++i)
              at.push_back(static_cast<int64_t>(uniform(rng, static_cast<uint64_t>(units) + 1)));
            std::sort(at.begin(), at.end());
          }
          for (size_t i = needles.size(); i-- > 0;) hay.insert(hay.begin() + at[i], needles[i]);
          context = join(hay, "\n");
        }
        p.task = fill(question, {{"{type}", type}, {"{query}", query}}, context);
        p.answer_prefix = fill(answer, {{"{type}", type}, {"{query}", query}});
        return p;
      };
      guess = task.haystack == Haystack::Essay ? length * 3 / 4 : length / 22;
      break;
    }
    case RulerFamily::VariableTracking: {
      // The chain, spread in order through `units` filler lines; one worked example before it.
      auto chain_text = [](std::mt19937_64& rng, int64_t units, int name_len, std::vector<std::string>& names,
                           std::string& value) {
        std::set<std::string> seen;
        while (static_cast<int>(names.size()) < kVtHops + 1) {
          std::string v = draw_letters(rng, name_len, 'A');
          if (seen.insert(v).second) names.push_back(std::move(v));
        }
        value = std::to_string(10000 + uniform(rng, 90000));
        std::vector<std::string> chain = {"VAR " + names[0] + " = " + value};
        for (int h = 1; h <= kVtHops; ++h) chain.push_back("VAR " + names[h] + " = VAR " + names[h - 1] + " ");
        std::vector<std::string> hay(static_cast<size_t>(units), std::string(kFiller));
        std::vector<int64_t> at = sample_distinct(rng, units, static_cast<int>(chain.size()));
        std::sort(at.begin(), at.end());
        for (size_t j = 0; j < chain.size(); ++j) hay.insert(hay.begin() + at[j] + static_cast<int64_t>(j), chain[j]);
        return join(hay, "\n");
      };
      build = [=](int64_t units) {
        std::mt19937_64 rng(s_seed);
        std::vector<std::string> ex_names, names;
        std::string ex_value, value;
        const std::string ex_context = chain_text(rng, kVtExampleNoise, 3, ex_names, ex_value);
        const std::string n = std::to_string(kVtHops + 1);
        const std::string example = fill(kVtTemplate, {{"{query}", ex_value}}, ex_context) +
                                    fill(kVtAnswer, {{"{n}", n}, {"{query}", ex_value}}) + join(ex_names, " ") + "\n";
        const std::string context = chain_text(rng, std::max<int64_t>(units, kVtHops + 1), 5, names, value);
        Parts p;
        p.task = example + "\n" + fill(kVtTemplate, {{"{query}", value}}, context);
        p.answer_prefix = fill(kVtAnswer, {{"{n}", n}, {"{query}", value}});
        p.answers = names;
        return p;
      };
      guess = length / 22;
      break;
    }
    case RulerFamily::CommonWords: {
      const bool long_ctx = length >= 4096;  // RULER's frequencies: 30× / 3×, or 6× / 1× below 4K
      const int common = long_ctx ? 30 : 6, rare = long_ctx ? 3 : 1;
      const int shot_words = long_ctx ? 40 : 20, shot_common = long_ctx ? 10 : 3, shot_rare = long_ctx ? 3 : 1;
      std::vector<std::string> vocab = vocabulary_;
      std::mt19937_64 vocab_rng(splitmix64(seed));
      shuffle(vocab, vocab_rng);  // once per run, as RULER's
      auto word_list = [vocab](std::mt19937_64& rng, int64_t n, int cr, int ur, std::vector<std::string>& top) {
        if (n > static_cast<int64_t>(vocab.size()))
          throw Error("cwe: the length needs " + std::to_string(n) + " distinct words, the word lists hold " +
                      std::to_string(vocab.size()));
        std::vector<std::string> items;
        for (int64_t i : sample_distinct(rng, static_cast<int64_t>(vocab.size()), static_cast<int>(n))) {
          const std::string& w = vocab[static_cast<size_t>(i)];
          const bool is_common = static_cast<int>(top.size()) < kCweCommon;
          if (is_common) top.push_back(w);
          for (int r = 0; r < (is_common ? cr : ur); ++r) items.push_back(w);
        }
        shuffle(items, rng);
        std::string s;
        for (size_t i = 0; i < items.size(); ++i) s += (i ? " " : "") + std::to_string(i + 1) + ". " + items[i];
        return s;
      };
      build = [=](int64_t units) {
        std::mt19937_64 rng(s_seed);
        std::vector<std::string> shot_top, top;
        const std::string shot_ctx = word_list(rng, shot_words, shot_common, shot_rare, shot_top);
        std::string shot_answer;
        for (size_t i = 0; i < shot_top.size(); ++i)
          shot_answer += (i ? " " : "") + std::to_string(i + 1) + ". " + shot_top[i];
        const std::string shot = fill(kCweTemplate, {}, shot_ctx) + std::string(kCweAnswer) + " " + shot_answer;
        Parts p;
        p.task = shot + "\n" +
                 fill(kCweTemplate, {}, word_list(rng, std::max<int64_t>(units, kCweCommon), common, rare, top));
        p.answer_prefix = std::string(kCweAnswer);
        p.answers = top;
        return p;
      };
      guess = length / (long_ctx ? 12 : 5);
      break;
    }
    case RulerFamily::FrequentWords: {
      const int vocab_size = std::max(kFweAnswers + 2, (length - task.answer_tokens) / 50);
      build = [=](int64_t units) {
        std::mt19937_64 rng(s_seed);
        std::set<std::string> seen;
        std::vector<std::string> vocab;
        while (static_cast<int>(vocab.size()) < vocab_size) {
          std::string w = draw_letters(rng, 6, 'a');
          if (seen.insert(w).second) vocab.push_back(std::move(w));
        }
        vocab[0] = "...";  // the most frequent "word" is noise
        constexpr double kZeta2 = 1.6449340668482264;
        std::vector<std::string> items;
        for (int k = 1; k <= vocab_size; ++k) {
          const int64_t count =
              static_cast<int64_t>(static_cast<double>(units) / (static_cast<double>(k) * k) / kZeta2);
          for (int64_t c = 0; c < count; ++c) items.push_back(vocab[static_cast<size_t>(k - 1)]);
        }
        shuffle(items, rng);
        Parts p;
        p.task = fill(kFweTemplate, {}, join(items, " "));
        p.answer_prefix = std::string(kFweAnswer);
        p.answers.assign(vocab.begin() + 1, vocab.begin() + 1 + kFweAnswers);
        return p;
      };
      guess = length / 2;
      break;
    }
  }
  RulerSample s = fit(task, length, build, guess);
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
