// A read-only memory mapping of a whole file. Loaders keep it in a shared_ptr (Model::storage)
// so that TensorViews pointing into it stay valid as long as the model lives.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace hg {

class MappedFile {
 public:
  // Throws hg::Error naming the file when it cannot be opened or mapped. An empty file maps to
  // size() == 0 and data() == nullptr (callers report it as truncated).
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hg
