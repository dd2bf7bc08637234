// The Pre-QKᵀ predictors: one table, one row each (name, one line of help, a factory). The
// --predictor knob, the step plans of the feedback scheduler and the attention stage name a
// predictor by its row; a new predictor is one file and one row in predictors.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attention/selectors/selector.h"

namespace hg {

struct PredictorInfo {
  std::string name;
  std::string help;
  std::unique_ptr<Selector> (*make)(const SelectorContext&);
};

const std::vector<PredictorInfo>& predictor_table();
std::vector<std::string> predictor_names();
// The row of `name`; hg::Error listing the predictors when there is none.
const PredictorInfo& find_predictor(const std::string& name);

}  // namespace hg
