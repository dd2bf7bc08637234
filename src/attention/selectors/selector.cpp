#include "attention/selectors/selector.h"

#include "attention/selectors/post_top_k.h"
#include "attention/selectors/predictors.h"

namespace hg {

std::unique_ptr<Selector> make_selector(Selection select, const std::string& predictor, const SelectorContext& c) {
  if (select != Selection::Pre) return std::make_unique<PostTopKSelector>();
  return find_predictor(predictor).make(c);
}

}  // namespace hg
