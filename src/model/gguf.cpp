// GGUF parsing. Every read is checked against the file size before it happens, counts are checked
// against the bytes that could possibly hold them before anything is reserved, and every tensor's
// byte range must lie inside the data section without overlapping another tensor.
#include "model/gguf.h"

#include <algorithm>
#include <cstring>

#include "hybridgen/error.h"
#include "model/mapped_file.h"

namespace hg::gguf {

bool ggml_type_layout(uint32_t ggml_type, int* block_elems, int* block_bytes);  // gguf_types.cpp

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian uint32
constexpr uint32_t kMaxDims = 4;

enum ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Bytes a value of this type occupies at least (strings: their length prefix).
size_t min_value_bytes(uint32_t type) {
  switch (type) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: case kString: return 8;
    case kArray: return 12;
    default: return 0;
  }
}

const char* value_kind(const Value& v) {
  switch (v.v.index()) {
    case 0: return "unsigned integer";
    case 1: return "integer";
    case 2: return "float";
    case 3: return "bool";
    case 4: return "string";
    default: return "array";
  }
}

bool as_int(const Value& v, int64_t* out) {
  if (auto* u = std::get_if<uint64_t>(&v.v)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(*u);
    return true;
  }
  if (auto* i = std::get_if<int64_t>(&v.v)) {
    *out = *i;
    return true;
  }
  return false;
}

bool as_float(const Value& v, double* out) {
  if (auto* d = std::get_if<double>(&v.v)) {
    *out = *d;
    return true;
  }
  int64_t i;
  if (as_int(v, &i)) {
    *out = static_cast<double>(i);
    return true;
  }
  return false;
}

}  // namespace

// Reads the file front to back; every read is checked against the bytes left.
class File::Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& file) : data_(data), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(size_t n, const std::string& what) const {
    if (n > remaining())
      throw Error(file_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                  std::to_string(pos_) + ", file has " + std::to_string(size_));
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    uint64_t len = read<uint64_t>(what + " length");
    if (len > remaining())
      throw Error(file_ + ": " + what + ": string length " + std::to_string(len) + " exceeds the " +
                  std::to_string(remaining()) + " bytes left in the file");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  Value read_value(uint32_t type, const std::string& what, bool allow_array) {
    Value val;
    switch (type) {
      case kU8: val.v = uint64_t{read<uint8_t>(what)}; break;
      case kI8: val.v = int64_t{read<int8_t>(what)}; break;
      case kU16: val.v = uint64_t{read<uint16_t>(what)}; break;
      case kI16: val.v = int64_t{read<int16_t>(what)}; break;
      case kU32: val.v = uint64_t{read<uint32_t>(what)}; break;
      case kI32: val.v = int64_t{read<int32_t>(what)}; break;
      case kU64: val.v = read<uint64_t>(what); break;
      case kI64: val.v = read<int64_t>(what); break;
      case kF32: val.v = double{read<float>(what)}; break;
      case kF64: val.v = read<double>(what); break;
      case kBool: {
        uint8_t b = read<uint8_t>(what);
        if (b > 1) throw Error(file_ + ": " + what + ": bool value " + std::to_string(b) + ", expected 0 or 1");
        val.v = b != 0;
        break;
      }
      case kString: val.v = read_string(what); break;
      case kArray: {
        if (!allow_array) throw Error(file_ + ": " + what + ": nested arrays are not supported");
        uint32_t elem_type = read<uint32_t>(what + " element type");
        uint64_t count = read<uint64_t>(what + " element count");
        size_t min_bytes = min_value_bytes(elem_type);
        if (min_bytes == 0 || elem_type == kArray)
          throw Error(file_ + ": " + what + ": array element type " + std::to_string(elem_type) +
                      " is not a scalar or string type (0..12 except 9)");
        if (count > remaining() / min_bytes)
          throw Error(file_ + ": " + what + ": array of " + std::to_string(count) + " elements cannot fit in the " +
                      std::to_string(remaining()) + " bytes left in the file");
        Array arr;
        arr.reserve(static_cast<size_t>(count));
        for (uint64_t i = 0; i < count; ++i) arr.push_back(read_value(elem_type, what, false));
        val.v = std::move(arr);
        break;
      }
      default:
        throw Error(file_ + ": " + what + ": unknown metadata value type " + std::to_string(type) +
                    " (expected 0..12)");
    }
    return val;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
};

std::shared_ptr<File> File::open(const std::filesystem::path& path) {
  std::shared_ptr<File> f(new File());
  f->path_ = path;
  f->mapping_ = MappedFile::open(path);
  f->base_ = f->mapping_->data();
  f->size_ = f->mapping_->size();
  f->parse();
  return f;
}

std::shared_ptr<File> File::from_memory(const uint8_t* data, size_t size, const std::string& name) {
  std::shared_ptr<File> f(new File());
  f->path_ = name;
  f->base_ = data;
  f->size_ = size;
  f->parse();
  return f;
}

File::~File() = default;

void File::fail(const std::string& what) const { throw Error(path_.string() + ": " + what); }

void File::parse() {
  const std::string file = path_.string();
  Reader r(base_, size_, file);
  const Counts n = read_header(r);
  read_metadata(r, n.metadata);
  read_alignment();
  read_tensor_infos(r, n.tensors);
  place_data_section(r.pos());
  check_tensor_ranges();
}

File::Counts File::read_header(Reader& r) {
  uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kMagic) fail("not a GGUF file (magic bytes are not 'GGUF')");
  version_ = r.read<uint32_t>("version");
  if (version_ == 1) fail("GGUF version 1 is not supported (expected 2 or 3)");
  if (version_ != 2 && version_ != 3) {
    // A byte-swapped small number means a big-endian file.
    if ((version_ & 0xFFFF) == 0 && (version_ >> 24) <= 3)
      fail("big-endian GGUF files are not supported");
    fail("version " + std::to_string(version_) + ", expected 2 or 3");
  }
  Counts n;
  n.tensors = r.read<uint64_t>("tensor count");
  n.metadata = r.read<uint64_t>("metadata count");
  // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least
  // 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset).
  if (n.metadata > r.remaining() / 13)
    fail("header metadata count " + std::to_string(n.metadata) + " cannot fit in a file of " +
         std::to_string(size_) + " bytes");
  if (n.tensors > r.remaining() / 32)
    fail("header tensor count " + std::to_string(n.tensors) + " cannot fit in a file of " +
         std::to_string(size_) + " bytes");
  return n;
}

