// Where the weight tables look tensors up: a name -> TensorView table built by a loader (GGUF,
// safetensors, synthetic), with the file each tensor came from for error messages.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "hybridgen/model.h"

namespace hg {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // nullopt when absent; throws hg::Error when present but in a dtype the engine cannot use.
  virtual std::optional<TensorView> find(const std::string& name) const = 0;
  // The file a tensor lives in (or would be expected in, when absent), for error messages.
  virtual std::string file_of(const std::string& name) const = 0;
};

}  // namespace hg
