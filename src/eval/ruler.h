// RULER (Hsieh et al., "RULER: What's the Real Context Size of Your Long-Context Language
// Models?", 2024): synthetic long-context tasks whose answers are known, generated offline and
// deterministically from a seed, scored by string match. Written after RULER's generators
// (NVIDIA/RULER/scripts/data/synthetic/: niah.py, variable_tracking.py,
// common_words_extraction.py, freq_words_extraction.py) and its scoring
// (NVIDIA/RULER/scripts/eval/evaluate.py: string_match_all); its prompt
// wording is kept verbatim, the code is this project's own.
//
// The tasks (RULER's synthetic.yaml names; qa_1/qa_2 need SQuAD/HotpotQA and are left out):
//   niah_single_1/2/3      one needle "One of the special magic numbers for KEY is: VALUE." in
//                          repeated filler (1) or prose (2: number values, 3: uuid values)
//   niah_multikey_1/2/3    the needle among 3 distractor needles (1), or in a haystack made of
//                          distractor needles only (2: word keys, 3: uuid keys and values)
//   niah_multivalue        one key, 4 values, all asked
//   niah_multiquery        4 keys, all asked
//   vt                     variable tracking: a chain VAR A = 12345, VAR B = VAR A, ... (4 hops)
//                          spread through filler; name every variable holding the value
//   cwe                    common words: the 10 words that appear 30× in a numbered list of
//                          words that appear 3× (6× and 1× below 4K tokens)
//   fwe                    frequent words: the 3 most frequent coded words of a Zipf(2) text
// Keys are adjective-noun pairs and the cwe vocabulary comes from the word lists of the
// `wonderwords` package, as RULER's do (data/wordlists/wonderwords/, compiled in).
//
// What differs from RULER, deliberately:
//   - the prose haystack is a text the caller gives (Moby-Dick chapters in data/text/), not Paul
//     Graham's essays (not redistributable); it is cut into sentences at . ! ? followed by a space
//     (RULER uses NLTK's punkt);
//   - a single needle's depth is spread evenly over the samples (sample i of n at (i + 0.5) / n of
//     the haystack); several needles take distinct depths drawn from RULER's 40 even depths; in
//     prose a depth is the sentence boundary nearest that fraction of the text (RULER: of the
//     sentence count);
//   - with a chat template the task (and cwe's and vt's worked example) is the user's message and
//     the answer prefix starts the assistant's reply;
//   - the haystack is fitted to the length by a secant search on this tokenizer's token count
//     (prompt + the task's answer tokens <= length), not RULER's binary search.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "eval/greedy.h"

namespace hg {
class Engine;
class Tokenizer;
}  // namespace hg

namespace hg::eval {

class PrefillCache;

enum class RulerFamily { Niah, VariableTracking, CommonWords, FrequentWords };
enum class Haystack { Noise, Essay, Needles };
enum class NeedleKind { Words, Numbers, Uuids };

struct RulerTask {
  std::string name;  // RULER's: niah_single_1, ..., vt, cwe, fwe
  RulerFamily family = RulerFamily::Niah;
  Haystack haystack = Haystack::Noise;
  NeedleKind key = NeedleKind::Words, value = NeedleKind::Numbers;
  int keys = 1, values = 1, queries = 1;  // NIAH: needles are keys × values; queries of the keys asked
  int answer_tokens = 128;                // RULER's tokens_to_generate
  bool needs_essay() const { return haystack == Haystack::Essay; }
};

const std::vector<RulerTask>& ruler_tasks();  // in RULER's order
// hg::Error listing the tasks when there is none of that name.
const RulerTask& find_ruler_task(const std::string& name);
std::string ruler_task_names();  // "niah_single_1, ..."

struct RulerSample {
  std::string task;
  int index = 0;
  std::vector<int32_t> ids;          // the whole prompt, BOS included where the tokenizer adds one
  std::vector<std::string> answers;  // what the reply must contain (RULER's "outputs")
  double depth = -1;                 // NIAH with one needle: where it sits, a fraction of the haystack
};

// Makes RULER prompts for one model's tokenizer. `essay`: the prose the essay haystacks are cut
// from (tiled when a length needs more); may be empty when no essay task is asked.
class RulerGenerator {
 public:
  RulerGenerator(const Tokenizer& tok, std::string_view essay, bool chat);
  // Sample `index` of `n_samples` of `task` at `length` tokens (prompt + answer tokens), from seed.
  // hg::Error when the length is too short for the task's instructions.
  RulerSample make(const RulerTask& task, int length, int index, int n_samples, uint64_t seed) const;

