// RULER's generators and scoring (src/eval/ruler.h), on a real tokenizer (Qwen's, data/) and real
// prose (Moby-Dick): every sample fits its length tightly, holds its answers where the task says,
// and is the same for the same seed; the scores follow RULER's string_match_all.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "eval/ruler.h"
#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

struct Fixture {
  std::unique_ptr<Tokenizer> tok = load_tokenizer(data_dir() / "tokenizers/qwen3/tokenizer.json");
  std::string essay =
      read_file(data_dir() / "text/moby-dick/chapter_1.txt") + read_file(data_dir() / "text/moby-dick/chapter_2.txt");
};

Fixture& fx() {
  static Fixture f;
  return f;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Ruler, EveryTaskFitsItsLengthAndHoldsItsAnswers) {
  const eval::RulerGenerator gen(*fx().tok, fx().essay, /*chat=*/false);
  const std::map<std::string, size_t> n_answers = {{"niah_single_1", 1},
                                                   {"niah_single_2", 1},
                                                   {"niah_single_3", 1},
                                                   {"niah_multikey_1", 1},
                                                   {"niah_multikey_2", 1},
                                                   {"niah_multikey_3", 1},
                                                   {"niah_multivalue", 4},
                                                   {"niah_multiquery", 4},
                                                   {"vt", 5},
                                                   {"cwe", 10},
                                                   {"fwe", 3}};
  for (const int length : {1024, 4096}) {
    for (const eval::RulerTask& task : eval::ruler_tasks()) {
      SCOPED_TRACE(task.name + " at " + std::to_string(length));
      const eval::RulerSample s = gen.make(task, length, 1, 4, 42);
      const int64_t used = static_cast<int64_t>(s.ids.size()) + task.answer_tokens;
      EXPECT_LE(used, length);
      EXPECT_GE(used, length * 95 / 100) << "the haystack should fill the length";
      ASSERT_EQ(s.answers.size(), n_answers.at(task.name));
      const std::string text = fx().tok->decode(s.ids, true);
      for (const std::string& a : s.answers) EXPECT_NE(text.find(a), std::string::npos) << a;
      // the same seed makes the same sample, another seed another
      EXPECT_EQ(gen.make(task, length, 1, 4, 42).ids, s.ids);
      EXPECT_NE(gen.make(task, length, 1, 4, 43).ids, s.ids);
      EXPECT_NE(gen.make(task, length, 2, 4, 42).ids, s.ids);
    }
  }
}

