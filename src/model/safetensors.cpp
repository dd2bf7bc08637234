// safetensors layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to its start.
#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hybridgen/error.h"
#include "model/mapped_file.h"

namespace hg {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Element sizes of every safetensors dtype, so that files with other tensors can still be
// bounds-checked; only F32/F16/BF16 are usable.
int dtype_size(const std::string& d) {
  static const std::map<std::string, int> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

std::optional<DType> usable_dtype(const std::string& d) {
  if (d == "F32") return DType::F32;
  if (d == "F16") return DType::F16;
  if (d == "BF16") return DType::BF16;
  return std::nullopt;
}

json parse_json(const char* begin, size_t n, const std::string& file, const std::string& what) {
  try {
    return json::parse(begin, begin + n);
  } catch (const json::exception& e) {
    throw Error(file + ": " + what + " is not valid JSON: " + e.what());
  }
}

}  // namespace

void SafetensorsSet::add_file(const uint8_t* data, size_t size, const std::string& file) {
  if (size < 8) throw Error(file + ": truncated: " + std::to_string(size) + " bytes, a safetensors file needs at least 8");
  uint64_t header_len;
  std::memcpy(&header_len, data, 8);
  if (header_len > size - 8)
    throw Error(file + ": header length " + std::to_string(header_len) + " goes beyond the file of " +
                std::to_string(size) + " bytes");
  json header = parse_json(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(header_len), file, "header");
  if (!header.is_object()) throw Error(file + ": header: expected a JSON object");
  const uint8_t* data_section = data + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  struct Range {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& info = it.value();
    const std::string what = file + ": tensor '" + name + "'";
    if (!info.is_object()) throw Error(what + ": expected an object with dtype, shape, data_offsets");
    auto dt = info.find("dtype");
    auto sh = info.find("shape");
    auto off = info.find("data_offsets");
    if (dt == info.end() || !dt->is_string()) throw Error(what + ": missing field 'dtype' (string)");
    if (sh == info.end() || !sh->is_array()) throw Error(what + ": missing field 'shape' (array)");
    if (off == info.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      throw Error(what + ": field 'data_offsets': expected [begin, end] of non-negative integers");
    const std::string dtype = dt->get<std::string>();
    int esize = dtype_size(dtype);
    if (esize == 0) throw Error(what + ": unknown dtype '" + dtype + "'");
    Entry e;
    e.file = file;
    e.view.name = name;
    int64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        throw Error(what + ": field 'shape': expected non-negative integers, got " + sh->dump());
      int64_t n = d.get<int64_t>();
      if (__builtin_mul_overflow(numel, n, &numel)) throw Error(what + ": shape " + sh->dump() + " overflows");
      e.view.shape.push_back(n);
    }
    uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw Error(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] lie outside the data section of " + std::to_string(data_size) + " bytes");
    uint64_t expected_bytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(esize), &expected_bytes) ||
        end - begin != expected_bytes)
      throw Error(what + ": data_offsets span " + std::to_string(end - begin) + " bytes, shape " + sh->dump() +
                  " of " + dtype + " needs " + std::to_string(numel) + " x " + std::to_string(esize));
    if (auto usable = usable_dtype(dtype)) e.view.dtype = *usable;
    else e.unsupported_dtype = dtype;
    e.view.data = data_section + begin;
    e.view.nbytes = static_cast<size_t>(end - begin);
    auto [pos, inserted] = entries_.emplace(name, std::move(e));
    if (!inserted) throw Error(what + ": appears in both " + pos->second.file + " and " + file);
    ranges.push_back({begin, end, &pos->first});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i - 1].end > ranges[i].begin && ranges[i].end > ranges[i].begin)
      throw Error(file + ": tensor '" + *ranges[i].name + "' at data offset " + std::to_string(ranges[i].begin) +
                  " overlaps tensor '" + *ranges[i - 1].name + "' [" + std::to_string(ranges[i - 1].begin) + ", " +
                  std::to_string(ranges[i - 1].end) + ")");
  }
}

std::unique_ptr<SafetensorsSet> SafetensorsSet::open_file(const fs::path& file) {
  auto set = std::unique_ptr<SafetensorsSet>(new SafetensorsSet());
  set->origin_ = file.string();
  auto m = MappedFile::open(file);
  set->add_file(m->data(), m->size(), file.string());
  set->storage_.push_back(m);
  return set;
}

std::unique_ptr<SafetensorsSet> SafetensorsSet::from_memory(const uint8_t* data, size_t size, const std::string& name) {
  auto set = std::unique_ptr<SafetensorsSet>(new SafetensorsSet());
  set->origin_ = name;
  set->add_file(data, size, name);
  return set;
}

std::unique_ptr<SafetensorsSet> SafetensorsSet::open_dir(const fs::path& dir) {
  fs::path single = dir / "model.safetensors";
  fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) return open_file(single);
  if (!fs::exists(index))
    throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json in the directory");

  std::ifstream in(index, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  json j = parse_json(text.data(), text.size(), index.string(), "index");
  auto wm = j.is_object() ? j.find("weight_map") : j.end();
  if (!j.is_object() || wm == j.end() || !wm->is_object())
    throw Error(index.string() + ": missing field 'weight_map' (object of tensor name -> shard file)");

  auto set = std::unique_ptr<SafetensorsSet>(new SafetensorsSet());
  set->origin_ = index.string();
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      throw Error(index.string() + ": weight_map['" + it.key() + "']: expected a shard file name");
    std::string shard = it.value().get<std::string>();
    // Shards must sit beside the index: no paths that climb out of the model directory.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      throw Error(index.string() + ": weight_map['" + it.key() + "']: shard '" + shard + "' is not a plain file name");
    shards.insert(shard);
  }
  for (const auto& shard : shards) {
    fs::path p = dir / shard;
    if (!fs::exists(p)) throw Error(index.string() + ": shard '" + shard + "' listed in weight_map does not exist");
    auto m = MappedFile::open(p);
    set->add_file(m->data(), m->size(), p.string());
    set->storage_.push_back(m);
  }
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    auto e = set->entries_.find(it.key());
    fs::path expected = dir / it.value().get<std::string>();
    if (e == set->entries_.end() || e->second.file != expected.string())
      throw Error(index.string() + ": tensor '" + it.key() + "' is listed in weight_map under '" +
                  it.value().get<std::string>() + "' but that shard does not hold it");
  }
  return set;
}

std::optional<TensorView> SafetensorsSet::find(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  if (!it->second.unsupported_dtype.empty())
    throw Error(it->second.file + ": tensor '" + name + "': dtype " + it->second.unsupported_dtype +
                " is not supported (expected F32, F16 or BF16)");
  return it->second.view;
}

std::string SafetensorsSet::file_of(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? origin_ : it->second.file;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

}  // namespace hg