void File::read_metadata(Reader& r, uint64_t n_kv) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.read_string("metadata key #" + std::to_string(i));
    uint32_t type = r.read<uint32_t>("metadata '" + key + "' type");
    Value v = r.read_value(type, "metadata '" + key + "'", true);
    if (!metadata_.emplace(key, std::move(v)).second) fail("metadata key '" + key + "' appears twice");
  }
}

void File::read_alignment() {
  if (auto it = metadata_.find("general.alignment"); it != metadata_.end()) {
    int64_t a = 0;
    if (!as_int(it->second, &a) || a <= 0 || a > (1 << 24) || (a & (a - 1)) != 0)
      fail("metadata 'general.alignment': expected a power of two, got a " + std::string(value_kind(it->second)) +
           (as_int(it->second, &a) ? " " + std::to_string(a) : std::string()));
    alignment_ = static_cast<uint32_t>(a);
  }
}

void File::read_tensor_infos(Reader& r, uint64_t n_tensors) {
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t = read_tensor_info(r, i);
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) fail("tensor '" + t.name + "' appears twice");
    tensors_.push_back(std::move(t));
  }
}

TensorInfo File::read_tensor_info(Reader& r, uint64_t i) {
  TensorInfo t;
  t.name = r.read_string("tensor #" + std::to_string(i) + " name");
  const std::string what = "tensor '" + t.name + "'";
  uint32_t n_dims = r.read<uint32_t>(what + " n_dims");
  if (n_dims == 0 || n_dims > kMaxDims)
    fail(what + ": n_dims " + std::to_string(n_dims) + ", expected 1.." + std::to_string(kMaxDims));
  std::vector<int64_t> ne(n_dims);
  int64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t n = r.read<uint64_t>(what + " ne[" + std::to_string(d) + "]");
    if (n > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, static_cast<int64_t>(n), &numel))
      fail(what + ": element count overflows (ne[" + std::to_string(d) + "] = " + std::to_string(n) + ")");
    ne[d] = static_cast<int64_t>(n);
  }
  t.shape.assign(ne.rbegin(), ne.rend());  // GGUF stores the fastest-varying dimension first
  t.ggml_type = r.read<uint32_t>(what + " type");
  t.offset = r.read<uint64_t>(what + " offset");
  int block_elems = 0, block_bytes = 0;
  if (!ggml_type_layout(t.ggml_type, &block_elems, &block_bytes))
    fail(what + ": unknown ggml type " + std::to_string(t.ggml_type));
  if (ne[0] % block_elems != 0)
    fail(what + ": row length " + std::to_string(ne[0]) + " is not a multiple of the " +
         ggml_type_name(t.ggml_type) + " block size " + std::to_string(block_elems));
  t.nbytes = static_cast<uint64_t>(numel / block_elems) * static_cast<uint64_t>(block_bytes);
  if (t.offset % alignment_ != 0)
    fail(what + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
         std::to_string(alignment_));
  return t;
}

void File::place_data_section(size_t infos_end) {
  size_t pad = (alignment_ - infos_end % alignment_) % alignment_;
  data_offset_ = infos_end + pad;
  if (data_offset_ > size_) {
    // A vocabulary-only file may end right after its tensor infos, without padding.
    if (!tensors_.empty())
      fail("truncated: data section starts at offset " + std::to_string(data_offset_) + ", file has " +
           std::to_string(size_) + " bytes");
    data_offset_ = size_;
  }
}

