// A small GGUF writer for tests: builds valid files and, through its knobs, broken ones.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace hg::test {

class GgufWriter {
 public:
  enum Type : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 };

  uint32_t version = 3;
  uint32_t alignment = 32;  // used for layout; write general.alignment yourself to change it in-file
  int64_t tensor_count_override = -1;
  int64_t kv_count_override = -1;

  void kv_string(const std::string& key, const std::string& v) {
    begin_kv(key, STRING);
    put_string(kv_, v);
  }
  void kv_u32(const std::string& key, uint32_t v) { kv_scalar(key, U32, v); }
  void kv_i32(const std::string& key, int32_t v) { kv_scalar(key, I32, v); }
  void kv_u64(const std::string& key, uint64_t v) { kv_scalar(key, U64, v); }
  void kv_f32(const std::string& key, float v) { kv_scalar(key, F32, v); }
  void kv_f64(const std::string& key, double v) { kv_scalar(key, F64, v); }
  void kv_bool(const std::string& key, bool v) { kv_scalar(key, BOOL, static_cast<uint8_t>(v)); }
  void kv_u8(const std::string& key, uint8_t v) { kv_scalar(key, U8, v); }
  void kv_i8(const std::string& key, int8_t v) { kv_scalar(key, I8, v); }
  void kv_u16(const std::string& key, uint16_t v) { kv_scalar(key, U16, v); }
  void kv_i16(const std::string& key, int16_t v) { kv_scalar(key, I16, v); }
  void kv_i64(const std::string& key, int64_t v) { kv_scalar(key, I64, v); }
  void kv_strings(const std::string& key, const std::vector<std::string>& v) {
    begin_kv(key, ARRAY);
    put(kv_, uint32_t{STRING});
    put(kv_, uint64_t{v.size()});
    for (const auto& s : v) put_string(kv_, s);
  }
  void kv_i32s(const std::string& key, const std::vector<int32_t>& v) {
    begin_kv(key, ARRAY);
    put(kv_, uint32_t{I32});
    put(kv_, uint64_t{v.size()});
    for (int32_t x : v) put(kv_, x);
  }
  void kv_f32s(const std::string& key, const std::vector<float>& v) {
    begin_kv(key, ARRAY);
    put(kv_, uint32_t{F32});
    put(kv_, uint64_t{v.size()});
    for (float x : v) put(kv_, x);
  }
  // Raw bytes appended to the key/value section (for malformed values); counts as one kv.
  void kv_raw(const std::string& bytes) {
    kv_ += bytes;
    ++n_kv_;
  }

  // shape is row-major (outermost first); `data` is the tensor's bytes. offset_override places
  // the tensor's data at that offset instead of the next aligned one (and writes nothing).
  void tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> shape, const std::string& data,
              int64_t offset_override = -1) {
    Tensor t{name, ggml_type, std::move(shape), data, 0};
    if (offset_override >= 0) {
      t.offset = static_cast<uint64_t>(offset_override);
      t.data.clear();
    } else {
      data_.resize((data_.size() + alignment - 1) / alignment * alignment, '\0');
      t.offset = data_.size();
      data_ += data;
    }
    tensors_.push_back(std::move(t));
  }
  void tensor_f32(const std::string& name, std::vector<int64_t> shape, float fill = 0.5f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::string bytes(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) std::memcpy(&bytes[static_cast<size_t>(i) * 4], &fill, 4);
    tensor(name, 0, std::move(shape), bytes);
  }

  std::string build() const {
    std::string out;
    out += "GGUF";
    put(out, version);
    put(out, static_cast<uint64_t>(tensor_count_override >= 0 ? tensor_count_override : tensors_.size()));
    put(out, static_cast<uint64_t>(kv_count_override >= 0 ? kv_count_override : n_kv_));
    out += kv_;
    for (const auto& t : tensors_) {
      put_string(out, t.name);
      put(out, static_cast<uint32_t>(t.shape.size()));
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put(out, static_cast<uint64_t>(*it));
      put(out, t.ggml_type);
      put(out, t.offset);
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    out += data_;
    return out;
  }

  std::filesystem::path write(const std::filesystem::path& path) const {
    std::ofstream f(path, std::ios::binary);
    std::string b = build();
    f.write(b.data(), static_cast<std::streamsize>(b.size()));
    return path;
  }

 private:
  struct Tensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<int64_t> shape;
    std::string data;
    uint64_t offset;
  };
  template <typename T>
  static void put(std::string& s, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
  }
  static void put_string(std::string& s, const std::string& v) {
    put(s, uint64_t{v.size()});
    s += v;
  }
  void begin_kv(const std::string& key, uint32_t type) {
    put_string(kv_, key);
    put(kv_, type);
    ++n_kv_;
  }
  template <typename T>
  void kv_scalar(const std::string& key, Type type, T v) {
    begin_kv(key, type);
    put(kv_, v);
  }

  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
  std::string data_;
};

}  // namespace hg::test
