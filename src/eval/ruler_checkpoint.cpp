#include "eval/ruler_checkpoint.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hybridgen/error.h"
#include "util/hash.h"

namespace hg::eval {

namespace {

constexpr int kFormat = 1;

// What differs between two runs' descriptions: "length 4096 here, 8192 in the file; ...".
std::string differences(const nlohmann::json& here, const nlohmann::json& there) {
  std::string out;
  auto note = [&](const std::string& key, const nlohmann::json& a, const nlohmann::json& b) {
    if (a == b) return;
    std::string sa = a.is_null() ? "none" : a.dump(), sb = b.is_null() ? "none" : b.dump();
    if (sa.size() > 120) sa = sa.substr(0, 117) + "...";
    if (sb.size() > 120) sb = sb.substr(0, 117) + "...";
    out += (out.empty() ? "" : "; ") + key + " " + sa + " here, " + sb + " in the file";
  };
  if (!here.is_object() || !there.is_object()) {
    note("run", here, there);
    return out;
  }
  for (const auto& [key, value] : here.items()) note(key, value, there.contains(key) ? there[key] : nlohmann::json());
  for (const auto& [key, value] : there.items())
    if (!here.contains(key)) note(key, nlohmann::json(), value);
  return out;
}

}  // namespace

std::string RulerCheckpoint::prompt_hash(std::span<const int32_t> ids) {
  Fnv1a h;  // over the ids' bytes, as the prefill cache keys a prompt
  h.add(ids.data(), ids.size_bytes());
  return h.hex();
}

RulerCheckpoint::RulerCheckpoint(std::string path, const nlohmann::json& run) : path_(std::move(path)) {
  namespace fs = std::filesystem;
  const std::string what = "--checkpoint " + path_;
  std::string text;
  if (fs::exists(path_)) {
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw Error(what + ": cannot be read");
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else if (fs::path(path_).has_parent_path()) {
    std::error_code ec;
    fs::create_directories(fs::path(path_).parent_path(), ec);
    if (ec) throw Error(what + ": cannot create its directory: " + ec.message());
  }
  // a run killed while writing a line leaves it torn: drop it
  const size_t whole = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (whole < text.size()) {
    text.resize(whole);
    std::error_code ec;
    fs::resize_file(path_, whole, ec);
    if (ec) throw Error(what + ": cannot drop its torn last line: " + ec.message());
  }
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (n == 1) {
      if (!j.is_object() || j.value("ruler_checkpoint", 0) != kFormat)
        throw Error(what + ": not a RULER checkpoint of this version (its first line); remove it or name another file");
      if (j["run"] != run)
        throw Error(what + ": it holds samples of another run (" + differences(run, j["run"]) +
                    "); remove it or name another file");
      continue;
    }
    if (!j.is_object() || !j.contains("task") || !j.contains("index") || !j.contains("prompt") ||
        !j.contains("replies") || !j["task"].is_string() || !j["index"].is_number_integer())
      throw Error(what + ":" + std::to_string(n) + ": not a sample line; remove the file or name another");
    done_[{j["task"].get<std::string>(), j["index"].get<int>()}] = j;
  }
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) throw Error(what + ": cannot be written: " + std::strerror(errno));
  if (n == 0) {
    const std::string header = nlohmann::json{{"ruler_checkpoint", kFormat}, {"run", run}}.dump() + "\n";
    if (std::fputs(header.c_str(), file_) < 0 || std::fflush(file_) != 0)
      throw Error(what + ": cannot be written: " + std::strerror(errno));
  }
}

RulerCheckpoint::~RulerCheckpoint() {
  if (file_) std::fclose(file_);
}

const nlohmann::json* RulerCheckpoint::find(const std::string& task, int index, std::span<const int32_t> ids) const {
  const auto it = done_.find({task, index});
  if (it == done_.end() || it->second["prompt"] != prompt_hash(ids)) return nullptr;
  return &it->second;
}

void RulerCheckpoint::add(const std::string& task, int index, std::span<const int32_t> ids,
                          const nlohmann::json& prefill, const nlohmann::json& replies) {
  nlohmann::json j = {
      {"task", task}, {"index", index}, {"prompt", prompt_hash(ids)}, {"prefill", prefill}, {"replies", replies}};
  // a reply cut inside a UTF-8 sequence is stored as the results file stores it (U+FFFD)
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fputs(line.c_str(), file_) < 0 || std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
    throw Error("--checkpoint " + path_ + ": cannot be written: " + std::strerror(errno));
  done_[{task, index}] = std::move(j);
}

}  // namespace hg::eval