// Every tensor's bytes inside the data section, none overlapping another.
void File::check_tensor_ranges() const {
  const uint64_t data_size = size_ - data_offset_;
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail("tensor '" + t.name + "': bytes [" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.nbytes) +
           ") lie outside the data section of " + std::to_string(data_size) + " bytes");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (prev.nbytes > 0 && cur.nbytes > 0 && prev.offset + prev.nbytes > cur.offset)
      fail("tensor '" + cur.name + "' at offset " + std::to_string(cur.offset) + " overlaps tensor '" + prev.name +
           "' [" + std::to_string(prev.offset) + ", " + std::to_string(prev.offset + prev.nbytes) + ")");
  }
}

const Value& File::get(const std::string& key, const char* expected) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) fail("metadata key '" + key + "' is missing (expected " + expected + ")");
  return it->second;
}

std::string File::get_string(const std::string& key) const {
  const Value& v = get(key, "a string");
  if (auto* s = std::get_if<std::string>(&v.v)) return *s;
  fail("metadata key '" + key + "': expected a string, got " + value_kind(v));
}

int64_t File::get_int(const std::string& key) const {
  const Value& v = get(key, "an integer");
  int64_t i;
  if (as_int(v, &i)) return i;
  fail("metadata key '" + key + "': expected an integer, got " + value_kind(v));
}

double File::get_float(const std::string& key) const {
  const Value& v = get(key, "a number");
  double d;
  if (as_float(v, &d)) return d;
  fail("metadata key '" + key + "': expected a number, got " + value_kind(v));
}

bool File::get_bool(const std::string& key) const {
  const Value& v = get(key, "a bool");
  if (auto* b = std::get_if<bool>(&v.v)) return *b;
  fail("metadata key '" + key + "': expected a bool, got " + value_kind(v));
}

std::vector<std::string> File::get_string_array(const std::string& key) const {
  const Value& v = get(key, "an array of strings");
  auto* arr = std::get_if<Array>(&v.v);
  if (!arr) fail("metadata key '" + key + "': expected an array of strings, got " + value_kind(v));
  std::vector<std::string> out;
  out.reserve(arr->size());
  for (const auto& e : *arr) {
    auto* s = std::get_if<std::string>(&e.v);
    if (!s) fail("metadata key '" + key + "': expected an array of strings, got an array of " + value_kind(e));
    out.push_back(*s);
  }
  return out;
}

std::vector<double> File::get_float_array(const std::string& key) const {
  const Value& v = get(key, "an array of numbers");
  auto* arr = std::get_if<Array>(&v.v);
  if (!arr) fail("metadata key '" + key + "': expected an array of numbers, got " + value_kind(v));
  std::vector<double> out;
  out.reserve(arr->size());
  for (const auto& e : *arr) {
    double d;
    if (!as_float(e, &d)) fail("metadata key '" + key + "': expected an array of numbers, got an array of " + value_kind(e));
    out.push_back(d);
  }
  return out;
}

std::vector<int64_t> File::get_int_array(const std::string& key) const {
  const Value& v = get(key, "an array of integers");
  auto* arr = std::get_if<Array>(&v.v);
  if (!arr) fail("metadata key '" + key + "': expected an array of integers, got " + value_kind(v));
  std::vector<int64_t> out;
  out.reserve(arr->size());
  for (const auto& e : *arr) {
    int64_t i;
    if (!as_int(e, &i)) fail("metadata key '" + key + "': expected an array of integers, got an array of " + value_kind(e));
    out.push_back(i);
  }
  return out;
}

std::optional<int64_t> File::find_int(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}

std::optional<std::string> File::find_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

std::optional<double> File::find_float(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}

std::optional<size_t> File::find_array_size(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return std::nullopt;
  auto* arr = std::get_if<Array>(&it->second.v);
  if (!arr) fail("metadata key '" + key + "': expected an array, got " + value_kind(it->second));
  return arr->size();
}

std::optional<TensorView> File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) return std::nullopt;
  const TensorInfo& t = tensors_[it->second];
  std::optional<DType> dt = dtype_from_ggml(t.ggml_type);
  if (!dt)
    fail("tensor '" + name + "': ggml type " + std::to_string(t.ggml_type) + " (" + ggml_type_name(t.ggml_type) +
         ") is not supported (supported: " + supported_ggml_types() + ")");
  TensorView v;
  v.name = name;
  v.dtype = *dt;
  v.shape = t.shape;
  v.data = base_ + data_offset_ + t.offset;
  v.nbytes = static_cast<size_t>(t.nbytes);
  return v;
}

TensorView File::tensor(const std::string& name) const {
  std::optional<TensorView> v = find_tensor(name);
  if (!v) fail("tensor '" + name + "' is missing");
  return *v;
}

}  // namespace hg::gguf
