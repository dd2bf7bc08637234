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

namespace hg {
class MappedFile;
}

namespace hg::gguf {

// One metadata value. Arrays hold scalars or strings (nested arrays are rejected at open).
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
  uint64_t nbytes = 0;         // computed from shape and type, checked against the file
};

// ggml type numbers we know the block layout of (all of ggml's), and the subset we compute on.
std::string ggml_type_name(uint32_t ggml_type);  // "q5_k", or "unknown(77)"
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
uint32_t ggml_type_from_dtype(DType t);
std::string supported_ggml_types();  // "f32, f16, …": the names dtype_from_ggml accepts

class File {
 public:
  // Maps and parses the file; throws hg::Error naming the file and field on any malformation.
  static std::shared_ptr<File> open(const std::filesystem::path& path);
  // Parses bytes owned by the caller (fuzzing, tests); `name` is used in error messages. The
  // bytes must outlive the File.
  static std::shared_ptr<File> from_memory(const uint8_t* data, size_t size, const std::string& name);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
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
  std::optional<double> find_float(const std::string& key) const;
  // Number of elements of an array value (e.g. tokenizer.ggml.tokens) without copying it.
  std::optional<size_t> find_array_size(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // A view of a tensor's bytes (checked at open); throws when the name is absent or its ggml
  // type is one we do not compute on (the message names the type and the tensor).
  TensorView tensor(const std::string& name) const;
  std::optional<TensorView> find_tensor(const std::string& name) const;

  ~File();

 private:
  File() = default;
  class Reader;  // bounds-checked reads, front to back (gguf.cpp)
  struct Counts {
    uint64_t tensors = 0, metadata = 0;
  };
  // parse() reads the file in its order: the header, metadata, tensor infos, then places the data
  // section and checks every tensor's byte range against it.
  void parse();
  Counts read_header(Reader& r);
  void read_metadata(Reader& r, uint64_t n_kv);
  void read_alignment();  // general.alignment, when the metadata has it
  void read_tensor_infos(Reader& r, uint64_t n_tensors);
  TensorInfo read_tensor_info(Reader& r, uint64_t i);
  void place_data_section(size_t infos_end);
  void check_tensor_ranges() const;
  const Value& get(const std::string& key, const char* expected) const;
  [[noreturn]] void fail(const std::string& what) const;

  std::filesystem::path path_;
  std::shared_ptr<MappedFile> mapping_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t data_offset_ = 0;
};

}  // namespace hg::gguf
