#include "attention/selectors/predictors.h"

#include "attention/selectors/h2o_predictor.h"
#include "attention/selectors/infinigen.h"
#include "attention/selectors/partial.h"
#include "attention/selectors/quant_keys.h"
#include "attention/selectors/recent.h"
#include "hybridgen/error.h"
#include "util/strings.h"

namespace hg {

namespace {

template <typename S>
std::unique_ptr<Selector> make(const SelectorContext& c) {
  return std::make_unique<S>(c);
}

}  // namespace

std::unique_ptr<Selector> make_quest_selector(const SelectorContext& c);  // quest.cpp

const std::vector<PredictorInfo>& predictor_table() {
  static const std::vector<PredictorInfo> table = {
      {"recent", "the most recent host tokens",
       [](const SelectorContext&) -> std::unique_ptr<Selector> { return std::make_unique<RecentSelector>(); }},
      {"h2o", "the host tokens of largest accumulated attention", make<H2oPredictor>},
      {"partial", "top-K of logits over --partial-dims query dimensions", make<PartialSelector>},
      {"q4", "top-K of logits over a 4-bit (Q4_1) copy of the host keys", make<QuantKeySelector>},
      {"infinigen", "InfiniGen's skewed partial scores, tokens within --alpha of the max, K and V fetched",
       make<InfinigenSelector>},
      {"quest", "Quest's pages of 16 host tokens ranked by the upper bound of their logits, K and V fetched",
       make_quest_selector},
  };
  return table;
}

std::vector<std::string> predictor_names() {
  std::vector<std::string> names;
  for (const auto& p : predictor_table()) names.push_back(p.name);
  return names;
}

const PredictorInfo& find_predictor(const std::string& name) {
  for (const auto& p : predictor_table())
    if (p.name == name) return p;
  throw Error("--predictor: '" + name + "' is not a predictor (predictors: " + join(predictor_names()) + ")");
}

}  // namespace hg
