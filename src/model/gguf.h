// GGUF v2/v3 reader: header, metadata key/values, tensor infos, alignment; the file is mmapped
// and every tensor's byte range is checked against it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hybridgen/model.h"

namespace hg::gguf {

// One metadata value. Arrays hold scalars or strings (GGUF forbids nothing deeper that we use).
struct Value;
using Array = std::vector<Value>;
struct Value {
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // row-major, outermost first (GGUF's ne[] reversed)
  uint32_t ggml_type = 0;
  uint64_t offset = 0;         // relative to the data section
};

class File {
 public:
  // Maps and parses the file; throws hg::Error naming the file and field on any malformation.
  static std::shared_ptr<File> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, Value>& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return metadata_.count(key) != 0; }

  // Typed access; throws hg::Error "file: metadata key K: expected T" when absent or mistyped.
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;  // any integer type
  double get_float(const std::string& key) const; // float or integer types
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::optional<int64_t> find_int(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // A view of a tensor's bytes (checked at open); throws when the name is absent.
  TensorView tensor(const std::string& name) const;
  std::optional<TensorView> find_tensor(const std::string& name) const;

  ~File();

 private:
  File() = default;
  std::filesystem::path path_;
  uint32_t version_ = 0;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t data_offset_ = 0;
};

}  // namespace hg::gguf