TEST(Ruler, NeedlesSayWhatTheQuestionAsks) {
  const eval::RulerGenerator gen(*fx().tok, fx().essay, false);
  const eval::RulerSample s = gen.make(eval::find_ruler_task("niah_single_1"), 2048, 0, 1, 7);
  const std::string text = fx().tok->decode(s.ids, true);
  // RULER's singular wording, its needle sentence, and the key asked for is the needle's
  const std::regex needle("One of the special magic numbers for ([A-Za-z-]+) is: ([0-9]{7})\\.");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, needle)) << text.substr(0, 400);
  EXPECT_EQ(m[2].str(), s.answers[0]);
  EXPECT_NE(text.find("A special magic number is hidden within the following text."), std::string::npos);
  EXPECT_NE(text.find("What is the special magic number for " + m[1].str() + " mentioned in the provided text?"),
            std::string::npos);
  EXPECT_TRUE(text.ends_with("The special magic number for " + m[1].str() + " mentioned in the provided text is"));

  // multikey_1: one needle asked among four; multiquery: all four keys asked, plural wording
  const eval::RulerSample mk = gen.make(eval::find_ruler_task("niah_multikey_1"), 2048, 0, 1, 7);
  EXPECT_EQ(count(fx().tok->decode(mk.ids, true), "One of the special magic numbers for"), 4u);
  const eval::RulerSample mq = gen.make(eval::find_ruler_task("niah_multiquery"), 2048, 0, 1, 7);
  const std::string mq_text = fx().tok->decode(mq.ids, true);
  EXPECT_NE(mq_text.find("Some special magic numbers are hidden"), std::string::npos);
  EXPECT_NE(mq_text.find(", and "), std::string::npos);  // "a, b, c, and d"
  const eval::RulerSample uu = gen.make(eval::find_ruler_task("niah_multikey_3"), 2048, 0, 1, 7);
  EXPECT_TRUE(std::regex_match(uu.answers[0],
                               std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << uu.answers[0];
}

TEST(Ruler, SingleNeedleDepthsAreSpreadEvenly) {
  const eval::RulerGenerator gen(*fx().tok, fx().essay, false);
  const int n = 5;
  double last = -1;
  for (int i = 0; i < n; ++i) {
    const eval::RulerSample s = gen.make(eval::find_ruler_task("niah_single_2"), 2048, i, n, 3);
    EXPECT_DOUBLE_EQ(s.depth, (i + 0.5) / n);
    const std::string text = fx().tok->decode(s.ids, true);
    const double at = static_cast<double>(text.find("One of the special magic")) / static_cast<double>(text.size());
    EXPECT_GT(at, last);  // deeper sample by sample
    EXPECT_NEAR(at, s.depth, 0.05);
    last = at;
  }
}

TEST(Ruler, WordTasksCountAsRulerDoes) {
  const eval::RulerGenerator gen(*fx().tok, "", false);
  // cwe at 4K: the 10 answers appear 30 times each in the list, the other words 3 times
  const eval::RulerSample cwe = gen.make(eval::find_ruler_task("cwe"), 4096, 0, 1, 5);
  const std::string text = fx().tok->decode(cwe.ids, true);
  const size_t list = text.rfind("Below is a numbered list of words.");  // after the worked example
  ASSERT_NE(list, std::string::npos);
  std::map<std::string, int> freq;
  const std::regex item("[0-9]+\\. ([^ ]+)");
  const std::string body = text.substr(list, text.find("\nQuestion:", list) - list);
  for (auto it = std::sregex_iterator(body.begin(), body.end(), item); it != std::sregex_iterator(); ++it)
    ++freq[(*it)[1].str()];
  for (const std::string& a : cwe.answers) EXPECT_EQ(freq[a], 30) << a;
  int rare = 0;
  for (const auto& [w, f] : freq) rare += f == 3;
  EXPECT_GT(rare, 30);  // Qwen writes each digit of the numbering as a token: ~7 tokens an item

  // fwe: the answers are the 2nd-4th most frequent coded words ("..." is the first)
  const eval::RulerSample fwe = gen.make(eval::find_ruler_task("fwe"), 4096, 0, 1, 5);
  const std::string ftext = fx().tok->decode(fwe.ids, true);
  std::map<std::string, int> ff;
  const std::regex word("\\b[a-z]{6}\\b|\\.\\.\\.");
  const size_t from = ftext.find("coded words. ") + 13, to = ftext.find("\nQuestion:");
  const std::string coded = ftext.substr(from, to - from);
  for (auto it = std::sregex_iterator(coded.begin(), coded.end(), word); it != std::sregex_iterator(); ++it)
    ++ff[(*it)[0].str()];
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [w, f] : ff) ranked.emplace_back(-f, w);
  std::sort(ranked.begin(), ranked.end());
  ASSERT_GE(ranked.size(), 4u);
  EXPECT_EQ(ranked[0].second, "...");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ranked[static_cast<size_t>(i + 1)].second, fwe.answers[static_cast<size_t>(i)]);

  // vt: the chain in order, each name assigned from the one before
  const eval::RulerSample vt = gen.make(eval::find_ruler_task("vt"), 2048, 0, 1, 5);
  const std::string vtext = fx().tok->decode(vt.ids, true);
  const size_t q = vtext.rfind("Memorize and track");
  size_t at = vtext.find("VAR " + vt.answers[0] + " = ", q);
  ASSERT_NE(at, std::string::npos);
  for (size_t h = 1; h < vt.answers.size(); ++h) {
    const size_t next = vtext.find("VAR " + vt.answers[h] + " = VAR " + vt.answers[h - 1], q);
    ASSERT_NE(next, std::string::npos) << h;
    EXPECT_GT(next, at);
    at = next;
  }
}

TEST(Ruler, ErrorsNameTheProblem) {
  const eval::RulerGenerator gen(*fx().tok, "", false);
  expect_error([&] { gen.make(eval::find_ruler_task("niah_single_2"), 2048, 0, 1, 1); }, {"needs a prose haystack"});
  expect_error([&] { gen.make(eval::find_ruler_task("niah_single_1"), 200, 0, 1, 1); },
               {"too short for niah_single_1"});
  expect_error([] { eval::find_ruler_task("qa_1"); }, {"no RULER task 'qa_1'", "niah_single_1"});
  eval::RulerConfig c;
  c.samples = 0;
  expect_error([&] { c.validate(); }, {"--samples"});
}

TEST(Ruler, StringMatchAllAndItsInterval) {
  EXPECT_DOUBLE_EQ(eval::string_match_all("The number is 1234567.", {"1234567"}), 1.0);
  EXPECT_DOUBLE_EQ(eval::string_match_all("ABCDE, fghij", {"abcde", "FGHIJ", "KLMNO", "PQRST"}), 0.5);
  EXPECT_DOUBLE_EQ(eval::string_match_all("", {"x"}), 0.0);
  // all-or-nothing samples: Wilson's interval (0 of 20 is not [0, 0])
  const eval::RulerScore none = eval::ruler_score(std::vector<double>(20, 0.0));
  EXPECT_DOUBLE_EQ(none.score, 0.0);
  EXPECT_DOUBLE_EQ(none.lo, 0.0);
  EXPECT_NEAR(none.hi, 16.11, 0.01);
  std::vector<double> half(20, 0.0);
  for (int i = 0; i < 10; ++i) half[static_cast<size_t>(i)] = 1.0;
  const eval::RulerScore h = eval::ruler_score(half);
  EXPECT_NEAR(h.lo, 29.93, 0.01);
  EXPECT_NEAR(h.hi, 70.07, 0.01);
  // partial credit: mean ± 1.96 standard errors
  const eval::RulerScore p = eval::ruler_score({0.5, 0.75, 1.0, 0.25});
  EXPECT_DOUBLE_EQ(p.score, 62.5);
  EXPECT_NEAR(p.hi - p.score, 1.959964 * std::sqrt(0.104167 / 4) * 100, 0.05);
}

}  // namespace
}  // namespace hg::test