 private:
  struct Parts {
    std::string before;         // the chat template's text before the user message
    std::string task;           // the user message: instructions + context + question
    std::string answer_prefix;  // starts the reply
    std::vector<std::string> answers;
    double depth = -1;
  };
  // Draws the sample's parts with `units` units of haystack (sentences, words, list words).
  using Build = std::function<Parts(int64_t units)>;
  RulerSample fit(const RulerTask& task, int length, const Build& build, int64_t first_guess) const;
  std::vector<int32_t> encode(const Parts& p) const;

  // Which sample a builder makes: its length, the run's seed, the sample's own seed (every draw
  // of a Build starts from it) and where a single needle sits.
  struct SampleAt {
    int length = 0;
    uint64_t run_seed = 0, seed = 0;
    double even_depth = 0;
  };
  // A task family's sample, and a first guess of the units that fill the length.
  struct Builder {
    Build build;
    int64_t first_guess = 0;
  };
  // One builder per task family; builder() picks the task's.
  Builder builder(const RulerTask& task, const SampleAt& at) const;
  Builder niah(const RulerTask& task, const SampleAt& at) const;
  Builder variable_tracking(const SampleAt& at) const;
  Builder common_words(const SampleAt& at) const;
  Builder frequent_words(const RulerTask& task, const SampleAt& at) const;

  const Tokenizer& tok_;
  std::vector<std::string> essay_words_;
  bool chat_;
  std::string chat_before_, chat_after_;                      // the chat template around the user message
  std::vector<std::string> nouns_, adjectives_, vocabulary_;  // wonderwords'; cwe's sorted union
};

// RULER's string_match_all for one reply: the fraction of `answers` found in it, case-insensitive.
double string_match_all(std::string_view reply, const std::vector<std::string>& answers);

// A score in percent with its 95% interval (the mean of per-sample scores in [0, 1] ± 1.96
// standard errors, clamped to [0, 100]; Wilson's interval when every score is 0 or 1).
struct RulerScore {
  double score = 0, lo = 0, hi = 0;
  int n = 0;
  nlohmann::json to_json() const;
};
RulerScore ruler_score(const std::vector<double>& per_sample);

struct RulerConfig {
  int length = 4096;               // tokens: prompt + the task's answer tokens
  int samples = 20;                // per task
  uint64_t seed = 42;              // RULER's default
  std::vector<std::string> tasks;  // names (ruler_tasks()); empty: all
  int answer_tokens = 0;           // greedy reply tokens; 0: each task's own (RULER's)
  const PrefillCache* prefill_cache = nullptr;  // keeps each sample's prefill between runs (not owned)
  std::string checkpoint;  // file of the finished samples, resumed from (eval/ruler_checkpoint.h); empty: none
  void validate() const;   // hg::Error naming the option
  std::vector<const RulerTask*> selected() const;
};

// Every sample of every task through every policy (eval/greedy.h: each engine under its --policy
// entry): the sample's prompt is prefilled once for the policies that share their prefill
// (eval/shared_prefill.h), then each answers greedily. Returns
// {"length", "samples", "seed", "tasks", "prompt_tokens": {task: mean},
//  "policies": [{"policy", "attention", "prefill": "recorded"|"shared"|"own", "tasks": {task: score},
//                "mean": score}], "prefill": {...}, "answers": [{task, index, depth, answers,
//  "replies": {label: text}}], "resumed": samples taken from c.checkpoint} with scores as
// RulerScore::to_json. on_sample(done, total): progress.
nlohmann::json run_ruler(const RulerGenerator& gen, const Tokenizer& tok, const std::vector<PolicyEngine>& policies,
                         const RulerConfig& c, const std::function<void(int done, int total)>& on_sample = {});

// The word lists compiled in from data/wordlists/wonderwords/ (cmake/embed_words.cmake).
std::string_view wonderwords_nounlist();
std::string_view wonderwords_adjectivelist();
std::string_view wonderwords_verblist();

}  // namespace hg::eval
