// ModelSpec from the metadata that travels with weights: HF config.json (opt, llama, qwen2) and
// GGUF key/values (llama, qwen2). Every missing or bad field is an hg::Error naming it.
#pragma once
#include <filesystem>
#include <string>

#include "hybridgen/model.h"

namespace hg {
namespace gguf {
class File;
}

ModelSpec spec_from_hf_config(const std::filesystem::path& config_json);
// Parses config.json text; `file` names it in error messages.
ModelSpec spec_from_hf_config_text(const std::string& text, const std::string& file);
ModelSpec spec_from_gguf(const gguf::File& file);
// Checks the invariants every loader relies on (positive sizes, heads divide, even head_dim).
void validate_spec(const ModelSpec& spec, const std::string& origin);

}  // namespace hg
