// Model construction from already-opened sources (load_model() opens them from paths); exposed
// so that tests and fuzz targets can build models from in-memory files.
#pragma once
#include <memory>

#include "hybridgen/model.h"

namespace hg {
namespace gguf {
class File;
}

// Spec from the GGUF metadata, weights bound and checked; the Model keeps `file` alive.
std::unique_ptr<Model> model_from_gguf(std::shared_ptr<gguf::File> file);

}  // namespace hg
