#include "attention/selectors/selector.h"

#include "attention/selectors/h2o_predictor.h"
#include "attention/selectors/partial.h"
#include "attention/selectors/post_top_k.h"
#include "attention/selectors/recent.h"

namespace hg {

std::unique_ptr<Selector> make_selector(Selection select, Predictor predictor, const SelectorContext& c) {
  if (select != Selection::Pre) return std::make_unique<PostTopKSelector>();
  switch (predictor) {
    case Predictor::Recent:
      return std::make_unique<RecentSelector>();
    case Predictor::H2O:
      return std::make_unique<H2oPredictor>(c);
    case Predictor::Partial:
      return std::make_unique<PartialSelector>(c.policy.partial_dims);
  }
  return std::make_unique<PostTopKSelector>();
}

}  // namespace hg
