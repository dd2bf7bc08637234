// safetensors reader: one file (model.safetensors) or a sharded set (model.safetensors.index.json
// -> weight_map). Files are mmapped; every tensor's dtype, shape and byte range is checked.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/tensor_source.h"

namespace hg {

class SafetensorsSet : public TensorSource {
 public:
  // A directory holding model.safetensors or model.safetensors.index.json (+ shards).
  static std::unique_ptr<SafetensorsSet> open_dir(const std::filesystem::path& dir);
  // One .safetensors file.
  static std::unique_ptr<SafetensorsSet> open_file(const std::filesystem::path& file);
  // Parses bytes owned by the caller (fuzzing, tests); `name` appears in error messages.
  static std::unique_ptr<SafetensorsSet> from_memory(const uint8_t* data, size_t size, const std::string& name);

  std::optional<TensorView> find(const std::string& name) const override;
  std::string file_of(const std::string& name) const override;
  std::vector<std::string> names() const;
  // The mappings behind the views; move them into Model::storage.
  const std::vector<std::shared_ptr<void>>& storage() const { return storage_; }

 private:
  struct Entry {
    TensorView view;
    std::string file;
    std::string unsupported_dtype;  // non-empty: present, but not F32/F16/BF16
  };
  void add_file(const uint8_t* data, size_t size, const std::string& file);

  std::string origin_;  // directory or file, for tensors that are absent
  std::map<std::string, Entry> entries_;
  std::vector<std::shared_ptr<void>> storage_;
};

}  // namespace hg
